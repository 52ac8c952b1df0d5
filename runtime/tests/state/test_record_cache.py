"""The record cache (KIP-63): dirty entries wait until a flush or an eviction, which forwards them with the value
the store below held before; eviction takes the least recently used entry and flushes the whole named cache."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
from logged_store_fixtures import CHANGELOG, LoggedStore
from streamapp.processors.base import RecordContext
from streamapp.serdes import serde_for
from streamapp.state.record_cache import CACHE_ENTRY_OVERHEAD_BYTES, CachingKeyValueStore, ThreadCache
from streamapp.state.timestamped import TimestampedChangeLoggingKeyValueStore

ONE_ENTRY = 1 + 8 + CACHE_ENTRY_OVERHEAD_BYTES  # a one-letter key and a number


class Cached:
    """A timestamped logged store under a caching store, typed string -> long, recording what is forwarded."""

    def __init__(
        self, cache: ThreadCache, namespace: str = "0_0-counts", record_context: RecordContext | None = None
    ) -> None:
        self.now = 0
        self.logged = LoggedStore("memory", Path("."))
        self.logged.logged = TimestampedChangeLoggingKeyValueStore(self.logged.persistent, CHANGELOG, lambda: self.now)
        self.caching = CachingKeyValueStore(
            self.logged.logged, serde_for("string", is_key=True), serde_for("long"), cache, namespace, record_context
        )
        self.view = self.caching
        self.forwarded: list[tuple[str, int | None, int | None, int]] = []
        self.view.set_flush_listener(lambda key, new, old, ts: self.forwarded.append((key, new, old, ts)))

    def put(self, key: str, value: int | None, timestamp: int) -> None:
        self.now = timestamp
        self.view.put(key, value, timestamp)


def test_a_hot_key_is_forwarded_and_logged_once_per_flush_with_its_last_flushed_value_as_old() -> None:
    store = Cached(ThreadCache(10 << 20))
    for n in range(1, 101):
        store.put("k", n, n)
    assert store.forwarded == []
    assert store.view.get("k") == 100  # reads see the cache

    store.caching.flush()
    store.logged.commit()
    store.put("k", 101, 200)
    store.caching.flush()

    assert store.forwarded == [("k", 100, None, 100), ("k", 101, 100, 200)]
    assert [(key, ts) for key, _, ts in store.logged.producer.sent] == [(b"k", 100)]  # second flush not committed


def test_a_flush_forwards_dirty_keys_in_the_order_of_their_last_update() -> None:
    store = Cached(ThreadCache(10 << 20))
    store.put("a", 1, 1)
    store.put("b", 2, 2)
    store.put("a", 3, 3)

    store.caching.flush()

    assert [key for key, *_ in store.forwarded] == ["b", "a"]


def test_eviction_takes_the_least_recently_used_entry_first_then_flushes_every_dirty_entry() -> None:
    store = Cached(ThreadCache(3 * ONE_ENTRY))
    store.put("a", 1, 1)
    store.put("b", 2, 2)
    store.put("c", 3, 3)
    assert store.view.get("a") == 1  # a read makes "a" the most recently used: "b" is now the eldest
    assert store.forwarded == []

    store.put("d", 4, 4)  # over the bound: evict "b"

    assert [key for key, *_ in store.forwarded] == ["b", "a", "c", "d"]
    assert store.caching.has_dirty is False


def test_only_the_cache_that_was_written_evicts_even_when_another_holds_the_bytes() -> None:
    cache = ThreadCache(2 * ONE_ENTRY)
    first, second = Cached(cache, "0_0-counts"), Cached(cache, "0_1-counts")
    first.put("a", 1, 1)
    first.put("b", 2, 2)

    second.put("x", 9, 3)  # over the bound: the second cache evicts its own (only) entry

    assert first.forwarded == []
    assert second.forwarded == [("x", 9, None, 3)]


def test_a_delete_is_forwarded_with_the_old_value_at_the_deleting_records_time_and_leaves_the_cache() -> None:
    store = Cached(ThreadCache(10 << 20))
    store.put("k", 5, 10)
    store.caching.flush()

    store.put("k", None, 20)
    store.put("never-flushed", 1, 21)
    store.put("never-flushed", None, 22)  # neither old nor new: nothing forwarded
    store.caching.flush()

    assert store.forwarded == [("k", 5, None, 10), ("k", None, 5, 20)]
    assert store.view.get("k") is None


def test_discarded_entries_are_neither_forwarded_nor_written_below() -> None:
    cache = ThreadCache(10 << 20)
    store = Cached(cache)
    store.put("k", 1, 1)

    store.caching.discard()
    store.caching.flush()

    assert store.forwarded == []
    assert store.view.get("k") is None
    assert cache.size_bytes == 0


def test_a_cache_of_zero_bytes_is_refused_because_zero_turns_caching_off() -> None:
    with pytest.raises(ValueError, match="0 turns caching off"):
        ThreadCache(0)


def test_a_flushed_entry_is_forwarded_with_the_headers_of_the_record_that_last_wrote_it() -> None:
    context = RecordContext()
    store = Cached(ThreadCache(2 * ONE_ENTRY), record_context=context)
    seen: list[tuple[str, object]] = []
    store.view.set_flush_listener(lambda key, new, old, ts: seen.append((key, context.headers)))
    context.headers = [("trace", b"a-1")]
    store.put("a", 1, 1)
    context.headers = [("trace", b"a-2")]
    store.put("a", 2, 2)
    context.headers = None
    store.put("b", 3, 3)
    context.headers = [("trace", b"c")]
    store.put("c", 4, 4)  # over the bound: evicts "a" and flushes every dirty entry while "c" is processed

    assert seen == [("a", [("trace", b"a-2")]), ("b", None), ("c", [("trace", b"c")])]
    assert context.headers == [("trace", b"c")]  # the record being processed keeps its headers


class CountingJson:
    """The json serde, counting serializations."""

    name = "json"

    def __init__(self) -> None:
        self.inner = serde_for("json")
        self.serialized = 0

    def serialize(self, obj: object) -> bytes | None:
        self.serialized += 1
        return self.inner.serialize(obj)

    def deserialize(self, data: bytes | None) -> object:
        return self.inner.deserialize(data)


def test_a_hot_container_aggregate_is_serialized_once_on_insert_and_once_per_flush_not_per_put() -> None:
    values = CountingJson()
    logged = LoggedStore("memory", Path("."))
    cache = ThreadCache(10 << 20)
    store = CachingKeyValueStore(
        TimestampedChangeLoggingKeyValueStore(logged.persistent, CHANGELOG, lambda: 0),
        serde_for("string", is_key=True),
        values,
        cache,
        "0_0-lists",
    )
    for n in range(50):
        store.put("k", {"seen": list(range(n + 1))}, n)
    assert values.serialized == 1  # sized when "k" entered the cache
    store.flush()
    assert values.serialized == 2  # the flush writes the bytes below and re-measures the grown aggregate
    final = values.inner.serialize({"seen": list(range(50))})
    assert final is not None
    assert cache.size_bytes == len(b"k") + CACHE_ENTRY_OVERHEAD_BYTES + len(final)


def test_a_flushed_tombstone_is_logged_at_the_deleting_records_time_not_the_last_processed_records() -> None:
    store = Cached(ThreadCache(10 << 20))
    store.put("k", 5, 10)
    store.caching.flush()
    store.logged.commit()

    store.put("k", None, 20)
    store.put("other", 1, 30)  # the last record processed before the commit
    store.caching.flush()
    store.logged.commit()

    assert [(key, value, ts) for key, value, ts in store.logged.producer.sent[1:]] == [
        (b"k", None, 20),
        (b"other", serde_for("long").serialize(1), 30),
    ]


def test_cached_counts_are_not_tracked_by_the_cyclic_garbage_collector() -> None:
    cache = ThreadCache(10 << 20)
    store = Cached(cache)
    for n in range(100):
        store.put(f"k{n}", n, n)
    gc.collect()

    named = cache.named_cache("0_0-counts", lambda entries: None)
    entries = [named.peek(f"k{n}".encode()) for n in range(100)]
    assert all(entry is not None for entry in entries)  # the store's own entries (None is never tracked)
    assert not any(gc.is_tracked(entry) for entry in entries)  # a full cache costs no full collection
