"""Windows on both engines: time, sliding and session windows with grace, late records and suppress.

Includes the seed articles' tumbling-window example (002 "窗口", 001): a 5-second window counts records at 1 s,
3 s and 4 s (``<1-5,3>``: Kafka's windows are half-open ``[0 s, 5 s)``); a record at 6 s moves stream time past
the window's end; a late record at 2 s then turns it into ``<1-5,4>`` while the window is within its grace
period, and is dropped once it is not.
"""

from __future__ import annotations

from typing import Any

from streamapp import StreamsBuilder
from streamapp.dsl.windowed import SessionWindowedKStream
from streamapp.dsl.windows import EmitStrategy, SessionWindows, SlidingWindows, Suppressed, TimeWindows
from streamapp.windowed import Windowed

from conformance import windows_functions as fn
from conformance.harness import DriverEngine, Engine, final_values

SECOND = 1_000


def readings_counted(
    windows: TimeWindows, *, suppressed: bool = False, emit: EmitStrategy | None = None
) -> StreamsBuilder:
    builder = StreamsBuilder()
    windowed = (
        builder.stream("readings", key_serde="string", value_serde="json", name="readings")
        .group_by_key()
        .windowed_by(windows)
    )
    if emit is not None:
        assert not isinstance(windowed, SessionWindowedKStream)
        windowed = windowed.emit_strategy(emit)
    counts = windowed.count(name="counts")
    if suppressed:
        counts = counts.suppress(Suppressed.until_window_closes().with_name("final-counts"))
    counts.to_stream(name="count-changes").to("window-counts", name="window-counts-out")
    return builder


def reading(ts_s: float, key: str = "sensor") -> tuple[str, str, dict[str, Any], int]:
    return ("readings", key, {"at": ts_s}, int(ts_s * SECOND))


SEED = [reading(1), reading(3), reading(4), reading(6), reading(2)]


def window(start_s: int, size_s: int = 5, key: str = "sensor") -> Windowed:
    return Windowed(key, start_s * SECOND, (start_s + size_s) * SECOND)


def test_seed_late_record_within_grace_turns_1_5_3_into_1_5_4(engine: Engine) -> None:
    topology = readings_counted(TimeWindows.of_size_and_grace(5 * SECOND, 2 * SECOND))
    out = engine.run(topology, SEED, ["window-counts"], compare=True)
    assert out["window-counts"] == [
        (window(0), 1, 1 * SECOND),
        (window(0), 2, 3 * SECOND),
        (window(0), 3, 4 * SECOND),  # <1-5,3>
        (window(5), 1, 6 * SECOND),
        (window(0), 4, 4 * SECOND),  # <1-5,4>: the window's timestamp stays its latest record's
    ]


def test_seed_late_record_after_grace_is_dropped(engine: Engine) -> None:
    topology = readings_counted(TimeWindows.of_size_and_grace(5 * SECOND, 1 * SECOND))
    out = engine.run(topology, SEED, ["window-counts"], compare=True)
    assert final_values(out["window-counts"]) == {window(0): 3, window(5): 1}
    assert len(out["window-counts"]) == 4


def test_suppress_forwards_each_windows_final_count_once_after_grace(engine: Engine) -> None:
    topology = readings_counted(TimeWindows.of_size_and_grace(5 * SECOND, 2 * SECOND), suppressed=True)
    inputs = [*SEED, reading(7), reading(2.5), reading(12)]  # 7 s closes [0,5); 2.5 s is too late; 12 s closes [5,10)
    out = engine.run(topology, inputs, ["window-counts"], compare=True)
    assert out["window-counts"] == [(window(0), 4, 4 * SECOND), (window(5), 2, 7 * SECOND)]


def test_hopping_windows_aggregate_every_window_a_record_falls_into(engine: Engine) -> None:
    builder = StreamsBuilder()
    (
        builder.stream("payments", key_serde="string", value_serde="json", name="payments")
        .group_by_key()
        .windowed_by(TimeWindows.of_size_with_no_grace(10 * SECOND).advance_by(5 * SECOND))
        .aggregate(fn.zero, fn.add_amount, name="totals", value_serde="long")
        .to_stream(name="total-changes")
        .to("totals", name="totals-out")
    )
    inputs = [
        ("payments", "alice", {"amount": 3}, 6 * SECOND),
        ("payments", "alice", {"amount": 4}, 12 * SECOND),
        ("payments", "bob", {"amount": 5}, 13 * SECOND),
    ]
    out = engine.run(builder, inputs, ["totals"], compare=True)
    assert final_values(out["totals"]) == {
        window(0, 10, "alice"): 3,
        window(5, 10, "alice"): 7,
        window(10, 10, "alice"): 4,
        window(5, 10, "bob"): 5,
        window(10, 10, "bob"): 5,
    }


def test_sliding_windows_hold_the_records_within_the_time_difference(engine: Engine) -> None:
    builder = StreamsBuilder()
    (
        builder.stream("readings", key_serde="string", value_serde="json", name="readings")
        .group_by_key()
        .windowed_by(SlidingWindows.of_time_difference_and_grace(10 * SECOND, 30 * SECOND))
        .count(name="nearby")
        .to_stream(name="nearby-changes")
        .to("nearby", name="nearby-out")
    )
    inputs = [reading(20), reading(25), reading(40), reading(22)]
    out = engine.run(builder, inputs, ["nearby"], compare=True)
    assert final_values(out["nearby"]) == {
        window(10, 10): 1,  # [10 s, 20 s]: left window of 20 s
        window(12, 10): 2,  # [12 s, 22 s]: left window of 22 s holds 20 s and 22 s
        window(15, 10): 3,  # [15 s, 25 s]: 20, 22, 25
        Windowed("sensor", 20_001, 30_001): 2,  # right window of 20 s, from 1 ms after it: 22, 25
        Windowed("sensor", 22_001, 32_001): 1,  # right window of 22 s: 25
        window(30, 10): 1,  # [30 s, 40 s]: 40
    }


def test_sessions_merge_and_replaced_sessions_become_tombstones(engine: Engine) -> None:
    builder = StreamsBuilder()
    (
        builder.stream("clicks", key_serde="string", value_serde="string", name="clicks")
        .group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_and_grace(5 * SECOND, 10 * SECOND))
        .reduce(fn.longer, name="longest-click")
        .to_stream(name="session-changes")
        .to("sessions", name="sessions-out")
    )
    inputs = [
        ("clicks", "u", "a", 1 * SECOND),
        ("clicks", "u", "bbb", 10 * SECOND),
        ("clicks", "u", "cc", 5 * SECOND),  # bridges [1 s] and [10 s]: one session [1 s, 10 s]
    ]
    out = engine.run(builder, inputs, ["sessions"], compare=True)
    merged = Windowed("u", 1 * SECOND, 10 * SECOND)
    assert out["sessions"] == [
        (Windowed("u", 1 * SECOND, 1 * SECOND), "a", 1 * SECOND),
        (Windowed("u", 10 * SECOND, 10 * SECOND), "bbb", 10 * SECOND),
        (Windowed("u", 1 * SECOND, 1 * SECOND), None, 1 * SECOND),
        (Windowed("u", 10 * SECOND, 10 * SECOND), None, 10 * SECOND),
        (merged, "bbb", 10 * SECOND),
    ]


KAFKA_DEFAULT_CACHE = {"statestore.cache.max.bytes": 10 * 1024 * 1024}
"""Kafka's default record cache: on the broker, session and sliding-window updates merge between commits (Kafka's
CachingSessionStore / CachingWindowStore); the driver commits after every record. The final tables agree."""


def test_sessions_behind_the_default_record_cache_end_with_the_per_record_final_table(engine: Engine) -> None:
    builder = StreamsBuilder()
    (
        builder.stream("clicks", key_serde="string", value_serde="string", name="clicks")
        .group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_and_grace(5 * SECOND, 60 * SECOND))
        .count(name="clicks-per-session")
        .to_stream(name="session-changes")
        .to("session-counts", name="session-counts-out")
    )
    seconds = [("u", 1), ("v", 2), ("u", 10), ("v", 4), ("u", 5), ("v", 3), ("u", 7), ("v", 40), ("u", 30)]
    seconds += [("v", 50), ("u", 33), ("v", 45), ("u", 31), ("u", 22), ("u", 26)]
    inputs = [("clicks", key, "c", at * SECOND) for key, at in seconds]
    out = engine.run(builder, inputs, ["session-counts"], KAFKA_DEFAULT_CACHE, compare="final")
    assert final_values(out["session-counts"]) == {
        Windowed("u", 1 * SECOND, 10 * SECOND): 4,  # 5 s bridges 1 s and 10 s; 7 s falls inside
        Windowed("u", 22 * SECOND, 33 * SECOND): 5,  # 26 s bridges [22 s] and [30 s, 33 s]
        Windowed("v", 2 * SECOND, 4 * SECOND): 3,
        Windowed("v", 40 * SECOND, 50 * SECOND): 3,
    }


def test_sliding_windows_behind_the_default_record_cache_end_with_the_per_record_final_table(engine: Engine) -> None:
    builder = StreamsBuilder()
    (
        builder.stream("readings", key_serde="string", value_serde="json", name="readings")
        .group_by_key()
        .windowed_by(SlidingWindows.of_time_difference_and_grace(10 * SECOND, 60 * SECOND))
        .count(name="nearby")
        .to_stream(name="nearby-changes")
        .to("nearby", name="nearby-out")
    )
    inputs = [reading(t) for t in (20, 25, 40, 22, 31, 29, 45, 21)]
    out = engine.run(builder, inputs, ["nearby"], KAFKA_DEFAULT_CACHE, compare="final")
    assert final_values(out["nearby"])[window(15, 10)] == 4  # [15 s, 25 s]: 20, 21, 22, 25


def test_windowed_counts_per_key_over_several_partitions(engine: Engine) -> None:
    topology = readings_counted(TimeWindows.of_size_and_grace(5 * SECOND, 60 * SECOND))
    keys = [f"sensor-{i}" for i in range(6)]
    inputs = [reading(t, key) for t in (1, 2, 6, 3, 11) for key in keys]
    out = engine.run(topology, inputs, ["window-counts"], partitions={"readings": 3}, compare="final")
    expected = {}
    for key in keys:
        expected.update({window(0, key=key): 3, window(5, key=key): 1, window(10, key=key): 1})
    assert final_values(out["window-counts"]) == expected


def readings_count_suppressed(suppressed: Suppressed) -> StreamsBuilder:
    builder = StreamsBuilder()
    (
        builder.stream("readings", key_serde="string", value_serde="json", name="readings")
        .group_by_key()
        .count(name="counts")
        .suppress(suppressed.with_name("limited"))
        .to_stream(name="limited-changes")
        .to("limited-counts", name="limited-counts-out")
    )
    return builder


def test_suppress_until_time_limit_forwards_each_keys_latest_count_once_its_time_is_the_limit_behind(
    engine: Engine,
) -> None:
    topology = readings_count_suppressed(Suppressed.until_time_limit(2 * SECOND, Suppressed.BufferConfig.unbounded()))
    inputs = [
        reading(1, "a"),
        reading(1.5, "a"),
        reading(2, "b"),
        reading(3.6, "c"),
        reading(4.5, "b"),
        reading(7, "d"),
    ]
    out = engine.run(topology, inputs, ["limited-counts"], compare=True)
    # 3.6 s: a (last buffered at 1.5 s) is 2 s behind; 4.5 s re-buffers b; 7 s: c (3.6 s), then b (4.5 s)
    assert out["limited-counts"] == [("a", 2, 1500), ("c", 1, 3600), ("b", 2, 4500)]


def test_suppress_emit_early_when_full_forwards_the_oldest_key_when_the_buffer_overflows(engine: Engine) -> None:
    config = Suppressed.BufferConfig.max_records(2).emit_early_when_full()
    topology = readings_count_suppressed(Suppressed.until_time_limit(60 * SECOND, config))
    inputs = [reading(1, "a"), reading(2, "b"), reading(3, "c"), reading(4, "c"), reading(5, "d")]
    out = engine.run(topology, inputs, ["limited-counts"], compare=True)
    assert out["limited-counts"] == [("a", 1, 1 * SECOND), ("b", 1, 2 * SECOND)]


def test_suppress_until_window_closes_with_a_strict_bound_holds_final_results_within_it(engine: Engine) -> None:
    config = Suppressed.BufferConfig.max_records(2).shut_down_when_full()
    topology = StreamsBuilder()
    (
        topology.stream("readings", key_serde="string", value_serde="json", name="readings")
        .group_by_key()
        .windowed_by(TimeWindows.of_size_and_grace(5 * SECOND, 0))
        .count(name="counts")
        .suppress(Suppressed.until_window_closes(config).with_name("final-counts"))
        .to_stream(name="count-changes")
        .to("window-counts", name="window-counts-out")
    )
    inputs = [reading(1, "a"), reading(2, "b"), reading(3, "a"), reading(6, "a"), reading(11, "b")]
    out = engine.run(topology, inputs, ["window-counts"], compare=True)
    assert out["window-counts"] == [
        (window(0, key="a"), 2, 3 * SECOND),
        (window(0, key="b"), 1, 2 * SECOND),
        (window(5, key="a"), 1, 6 * SECOND),
    ]


# -- EmitStrategy (KIP-825) ---------------------------------------------------------------------------------------

EMIT_ON_CLOSE_INPUTS = [
    reading(1, "a"),
    reading(2, "b"),
    reading(3, "a"),
    reading(6, "a"),  # close time 4 s: no window has closed
    reading(4, "b"),
    reading(7, "b"),  # close time 5 s: [0 s, 5 s) closes, both keys' final counts leave
    reading(8, "a"),  # close time 6 s: no new window closed, nothing emitted
    reading(2.5, "b"),  # late for the closed [0 s, 5 s): dropped, nothing emitted again
    reading(12, "a"),  # close time 10 s: [5 s, 10 s) closes
]
EMIT_ON_CLOSE_FINALS = [
    (window(0, key="a"), 2, 3 * SECOND),
    (window(0, key="b"), 2, 4 * SECOND),
    (window(5, key="a"), 2, 8 * SECOND),
    (window(5, key="b"), 1, 7 * SECOND),
]


def test_emit_on_window_close_forwards_each_windows_final_count_once_by_start_then_key(engine: Engine) -> None:
    """Kafka's ``KStreamWindowAggregate`` with ``EmitStrategy.onWindowClose()`` (KIP-825,
    ``AbstractKStreamTimeWindowAggregateProcessor``): nothing per update; after the record that moves
    ``streamTime - grace`` past a window's end, its aggregate once as ``Change(agg, null)`` at the window's timestamp,
    the windows of one emission by start then key (its time-ordered window store's ``fetchAll``); a late record is
    dropped and emits nothing."""
    emit = EmitStrategy.on_window_close()
    topology = readings_counted(TimeWindows.of_size_and_grace(5 * SECOND, 2 * SECOND), emit=emit)
    out = engine.run(topology, EMIT_ON_CLOSE_INPUTS, ["window-counts"], compare=True)
    assert out["window-counts"] == EMIT_ON_CLOSE_FINALS


def test_emit_on_window_close_behind_the_default_record_cache_emits_the_same_final_counts(engine: Engine) -> None:
    """Kafka's ``KStreamWindowAggregate`` with ``EmitStrategy.onWindowClose()`` over a cached window store
    (``TimeWindowedKStreamImpl`` keeps caching on; the aggregation sets no cache flush listener): the cache forwards
    nothing when it flushes, and the emission reads the cache merged over the store (``CachingWindowStore.fetchAll``),
    so Kafka's default cache on the broker gives the records the driver gives."""
    emit = EmitStrategy.on_window_close()
    topology = readings_counted(TimeWindows.of_size_and_grace(5 * SECOND, 2 * SECOND), emit=emit)
    out = engine.run(topology, EMIT_ON_CLOSE_INPUTS, ["window-counts"], KAFKA_DEFAULT_CACHE, compare=True)
    assert out["window-counts"] == EMIT_ON_CLOSE_FINALS


def test_emit_on_window_close_of_hopping_windows_emits_every_window_a_closing_step_passes(engine: Engine) -> None:
    """Kafka's ``KStreamWindowAggregate`` with ``EmitStrategy.onWindowClose()`` and hopping ``TimeWindows``: one
    emission fetches the windows with ``lastEmitCloseTime - size < start <= closeTime - size`` (the range of
    ``emitRangeLowerBound`` / ``emitRangeUpperBound``), by start then key; a close time that passes no window start
    (``shouldRangeFetch``) emits nothing. The record at 21 s writes the window starting at 20 s, past which
    ``[5 s, 15 s)`` is beyond the store's retention (size + grace): the emission still reads it, as the store deletes
    it only at a later commit."""
    builder = StreamsBuilder()
    windowed = (
        builder.stream("payments", key_serde="string", value_serde="json", name="payments")
        .group_by_key()
        .windowed_by(TimeWindows.of_size_with_no_grace(10 * SECOND).advance_by(5 * SECOND))
    )
    assert not isinstance(windowed, SessionWindowedKStream)
    (
        windowed.emit_strategy(EmitStrategy.on_window_close())
        .aggregate(fn.zero, fn.add_amount, name="totals", value_serde="long")
        .to_stream(name="total-changes")
        .to("totals", name="totals-out")
    )
    inputs = [
        ("payments", "alice", {"amount": 3}, 6 * SECOND),
        ("payments", "alice", {"amount": 4}, 12 * SECOND),  # closes [0 s, 10 s)
        ("payments", "bob", {"amount": 5}, 13 * SECOND),  # no window start in (2 s, 3 s]: nothing
        ("payments", "alice", {"amount": 1}, 21 * SECOND),  # closes [5 s, 15 s) and [10 s, 20 s)
    ]
    out = engine.run(builder, inputs, ["totals"], compare=True)
    assert out["totals"] == [
        (window(0, 10, "alice"), 3, 6 * SECOND),
        (window(5, 10, "alice"), 7, 12 * SECOND),
        (window(5, 10, "bob"), 5, 13 * SECOND),
        (window(10, 10, "alice"), 4, 12 * SECOND),
        (window(10, 10, "bob"), 5, 13 * SECOND),
    ]


def test_emit_on_window_update_is_the_default_every_update(engine: Engine) -> None:
    """Kafka's ``EmitStrategy.onWindowUpdate()`` is ``KStreamWindowAggregate``'s default: naming it changes nothing
    (the seed example's updates, with the late record's)."""
    windows = TimeWindows.of_size_and_grace(5 * SECOND, 2 * SECOND)
    topology = readings_counted(windows, emit=EmitStrategy.on_window_update())
    out = engine.run(topology, SEED, ["window-counts"], compare=True)
    assert (
        out["window-counts"] == DriverEngine().run(readings_counted(windows), SEED, ["window-counts"])["window-counts"]
    )


def test_emit_on_window_close_of_sliding_windows_emits_each_window_once_its_inclusive_end_passed(
    engine: Engine,
) -> None:
    """Kafka's ``KStreamSlidingWindowAggregate`` with ``EmitStrategy.onWindowClose()``: windows ``[s, s + d]`` whose
    end is below ``streamTime - grace`` (``emitRangeUpperBound = closeTime - d - 1``), from the last emission's close
    time - d, by start; a late record emits nothing. Behind Kafka's default record cache (no flush listener) the
    emission reads the cache merged over the store, so the records are the same."""
    builder = StreamsBuilder()
    windowed = (
        builder.stream("readings", key_serde="string", value_serde="json", name="readings")
        .group_by_key()
        .windowed_by(SlidingWindows.of_time_difference_with_no_grace(10 * SECOND))
    )
    assert not isinstance(windowed, SessionWindowedKStream)
    windowed.emit_strategy(EmitStrategy.on_window_close()).count(name="nearby").to_stream(name="nearby-changes").to(
        "nearby", name="nearby-out"
    )
    inputs = [reading(20), reading(25), reading(40), reading(22), reading(60)]  # 22 s is late at stream time 40 s
    out = engine.run(builder, inputs, ["nearby"], KAFKA_DEFAULT_CACHE, compare=True)  # the same with the cache
    assert out["nearby"] == [
        (window(10, 10), 1, 20 * SECOND),  # [10 s, 20 s], closed at 25 s
        (window(15, 10), 2, 25 * SECOND),  # [15 s, 25 s] and the right window of 20 s, closed at 40 s
        (Windowed("sensor", 20_001, 30_001), 1, 25 * SECOND),  # right window of 20 s: 25 s
        (window(30, 10), 1, 40 * SECOND),  # closed at 60 s
    ]


def test_emit_on_window_close_of_sessions_emits_each_final_session_by_end_after_gap_and_grace(engine: Engine) -> None:
    """Kafka's ``KStreamSessionWindowAggregate`` with ``EmitStrategy.onWindowClose()``: no tombstones or updates;
    after each record (late ones too) the sessions with ``lastEmitCloseTime <= end < streamTime - grace - gap``, by
    end then key (its time-ordered session store's ``findSessions(earliestEnd, latestEnd)``), at their end. Behind
    Kafka's default record cache the emission reads the cache merged over the store: the same records."""
    builder = StreamsBuilder()
    windowed = (
        builder.stream("clicks", key_serde="string", value_serde="string", name="clicks")
        .group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(5 * SECOND))
    )
    assert isinstance(windowed, SessionWindowedKStream)
    windowed.emit_strategy(EmitStrategy.on_window_close()).count(name="per-session").to_stream(name="sessions").to(
        "session-counts", name="session-counts-out"
    )
    seconds = [("u", 1), ("v", 2), ("u", 3), ("u", 10), ("u", 4), ("v", 12), ("u", 13), ("u", 30)]  # u@4 is late
    inputs = [("clicks", key, "c", at * SECOND) for key, at in seconds]
    out = engine.run(builder, inputs, ["session-counts"], KAFKA_DEFAULT_CACHE, compare=True)
    assert out["session-counts"] == [
        (Windowed("v", 2 * SECOND, 2 * SECOND), 1, 2 * SECOND),  # closed at 10 s (close time 5 s)
        (Windowed("u", 1 * SECOND, 3 * SECOND), 2, 3 * SECOND),
        (Windowed("v", 12 * SECOND, 12 * SECOND), 1, 12 * SECOND),  # closed at 30 s
        (Windowed("u", 10 * SECOND, 13 * SECOND), 2, 13 * SECOND),
    ]
