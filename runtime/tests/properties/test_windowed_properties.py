"""Windowed aggregations against simple reference models, over random out-of-order inputs (hypothesis).

The processors run on a real logged store (buffered writes, commits at random points, expiry scans on tiny
segment intervals), so the properties also cover the store's merge of committed and buffered windows and its
retention. The reference models are the semantics written down plainly:

- time windows: record ``i`` counts in window ``w`` iff ``w`` contains its timestamp and
  ``w.end + grace > max(timestamps[0..i])``;
- sliding windows (nothing late): one window ``[t - d, t]`` per record time ``t`` (``[0, d]`` for ``t < d``) and a
  right window ``[t + 1, t + 1 + d]`` per record time when it holds a record; each holds the records inside it;
- session windows (nothing late): the records of a key sorted by time, cut where two neighbours are more than
  the gap apart;
- suppress: exactly the final value of every closed window, once.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from streamapp.kafka.types import TopicPartition
from streamapp.processors.base import Change, ProcessorMetrics
from streamapp.processors.windowed import (
    SessionWindowAggregateProcessor,
    SlidingWindowAggregateProcessor,
    SuppressProcessor,
    TimeWindowAggregateProcessor,
)
from streamapp.serdes import serde_for
from streamapp.state.changelogging import ChangeLoggingKeyValueStore
from streamapp.state.memory import InMemoryKeyValueStore
from streamapp.state.session_store import SessionStore
from streamapp.state.suppression_buffer import SuppressionBuffer
from streamapp.state.window_store import WindowStore
from streamapp.topology.windows import WindowSpec
from streamapp.windowed import Windowed

STRING = serde_for("string")
LONG = serde_for("long")

Event = tuple[str, int, bool]
"""(key, timestamp ms, commit after this record)."""

events = st.lists(
    st.tuples(st.sampled_from(["a", "b", "ab"]), st.integers(min_value=0, max_value=120), st.booleans()),
    max_size=60,
)


class Committer:
    """Runs the store side of a commit on logged stores: send the buffer, acknowledge, apply."""

    def __init__(self) -> None:
        self.stores: list[ChangeLoggingKeyValueStore] = []
        self._offset = 0

    def logged(self, name: str) -> ChangeLoggingKeyValueStore:
        store = ChangeLoggingKeyValueStore(InMemoryKeyValueStore(name), TopicPartition(name, 0), lambda: 0)
        self.stores.append(store)
        return store

    def commit(self) -> None:
        for store in self.stores:
            store.send_changelog(self)
            store.apply()

    def send(self, topic, key, value, timestamp, partition=None, on_delivery=None):
        self._offset += 1
        if on_delivery is not None:  # only the last record of a store's batch asks for its offset
            on_delivery(TopicPartition(topic, 0), self._offset)


class Table:
    """Collects forwarded ``Change`` records into the latest value per key."""

    def __init__(self) -> None:
        self.values: dict[Any, Any] = {}
        self.records: list[tuple[Any, Any, int]] = []

    def process(self, key: Any, value: Change, timestamp: int) -> None:
        self.records.append((key, value, timestamp))
        if value.new_value is None:
            self.values.pop(key, None)
        else:
            self.values[key] = value.new_value


def count(key: Any, value: Any, aggregate: int) -> int:
    return aggregate + 1


def run(processor: Any, committer: Committer, inputs: list[Event]) -> None:
    for key, timestamp, commit in inputs:
        processor.process(key, "v", timestamp)
        if commit:
            committer.commit()


# -- time windows ------------------------------------------------------------------------------------------


def reference_time_windows(spec: WindowSpec, inputs: list[Event]) -> tuple[dict[Windowed, int], int]:
    table: Counter[Windowed] = Counter()
    dropped = 0
    stream_time = -1
    for key, timestamp, _ in inputs:
        stream_time = max(stream_time, timestamp)
        for start, end in spec.windows_for(timestamp):
            if end + spec.grace_ms > stream_time:
                table[Windowed(key, start, end)] += 1
            else:
                dropped += 1
    return dict(table), dropped


@settings(max_examples=150, deadline=None)
@given(
    inputs=events,
    size=st.integers(min_value=1, max_value=50),
    advance_divisor=st.integers(min_value=1, max_value=4),
    grace=st.integers(min_value=0, max_value=60),
)
def test_time_windowed_count_matches_the_reference_including_late_drops(
    inputs: list[Event], size: int, advance_divisor: int, grace: int
) -> None:
    advance = max(1, size // advance_divisor)
    spec = (
        WindowSpec(type="hopping", size_ms=size, advance_ms=advance, grace_ms=grace)
        if advance != size
        else (WindowSpec(type="tumbling", size_ms=size, grace_ms=grace))
    )
    committer, out, metrics = Committer(), Table(), ProcessorMetrics()
    store = WindowStore(
        committer.logged("w"),
        STRING,
        LONG,
        retention_ms=spec.min_retention_ms(),
        window_size_ms=size,
        segment_interval=7,
    )
    run(TimeWindowAggregateProcessor("count", store, spec, lambda: 0, count, [out], metrics), committer, inputs)
    expected, dropped = reference_time_windows(spec, inputs)
    assert out.values == expected
    assert metrics.dropped_records == dropped
    for window, change, timestamp in out.records:  # every update carries the window's largest timestamp so far
        assert window.start <= timestamp < window.end
        assert change.new_value == change.old_value + 1


# -- sliding windows ---------------------------------------------------------------------------------------


def reference_sliding(diff: int, inputs: list[Event]) -> dict[Windowed, int]:
    by_key: dict[str, list[int]] = {}
    for key, timestamp, _ in inputs:
        by_key.setdefault(key, []).append(timestamp)
    table: dict[Windowed, int] = {}
    for key, times in by_key.items():
        windows = set()
        for t in times:
            windows.add((max(0, t - diff), max(t, diff)))
            windows.add((t + 1, t + 1 + diff))
        for start, end in windows:
            inside = sum(1 for t in times if start <= t <= end)
            if inside:
                table[Windowed(key, start, end)] = inside
    return table


@settings(max_examples=400, deadline=None)
@given(inputs=events, diff=st.integers(min_value=0, max_value=40))
def test_sliding_windowed_count_without_late_records_matches_the_reference(inputs: list[Event], diff: int) -> None:
    spec = WindowSpec(type="sliding", time_difference_ms=diff, grace_ms=1000)
    committer, out, metrics = Committer(), Table(), ProcessorMetrics()
    store = WindowStore(
        committer.logged("s"),
        STRING,
        LONG,
        retention_ms=spec.min_retention_ms(),
        window_size_ms=diff,
        segment_interval=5,
    )
    run(SlidingWindowAggregateProcessor("sliding", store, spec, lambda: 0, count, [out], metrics), committer, inputs)
    assert metrics.dropped_records == 0
    assert out.values == reference_sliding(diff, inputs)


# -- session windows ---------------------------------------------------------------------------------------


def reference_sessions(gap: int, inputs: list[Event]) -> dict[Windowed, int]:
    by_key: dict[str, list[int]] = {}
    for key, timestamp, _ in inputs:
        by_key.setdefault(key, []).append(timestamp)
    table: dict[Windowed, int] = {}
    for key, times in by_key.items():
        times.sort()
        start, members = times[0], [times[0]]
        for t in times[1:]:
            if t - members[-1] > gap:
                table[Windowed(key, start, members[-1])] = len(members)
                start, members = t, []
            members.append(t)
        table[Windowed(key, start, members[-1])] = len(members)
    return table


@settings(max_examples=150, deadline=None)
@given(inputs=events, gap=st.integers(min_value=1, max_value=40))
def test_session_windowed_count_without_late_records_matches_the_reference(inputs: list[Event], gap: int) -> None:
    spec = WindowSpec(type="session", gap_ms=gap, grace_ms=1000)
    committer, out, metrics = Committer(), Table(), ProcessorMetrics()
    store = SessionStore(committer.logged("ss"), STRING, LONG, retention_ms=spec.min_retention_ms(), segment_interval=3)
    processor = SessionWindowAggregateProcessor(
        "sessions", store, spec, lambda: 0, count, lambda k, a, b: a + b, [out], metrics
    )
    run(processor, committer, inputs)
    assert metrics.dropped_records == 0
    assert out.values == reference_sessions(gap, inputs)
    assert {w: v for w, v in store.all()} == out.values


@settings(max_examples=100, deadline=None)
@given(inputs=events, gap=st.integers(min_value=1, max_value=20), grace=st.integers(min_value=0, max_value=20))
def test_late_session_records_never_change_a_closed_session(inputs: list[Event], gap: int, grace: int) -> None:
    """Whatever arrives, a session whose end + gap + grace < stream time is never updated again."""
    spec = WindowSpec(type="session", gap_ms=gap, grace_ms=grace)
    committer, out, metrics = Committer(), Table(), ProcessorMetrics()
    store = SessionStore(committer.logged("ss"), STRING, LONG, retention_ms=spec.min_retention_ms(), segment_interval=3)
    processor = SessionWindowAggregateProcessor(
        "sessions", store, spec, lambda: 0, count, lambda k, a, b: a + b, [out], metrics
    )
    stream_time = -1
    for key, timestamp, commit in inputs:
        before = len(out.records)
        stream_time = max(stream_time, timestamp)
        processor.process(key, "v", timestamp)
        for window, _, _ in out.records[before:]:
            assert window.end >= stream_time - grace - gap
        if commit:
            committer.commit()
    assert sum(out.values.values()) + metrics.dropped_records == len(inputs)


# -- suppress ----------------------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(
    inputs=events,
    size=st.integers(min_value=1, max_value=50),
    grace=st.integers(min_value=0, max_value=60),
)
def test_suppress_emits_exactly_the_final_value_of_every_closed_window_once(
    inputs: list[Event], size: int, grace: int
) -> None:
    spec = WindowSpec(type="tumbling", size_ms=size, grace_ms=grace)
    committer, final, metrics = Committer(), Table(), ProcessorMetrics()
    buffer = SuppressionBuffer(committer.logged("buffer"), serde_for(f"windowed:string:{size}"), LONG)
    suppress = SuppressProcessor("final", buffer, spec.close_grace_ms(), [final])
    store = WindowStore(
        committer.logged("w"),
        STRING,
        LONG,
        retention_ms=spec.min_retention_ms(),
        window_size_ms=size,
        segment_interval=7,
    )
    run(TimeWindowAggregateProcessor("count", store, spec, lambda: 0, count, [suppress], metrics), committer, inputs)
    expected, _ = reference_time_windows(spec, inputs)
    emitted = [window for window, _, _ in final.records]
    assert len(emitted) == len(set(emitted))
    suppress_time = suppress.observed_stream_time
    closed = {w: v for w, v in expected.items() if w.end + grace <= suppress_time}
    assert final.values == closed
