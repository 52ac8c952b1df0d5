"""A window store behind the record cache (Kafka's CachingWindowStore): a window updated many times between two
flushes is written below and forwarded once, with the value the store below held as the old value; reads see the
cache (range reads too, for sliding windows); a discard drops the cached windows."""

from __future__ import annotations

import gc
from pathlib import Path

from logged_store_fixtures import LoggedStore
from streamapp.serdes import serde_for
from streamapp.state.caching_window_store import CachingSlidingWindowStore, CachingWindowStore
from streamapp.state.record_cache import ThreadCache
from streamapp.state.window_store import WindowStore, WindowValue
from streamapp.windowed import Windowed

SIZE = 60_000


class CachedWindows:
    """A caching window store (string -> long) over a logged in-memory window store, recording what it forwards."""

    def __init__(self, cache: ThreadCache) -> None:
        self.logged = LoggedStore("memory", Path("."))
        self.below = WindowStore(
            self.logged.logged, serde_for("string"), serde_for("long"), retention_ms=2 * SIZE, window_size_ms=SIZE
        )
        self.store = CachingWindowStore(self.below, cache, "0_0-windows")
        self.forwarded: list[tuple[Windowed, int | None, int | None, int]] = []
        self.store.set_flush_listener(lambda key, new, old, ts: self.forwarded.append((key, new, old, ts)))

    def count(self, key: str, start: int, timestamp: int) -> None:
        found = self.store.fetch(key, start)
        self.store.put(key, 1 if found is None else found.value + 1, start, timestamp)


def test_a_hot_window_is_written_below_and_forwarded_once_per_flush_with_the_last_flushed_value_as_old() -> None:
    windows = CachedWindows(ThreadCache(10 << 20))
    for t in range(100):
        windows.count("a", 0, t)
    assert windows.forwarded == []
    assert windows.store.fetch("a", 0) == WindowValue(100, 99)  # reads see the cache
    assert windows.below.fetch("a", 0) is None

    windows.store.flush()
    windows.logged.commit()
    windows.count("a", 0, 100)
    windows.count("b", SIZE, SIZE)
    windows.store.flush()

    assert windows.forwarded == [
        (Windowed("a", 0, SIZE), 100, None, 99),
        (Windowed("a", 0, SIZE), 101, 100, 100),
        (Windowed("b", SIZE, 2 * SIZE), 1, None, SIZE),
    ]
    assert [key for key, _, _ in windows.logged.producer.sent] == [b"a" + (0).to_bytes(12, "big")]  # one per flush


def test_eviction_flushes_the_dirty_windows_while_processing_and_discard_drops_the_rest() -> None:
    windows = CachedWindows(ThreadCache(600))  # room for two windows
    windows.count("a", 0, 1)
    windows.count("b", 0, 2)
    windows.count("c", 0, 3)  # over the bound: the least recently used window "a" leaves, flushing all three

    assert [(key.key, new) for key, new, _, _ in windows.forwarded] == [("a", 1), ("b", 1), ("c", 1)]
    windows.count("c", 0, 4)
    windows.store.discard()
    windows.store.flush()
    assert len(windows.forwarded) == 3
    assert windows.store.fetch("c", 0) == WindowValue(1, 3)  # the flushed value, not the discarded update


def test_the_old_value_of_a_window_read_from_below_before_its_put_is_what_the_flush_forwards() -> None:
    windows = CachedWindows(ThreadCache(10 << 20))
    windows.count("a", 0, 1)
    windows.store.flush()
    windows.logged.commit()
    windows.store.discard()  # the cache forgets "a": the next fetch reads the store below

    windows.count("a", 0, 2)
    windows.store.flush()

    assert windows.forwarded[-1] == (Windowed("a", 0, SIZE), 2, 1, 2)


def test_an_aggregate_changed_in_place_is_forwarded_with_the_old_value_the_store_below_held() -> None:
    logged = LoggedStore("memory", Path("."))
    below = WindowStore(
        logged.logged, serde_for("string"), serde_for("json"), retention_ms=2 * SIZE, window_size_ms=SIZE
    )
    store = CachingWindowStore(below, ThreadCache(10 << 20), "0_0-lists")
    forwarded: list[tuple[object, object]] = []
    store.set_flush_listener(lambda key, new, old, ts: forwarded.append((list(new), old)))

    def append(item: int, timestamp: int) -> None:
        found = store.fetch("a", 0)
        aggregate = [] if found is None else found.value
        aggregate.append(item)  # an aggregator that updates its aggregate in place
        store.put("a", aggregate, 0, timestamp)

    append(1, 1)
    store.flush()
    logged.commit()
    append(2, 2)
    store.flush()

    assert forwarded == [([1], None), ([1, 2], [1])]


def test_cached_windows_of_immutable_aggregates_cost_the_garbage_collector_nothing() -> None:
    """CPython stops tracking an exact tuple of untracked values at a collection, never a tuple subclass: entries
    that stayed tracked made every full collection walk the whole cache (a third of the windowed count's time)."""
    windows = CachedWindows(ThreadCache(10 << 20))
    for start in range(0, 100 * SIZE, SIZE):
        windows.count("a", start, start)
    windows.store.flush()  # flushed entries stay in the cache, clean
    windows.count("b", 0, 0)  # and a dirty one whose store value was read
    gc.collect()
    gc.collect()  # one pass untracks the inner tuples, the next the entries that hold them
    entries = list(windows.store._cache._entries.values())
    assert len(entries) == 101
    assert not any(gc.is_tracked(entry) for entry in entries)


# -- range reads (sliding windows, Kafka's CachingWindowStore.fetch(key, from, to)) ---------------------------


class CachedSlidingWindows(CachedWindows):
    """``CachedWindows`` through a ``CachingSlidingWindowStore``."""

    def __init__(self, cache: ThreadCache) -> None:
        super().__init__(cache)
        self.store = CachingSlidingWindowStore(self.below, cache, "0_0-sliding")
        self.store.set_flush_listener(lambda key, new, old, ts: self.forwarded.append((key, new, old, ts)))


def test_a_range_read_merges_the_cached_windows_over_the_store_below_by_start() -> None:
    windows = CachedSlidingWindows(ThreadCache(10 << 20))
    windows.count("a", 0, 1)
    windows.count("a", 20, 21)
    windows.store.flush()
    windows.logged.commit()
    windows.count("a", 10, 11)  # cached only
    windows.count("a", 20, 22)  # cached over the stored 1
    windows.count("b", 15, 15)  # another key's window is not in "a"'s reads

    assert windows.below.fetch_range("a", 0, 100) == [(0, WindowValue(1, 1)), (20, WindowValue(1, 21))]
    assert windows.store.fetch_range("a", 0, 100) == [
        (0, WindowValue(1, 1)),
        (10, WindowValue(1, 11)),
        (20, WindowValue(2, 22)),
    ]
    assert windows.store.fetch_range("a", 5, 15) == [(10, WindowValue(1, 11))]
    windows.store.flush()
    assert windows.forwarded[2:] == [
        (Windowed("a", 10, 10 + SIZE), 1, None, 11),
        (Windowed("a", 20, 20 + SIZE), 2, 1, 22),
        (Windowed("b", 15, 15 + SIZE), 1, None, 15),
    ]


def test_range_reads_hide_expired_windows_and_evicted_windows_are_read_from_below() -> None:
    windows = CachedSlidingWindows(ThreadCache(500))  # room for two windows (225 bytes each)
    windows.count("a", 0, 0)
    windows.count("a", 10, 10)
    windows.count("a", 20, 20)  # evicts the window at 0: all three flushed below
    assert windows.store._windows.snapshot() == {
        b"a": {b"a" + start.to_bytes(8, "big") + bytes(4) for start in (10, 20)}
    }
    assert [start for start, _ in windows.store.fetch_range("a", 0, 100)] == [0, 10, 20]

    windows.store.put("a", 1, 2 * SIZE + 15, 2 * SIZE + 15)  # stream time: windows starting before 15 expire
    windows.store.put("a", 9, 5, 5)  # dropped
    assert [start for start, _ in windows.store.fetch_range("a", 0, 3 * SIZE)] == [20, 2 * SIZE + 15]


def test_a_mutable_aggregate_seeding_another_window_is_a_copy() -> None:
    logged = LoggedStore("memory", Path("."))
    below = WindowStore(
        logged.logged, serde_for("string"), serde_for("json"), retention_ms=2 * SIZE, window_size_ms=SIZE
    )
    store = CachingSlidingWindowStore(below, ThreadCache(10 << 20), "0_0-lists")
    aggregate = [1]
    assert store.detached(aggregate) == [1] and store.detached(aggregate) is not aggregate
    assert store.detached(7) == 7


def test_fetch_all_by_start_merges_the_cached_windows_over_the_stores_by_start_then_key() -> None:
    """What an ``EmitStrategy.onWindowClose()`` aggregation reads (Kafka's ``CachingWindowStore.fetchAll`` over its
    time-ordered store): flushed windows from below, dirty ones from the cache, by start then key bytes, in range."""
    windows = CachedWindows(ThreadCache(10 << 20))
    windows.count("b", 0, 5)
    windows.count("a", SIZE, SIZE + 1)
    windows.store.flush()
    windows.logged.commit()
    windows.count("b", 0, 7)  # dirty: the cache's 2 replaces the store's 1
    windows.count("a", 0, 3)  # only in the cache
    windows.count("c", 2 * SIZE, 2 * SIZE)  # out of range

    found = windows.store.fetch_all_by_start(0, SIZE)

    assert found == [
        (Windowed("a", 0, SIZE), WindowValue(1, 3)),
        (Windowed("b", 0, SIZE), WindowValue(2, 7)),
        (Windowed("a", SIZE, 2 * SIZE), WindowValue(1, SIZE + 1)),
    ]
    assert windows.below.fetch_all_by_start(0, SIZE) == [
        (Windowed("b", 0, SIZE), WindowValue(1, 5)),
        (Windowed("a", SIZE, 2 * SIZE), WindowValue(1, SIZE + 1)),
    ]
