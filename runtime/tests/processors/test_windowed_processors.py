"""Windowed aggregations and suppress at the processor level: Kafka Streams' window semantics and late drops, and
session and sliding-window aggregations behind the record cache."""

from __future__ import annotations

import copy
import random
from collections.abc import Iterator
from typing import Any

import pytest
from streamapp.kafka.types import TopicPartition
from streamapp.processors.base import Change, ProcessorMetrics
from streamapp.processors.windowed import (
    SessionWindowAggregateProcessor,
    SlidingWindowAggregateProcessor,
    SuppressionBufferFullError,
    SuppressProcessor,
    TimeWindowAggregateProcessor,
)
from streamapp.serdes import serde_for
from streamapp.state.caching_session_store import CachingSessionStore
from streamapp.state.caching_window_store import CachingSlidingWindowStore, CachingWindowStore
from streamapp.state.changelogging import ChangeLoggingKeyValueStore
from streamapp.state.memory import InMemoryKeyValueStore
from streamapp.state.record_cache import ThreadCache
from streamapp.state.session_store import SessionStore
from streamapp.state.suppression_buffer import SuppressionBuffer
from streamapp.state.window_store import WindowStore
from streamapp.topology.windows import WindowSpec
from streamapp.windowed import Windowed

STRING = serde_for("string")
LONG = serde_for("long")


class Collect:
    def __init__(self) -> None:
        self.records: list[tuple[Any, Any, int]] = []

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        self.records.append((key, value, timestamp))

    def latest(self) -> dict[Any, Any]:
        table: dict[Any, Any] = {}
        for key, change, _ in self.records:
            if change.new_value is None:
                table.pop(key, None)
            else:
                table[key] = change.new_value
        return table


def logged(name: str = "store") -> ChangeLoggingKeyValueStore:
    return ChangeLoggingKeyValueStore(
        InMemoryKeyValueStore(name), TopicPartition(f"app-{name}-changelog", 0), lambda: 0
    )


def count(key: Any, value: Any, agg: int) -> int:
    return agg + 1


def time_count(spec: WindowSpec, out: Collect, metrics: ProcessorMetrics) -> TimeWindowAggregateProcessor:
    store = WindowStore(logged(), STRING, LONG, retention_ms=spec.min_retention_ms(), window_size_ms=spec.size)
    return TimeWindowAggregateProcessor("count", store, spec, lambda: 0, count, [out], metrics)


def test_seed_article_late_record_updates_its_window_within_grace_and_is_dropped_after_it() -> None:
    """<1-5,3> becomes <1-5,4> when a late record arrives within grace; after grace it is dropped."""
    out, metrics = Collect(), ProcessorMetrics()
    p = time_count(WindowSpec(type="tumbling", size_ms=5000, grace_ms=2000), out, metrics)
    for ts in (1000, 3000, 4999):
        p.process("k", "v", ts)
    first = Windowed("k", 0, 5000)
    assert out.records[-1] == (first, Change(3, 2), 4999)
    p.process("k", "v", 6000)  # stream time 6000 < end 5000 + grace 2000: the window is still open
    p.process("k", "v", 2000)
    assert out.records[-1] == (first, Change(4, 3), 4999)
    p.process("k", "v", 7000)  # 5000 + 2000 <= 7000: closed
    before = list(out.records)
    p.process("k", "v", 2500)
    assert out.records == before
    assert metrics.dropped_records == 1
    assert out.latest()[first] == 4


def test_hopping_windows_update_every_window_containing_the_record_with_max_timestamp() -> None:
    out, metrics = Collect(), ProcessorMetrics()
    p = time_count(WindowSpec(type="hopping", size_ms=10, advance_ms=5, grace_ms=100), out, metrics)
    p.process("k", None, 12)  # null values are counted (Kafka checks only the key here)
    p.process("k", "v", 7)
    assert out.records == [
        (Windowed("k", 5, 15), Change(1, 0), 12),
        (Windowed("k", 10, 20), Change(1, 0), 12),
        (Windowed("k", 0, 10), Change(1, 0), 7),
        (Windowed("k", 5, 15), Change(2, 1), 12),
    ]


def test_time_windows_drop_null_keys_and_negative_timestamps_and_count_them() -> None:
    out, metrics = Collect(), ProcessorMetrics()
    p = time_count(WindowSpec(type="tumbling", size_ms=10), out, metrics)
    p.process(None, "v", 1)
    p.process("k", "v", -1)
    assert out.records == []
    assert metrics.dropped_records == 2


def test_a_record_is_dropped_once_per_closed_window_it_belongs_to() -> None:
    out, metrics = Collect(), ProcessorMetrics()
    p = time_count(WindowSpec(type="hopping", size_ms=10, advance_ms=5), out, metrics)
    p.process("k", "v", 20)
    p.process("k", "v", 12)  # windows [5,15) closed (15 <= 20), [10,20) closed (20 <= 20)
    p.process("k", "v", 16)  # [10,20) closed, [15,25) open
    assert metrics.dropped_records == 3
    assert out.records[-1] == (Windowed("k", 15, 25), Change(2, 1), 20)


def sliding_count(diff: int, grace: int, out: Collect, metrics: ProcessorMetrics) -> SlidingWindowAggregateProcessor:
    spec = WindowSpec(type="sliding", time_difference_ms=diff, grace_ms=grace)
    store = WindowStore(logged(), STRING, LONG, retention_ms=spec.min_retention_ms(), window_size_ms=diff)
    return SlidingWindowAggregateProcessor("sliding", store, spec, lambda: 0, count, [out], metrics)


def test_sliding_windows_exist_where_records_are_and_hold_the_records_within_the_difference() -> None:
    out, metrics = Collect(), ProcessorMetrics()
    p = sliding_count(10, 100, out, metrics)
    for ts in (20, 25, 40):
        p.process("k", "v", ts)
    table = out.latest()
    assert table[Windowed("k", 10, 20)] == 1
    assert table[Windowed("k", 15, 25)] == 2
    assert table[Windowed("k", 21, 31)] == 1
    assert table[Windowed("k", 30, 40)] == 1
    assert Windowed("k", 26, 36) not in table  # 25's right window would be empty: never created


def test_sliding_out_of_order_record_updates_the_windows_it_falls_into() -> None:
    out, metrics = Collect(), ProcessorMetrics()
    p = sliding_count(10, 100, out, metrics)
    for ts in (20, 40, 35):
        p.process("k", "v", ts)
    table = out.latest()
    assert table[Windowed("k", 30, 40)] == 2  # 40's left window now holds 35
    assert table[Windowed("k", 25, 35)] == 1  # 35's left window
    assert table[Windowed("k", 36, 46)] == 1  # 35's right window holds 40
    assert table[Windowed("k", 10, 20)] == 1
    assert Windowed("k", 21, 31) not in table  # 20's right window would be empty when 40 came: never created


def test_sliding_early_records_share_the_window_from_zero() -> None:
    out, metrics = Collect(), ProcessorMetrics()
    p = sliding_count(10, 100, out, metrics)
    p.process("k", "v", 3)
    p.process("k", "v", 5)
    table = out.latest()
    assert table[Windowed("k", 0, 10)] == 2
    assert table[Windowed("k", 4, 14)] == 1  # 3's right window holds 5


def test_sliding_record_is_counted_dropped_for_its_closed_left_window_and_dropped_when_all_are_closed() -> None:
    out, metrics = Collect(), ProcessorMetrics()
    p = sliding_count(10, 5, out, metrics)  # close time = stream time - 5
    p.process("k", "v", 100)
    p.process("k", "v", 95)  # left window [85,95]: 95 >= 95 still open (inclusive end)
    assert metrics.dropped_records == 0
    p.process("k", "v", 94)  # updates [85,95] and [90,100]; its own left window [84,94] is closed
    assert metrics.dropped_records == 1
    table = out.latest()
    assert table[Windowed("k", 90, 100)] == 3
    assert table[Windowed("k", 85, 95)] == 2
    assert Windowed("k", 84, 94) not in table
    before = list(out.records)
    p.process("k", "v", 84)  # 84 + 10 < 95: every window it could touch is closed
    assert metrics.dropped_records == 2
    assert out.records == before


def session_aggregate(gap: int, grace: int, out: Collect, metrics: ProcessorMetrics) -> SessionWindowAggregateProcessor:
    spec = WindowSpec(type="session", gap_ms=gap, grace_ms=grace)
    store = SessionStore(logged(), STRING, LONG, retention_ms=spec.min_retention_ms())
    return SessionWindowAggregateProcessor(
        "sessions", store, spec, lambda: 0, count, lambda k, a, b: a + b, [out], metrics
    )


def test_sessions_merge_records_within_the_gap_and_forward_tombstones_for_merged_sessions() -> None:
    out, metrics = Collect(), ProcessorMetrics()
    p = session_aggregate(10, 100, out, metrics)
    p.process("k", "v", 0)
    p.process("k", "v", 30)
    p.process("k", "v", 15)  # more than 10 from both: a session of its own
    assert out.latest() == {
        Windowed("k", 0, 0): 1,
        Windowed("k", 15, 15): 1,
        Windowed("k", 30, 30): 1,
    }
    p.process("k", "v", 8)  # within 10 of 0 and of 15: merges [0,0] and [15,15]
    assert out.records[-3:] == [
        (Windowed("k", 0, 0), Change(None, 1), 0),
        (Windowed("k", 15, 15), Change(None, 1), 15),
        (Windowed("k", 0, 15), Change(3, None), 15),
    ]
    p.process("k", "v", 22)  # merges [0,15] and [30,30]
    assert out.latest() == {Windowed("k", 0, 30): 5}


def test_a_session_is_late_when_its_end_plus_gap_plus_grace_is_before_stream_time() -> None:
    out, metrics = Collect(), ProcessorMetrics()
    p = session_aggregate(10, 5, out, metrics)  # close time = stream time - 5 - 10
    p.process("k", "v", 100)
    p.process("k", "v", 86)  # new session [86,86]: 86 >= 85, accepted
    p.process("k", "v", 84)  # merges with [86,86] -> [84,86]: end 86 >= 85, accepted
    p.process("j", "v", 85)  # a new session [85,85]: accepted (the bound is inclusive)
    assert metrics.dropped_records == 0
    p.process("i", "v", 84)  # a new session [84,84]: 84 < 85, dropped
    assert metrics.dropped_records == 1
    table = out.latest()
    assert table[Windowed("k", 84, 86)] == 2
    assert table[Windowed("j", 85, 85)] == 1
    assert all(window.key != "i" for window in table)


# -- behind the record cache (Kafka's CachingSessionStore with SessionCacheFlushListener): the processor only
# writes and the flush forwards; flushed after every record (as the TopologyTestDriver commits) the updates are the
# uncached ones, a record inside a flushed session giving one update instead of a tombstone and an update (as in
# Kafka); flushed at any points, the final table and the store below are the uncached ones (sessions merged away
# after they expired aside, as in Kafka).

CACHED_SESSIONS = WindowSpec(type="session", gap_ms=10, grace_ms=50)


def session_count(cache: ThreadCache | None) -> tuple[SessionWindowAggregateProcessor, Collect, SessionStore, Any]:
    """A session count over a logged in-memory store, behind ``cache`` when given."""
    below = SessionStore(logged(), STRING, LONG, retention_ms=CACHED_SESSIONS.min_retention_ms())
    store: SessionStore | CachingSessionStore = below
    if cache is not None:
        store = CachingSessionStore(below, cache, "0_0-s")
    out = Collect()
    processor = SessionWindowAggregateProcessor(
        "count",
        store,
        CACHED_SESSIONS,
        lambda: 0,
        lambda k, v, a: a + 1,
        lambda k, a, b: a + b,
        [out],
        ProcessorMetrics(),
    )
    return processor, out, below, store


def test_flushed_after_every_record_a_cached_session_count_forwards_the_uncached_updates() -> None:
    processor, out, _, store = session_count(ThreadCache(10 << 20))
    for t in (0, 30, 8, 3):
        processor.process("k", "v", t)
        store.flush()

    assert out.records == [
        (Windowed("k", 0, 0), Change(1, None), 0),
        (Windowed("k", 30, 30), Change(1, None), 30),
        (Windowed("k", 0, 0), Change(None, 1), 0),  # merged into [0, 8]: a tombstone, as uncached
        (Windowed("k", 0, 8), Change(2, None), 8),
        (Windowed("k", 0, 8), Change(3, 2), 8),  # inside [0, 8]: one update (uncached: a tombstone, then 3)
    ]


def test_a_cached_session_count_flushed_at_any_points_ends_with_the_uncached_table_and_store() -> None:
    rng = random.Random(12)
    plain, plain_out, plain_below, _ = session_count(None)
    cached, cached_out, cached_below, store = session_count(ThreadCache(2_000))  # small: evictions too
    for i in range(600):
        key, t = rng.choice("abcd"), i * 3 + rng.randrange(-40, 40)
        plain.process(key, "v", t)
        cached.process(key, "v", t)
        if rng.random() < 0.1:
            store.flush()
    store.flush()

    # a session merged away after it expired below is not forwarded as a tombstone by a later flush (the store
    # below no longer returns it, as Kafka's segmented store's get): compare the sessions live at the end
    first_live = plain_below.observed_stream_time - plain_below.retention_ms
    live = {session: count for session, count in plain_out.latest().items() if session.end >= first_live}
    assert {session: count for session, count in cached_out.latest().items() if session.end >= first_live} == live
    assert cached_below.all() == plain_below.all()
    assert len(live) >= 5
    assert len(cached_out.records) < len(plain_out.records)


def test_suppressed_final_sessions_behind_the_cache_are_the_uncached_ones() -> None:
    """Kafka: suppress downstream of a cached session store buffers the flushed updates, so its final results are
    the same; it sees them at the flush."""
    spec = WindowSpec(type="session", gap_ms=10, grace_ms=0)
    emitted: list[list[tuple[Any, Any, int]]] = []
    for cache in (None, ThreadCache(10 << 20)):
        out, metrics = Collect(), ProcessorMetrics()
        buffer = SuppressionBuffer(logged("buffer"), serde_for("session_windowed:string"), LONG)
        suppress = SuppressProcessor("final", buffer, spec.close_grace_ms(), [out])
        below = SessionStore(logged(), STRING, LONG, retention_ms=spec.min_retention_ms())
        store = below if cache is None else CachingSessionStore(below, cache, "0_0-s")
        p = SessionWindowAggregateProcessor(
            "sessions", store, spec, lambda: 0, count, lambda k, a, b: a + b, [suppress], metrics
        )
        for i, t in enumerate((0, 5, 30, 12, 33, 70, 71, 100, 140)):
            p.process("k" if i % 3 else "j", "v", t)
            if cache is not None and i % 2:
                store.flush()
        if isinstance(store, CachingSessionStore):
            store.flush()
        emitted.append(out.records)
    assert emitted[1] == emitted[0]
    assert len(emitted[0]) >= 3


class Snapshots(Collect):
    """Keeps a copy of each forwarded change (a cached aggregate may later be updated in place)."""

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        super().process(key, Change(copy.deepcopy(value.new_value), copy.deepcopy(value.old_value)), timestamp)


def append_in_place(key: Any, value: Any, aggregate: list[int]) -> list[int]:
    aggregate.append(value)
    return aggregate


SLIDING_AGGREGATES = {
    "count": (lambda: 0, count, LONG),
    "list updated in place": (list, append_in_place, serde_for("json")),
}


def cached_sliding(kind: str, cache: ThreadCache | None) -> tuple[SlidingWindowAggregateProcessor, Collect, Any, Any]:
    """A sliding-window aggregation (difference 20 ms, grace 40 ms) over a logged in-memory store, behind
    ``cache`` when given."""
    initializer, aggregator, serde = SLIDING_AGGREGATES[kind]
    spec = WindowSpec(type="sliding", time_difference_ms=20, grace_ms=40)
    below = WindowStore(logged(), STRING, serde, retention_ms=spec.min_retention_ms(), window_size_ms=20)
    store: WindowStore | CachingSlidingWindowStore = below
    if cache is not None:
        store = CachingSlidingWindowStore(below, cache, "0_0-sliding")
    out = Snapshots()
    processor = SlidingWindowAggregateProcessor(
        "sliding", store, spec, initializer, aggregator, [out], ProcessorMetrics()
    )
    return processor, out, below, store


def test_flushed_after_every_record_a_cached_sliding_count_forwards_the_uncached_windows_and_values() -> None:
    plain, plain_out, _, _ = cached_sliding("count", None)
    cached, cached_out, _, store = cached_sliding("count", ThreadCache(10 << 20))
    for t in (30, 35, 50, 33, 80, 31):
        plain.process("k", "v", t)
        cached.process("k", "v", t)
        store.flush()

    def updates(out: Collect) -> list[tuple[Any, Any, int]]:
        return [(key, change.new_value, ts) for key, change, ts in out.records]

    assert updates(cached_out) == updates(plain_out)
    assert cached_out.records[0] == (Windowed("k", 10, 30), Change(1, None), 30)  # new: no old value (Kafka's)


@pytest.mark.parametrize("kind", sorted(SLIDING_AGGREGATES))
def test_a_cached_sliding_aggregation_flushed_at_any_points_ends_with_the_uncached_table_and_store(kind: str) -> None:
    rng = random.Random(7)
    plain, plain_out, plain_below, _ = cached_sliding(kind, None)
    cached, cached_out, cached_below, store = cached_sliding(kind, ThreadCache(3_000))  # small: evictions too
    for i in range(600):
        key, t = rng.choice("ab"), i * 3 + rng.randrange(-30, 30)
        plain.process(key, i, t)
        cached.process(key, i, t)
        if rng.random() < 0.1:
            store.flush()
    store.flush()

    assert cached_below.all() == plain_below.all()
    first_live = plain_below.observed_stream_time - plain_below.retention_ms
    live = {window: value for window, value in plain_out.latest().items() if window.start >= first_live}
    assert {window: value for window, value in cached_out.latest().items() if window.start >= first_live} == live
    assert len(live) >= 10
    assert len(cached_out.records) < len(plain_out.records)
    seen: dict[Any, Any] = {}
    for window, change, _ in cached_out.records:  # each update's old value is what downstream last saw
        assert change.old_value == seen.get(window)
        seen[window] = change.new_value


@pytest.fixture
def suppressed() -> Iterator[tuple[TimeWindowAggregateProcessor, Collect, ProcessorMetrics]]:
    out, metrics = Collect(), ProcessorMetrics()
    spec = WindowSpec(type="tumbling", size_ms=5000, grace_ms=2000)
    buffer = SuppressionBuffer(logged("buffer"), serde_for("windowed:string:5000"), LONG)
    suppress = SuppressProcessor("final", buffer, spec.close_grace_ms(), [out])
    yield time_count(spec, suppress, metrics), out, metrics  # type: ignore[arg-type]


def test_suppress_forwards_only_the_final_result_when_the_window_closes(
    suppressed: tuple[TimeWindowAggregateProcessor, Collect, ProcessorMetrics],
) -> None:
    p, out, metrics = suppressed
    for ts in (1000, 3000, 4999, 6000, 2000):
        p.process("k", "v", ts)
    assert out.records == []
    p.process("k", "v", 7000)  # closes [0,5000)
    assert out.records == [(Windowed("k", 0, 5000), Change(4, 0), 4999)]
    p.process("k", "v", 2500)  # late: dropped upstream, nothing more
    p.process("k", "v", 12_000)  # closes [5000,10000)
    assert out.records[1:] == [(Windowed("k", 5000, 10000), Change(2, 0), 7000)]
    assert metrics.dropped_records == 1


def test_suppress_of_sessions_drops_final_tombstones_of_merged_sessions() -> None:
    out, metrics = Collect(), ProcessorMetrics()
    spec = WindowSpec(type="session", gap_ms=10, grace_ms=0)
    buffer = SuppressionBuffer(logged("buffer"), serde_for("session_windowed:string"), LONG)
    suppress = SuppressProcessor("final", buffer, spec.close_grace_ms(), [out])
    p = session_aggregate(10, 0, suppress, metrics)  # type: ignore[arg-type]
    p.process("k", "v", 0)
    p.process("k", "v", 5)  # [0,0] is replaced by [0,5]: its tombstone is buffered, never forwarded
    p.process("k", "v", 100)  # closes [0,5]: 5 <= 100 - 10
    assert out.records == [(Windowed("k", 0, 5), Change(2, None), 5)]


def time_limited(limit: int, out: Collect, **bounds: Any) -> SuppressProcessor:
    buffer = SuppressionBuffer(logged("buffer"), STRING, LONG)
    return SuppressProcessor("limited", buffer, limit, [out], final_results=False, **bounds)


def test_until_time_limit_forwards_each_keys_latest_update_once_its_record_time_is_the_limit_behind() -> None:
    out = Collect()
    p = time_limited(2000, out)
    p.process("a", Change(1, None), 1000)
    p.process("a", Change(2, 1), 1500)  # replaces a's buffered update (buffer time 1500), keeps the prior
    p.process("b", Change(1, None), 2000)
    p.process("c", Change(1, None), 3600)  # stream time 3600: expiry 1600, a (1500) goes
    assert out.records == [("a", Change(2, None), 1500)]
    p.process("c", Change(None, 1), 4500)  # expiry 2500: b goes; c's tombstone is buffered, not yet due
    p.process("d", Change(1, None), 7000)  # expiry 5000: c's tombstone is forwarded (not final results)
    assert out.records[1:] == [("b", Change(1, None), 2000), ("c", Change(None, None), 4500)]


def test_emit_early_when_full_forwards_the_oldest_updates_until_the_buffer_fits() -> None:
    out = Collect()
    p = time_limited(60_000, out, max_records=2, emit_early_when_full=True)
    for key, ts in (("a", 1000), ("b", 2000), ("c", 3000), ("d", 4000)):
        p.process(key, Change(ts, None), ts)
    assert out.records == [("a", Change(1000, None), 1000), ("b", Change(2000, None), 2000)]
    p.process("c", Change(5000, 3000), 5000)  # an update of a buffered key does not grow the buffer
    assert len(out.records) == 2
    p.process("e", Change(6000, None), 6000)  # d (4000) is now the oldest
    assert out.records[2:] == [("d", Change(4000, None), 4000)]


def test_max_bytes_bounds_the_serialized_size_of_keys_and_values() -> None:
    out = Collect()
    # one key: 1 byte key + 8 bytes long + 16 bytes overhead = 25 bytes; 50 bytes hold two keys, not three
    p = time_limited(60_000, out, max_bytes=50, emit_early_when_full=True)
    for key, ts in (("a", 1), ("b", 2)):
        p.process(key, Change(ts, None), ts)
    assert out.records == []
    p.process("c", Change(3, None), 3)
    assert out.records == [("a", Change(1, None), 1)]


def test_a_strict_buffer_over_its_bound_fails_the_record_with_kafkas_message() -> None:
    out = Collect()
    spec = WindowSpec(type="tumbling", size_ms=5000, grace_ms=2000)
    buffer = SuppressionBuffer(logged("buffer"), serde_for("windowed:string:5000"), LONG)
    suppress = SuppressProcessor("final", buffer, spec.close_grace_ms(), [out], max_records=1)
    p = time_count(spec, suppress, ProcessorMetrics())  # type: ignore[arg-type]
    p.process("a", "v", 1000)
    p.process("a", "v", 1500)  # the same window: still one key buffered
    with pytest.raises(SuppressionBufferFullError, match=r"final buffer exceeded its max capacity. Currently \[2/1\]"):
        p.process("b", "v", 2000)
    assert out.records == []


def test_emit_on_window_close_forwards_each_closed_window_once_and_no_update() -> None:
    """Kafka's ``KStreamWindowAggregate`` with ``EmitStrategy.onWindowClose()``: updates are stored, not forwarded;
    the record that moves ``streamTime - grace`` past window ends forwards those windows as ``Change(agg, None)`` at
    their timestamps, by start then key, once; a close time passing no window start emits nothing and keeps the last
    emission's close time."""
    out, metrics = Collect(), ProcessorMetrics()
    spec = WindowSpec(type="tumbling", size_ms=5000, grace_ms=1000)
    store = WindowStore(logged(), STRING, LONG, retention_ms=60_000, window_size_ms=spec.size)
    p = TimeWindowAggregateProcessor("count", store, spec, lambda: 0, count, [out], metrics, emit_on_close=True)
    for key, ts in (("b", 1000), ("a", 2000), ("b", 3000), ("a", 5500)):
        p.process(key, "v", ts)
    assert out.records == []  # close time 4500: nothing closed
    assert store.fetch("b", 0) is not None and store.fetch("b", 0).value == 2  # the store has every update

    p.process("a", "v", 6000)  # close time 5000: [0, 5000) closes
    assert out.records == [
        (Windowed("a", 0, 5000), Change(1, None), 2000),
        (Windowed("b", 0, 5000), Change(2, None), 3000),
    ]
    assert p.final_results is not None and p.final_results.last_close_time == 5000
    p.process("a", "v", 8000)  # close time 7000: no window start in (0, 2000]
    assert len(out.records) == 2 and p.final_results.last_close_time == 5000
    p.process("b", "v", 4000)  # late: dropped, nothing emitted
    p.process("a", "v", 11_000)  # close time 10_000: [5000, 10_000) closes
    assert out.records[2:] == [(Windowed("a", 5000, 10_000), Change(3, None), 8000)]
    assert metrics.dropped_records == 1


def test_emit_on_window_close_behind_the_record_cache_forwards_nothing_when_the_cache_flushes() -> None:
    """Kafka's ``AbstractKStreamTimeWindowAggregateProcessor`` sets no cache flush listener for ``ON_WINDOW_CLOSE``:
    a flush writes the windows below (and so the changelog) and forwards nothing; emission reads the cache."""
    out, metrics = Collect(), ProcessorMetrics()
    spec = WindowSpec(type="tumbling", size_ms=5000, grace_ms=0)
    below = WindowStore(logged(), STRING, LONG, retention_ms=60_000, window_size_ms=spec.size)
    store = CachingWindowStore(below, ThreadCache(10 << 20), "0_0-store")
    p = TimeWindowAggregateProcessor("count", store, spec, lambda: 0, count, [out], metrics, emit_on_close=True)
    p.process("a", "v", 1000)
    store.flush()
    p.process("a", "v", 2000)  # dirty in the cache only
    assert out.records == [] and below.fetch("a", 0).value == 1
    p.process("b", "v", 5000)  # close time 5000: [0, 5000) closes, read through the cache
    assert out.records == [(Windowed("a", 0, 5000), Change(2, None), 2000)]


def test_emit_on_window_close_after_a_restart_does_not_emit_windows_closed_before_the_stores_stream_time() -> None:
    """Kafka keeps the last emission's close time in the commit's metadata; the runtime derives a lower bound from
    the restored store's stream time (largest window start written) minus grace: windows that ended by then were
    emitted before that write was committed, and a new processor over the store does not emit them again."""
    spec = WindowSpec(type="tumbling", size_ms=5000, grace_ms=0)
    store = WindowStore(logged(), STRING, LONG, retention_ms=60_000, window_size_ms=spec.size)
    before, after = Collect(), Collect()
    first = TimeWindowAggregateProcessor(
        "count", store, spec, lambda: 0, count, [before], ProcessorMetrics(), emit_on_close=True
    )
    for key, ts in (("a", 1000), ("b", 6000), ("a", 11_000)):
        first.process(key, "v", ts)
    assert [k for k, _, _ in before.records] == [Windowed("a", 0, 5000), Windowed("b", 5000, 10_000)]

    second = TimeWindowAggregateProcessor(
        "count", store, spec, lambda: 0, count, [after], ProcessorMetrics(), emit_on_close=True
    )
    second.process(
        "c", "v", 16_000
    )  # a fresh stream time: Kafka without metadata would emit [0, 5000) and [5000, ...) again

    assert [k for k, _, _ in after.records] == [Windowed("a", 10_000, 15_000)]
