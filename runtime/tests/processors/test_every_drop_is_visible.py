"""Every drop is visible (issue 22): a late record, a null key, a join miss is counted per task under its reason
and logged at WARN naming the record (task, topic, partition, offset; for a late record the window and stream
time), at most one line per kind and processor every 10 s with the count of the ones in between."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from conformance.join_functions import pair, user_of
from streamapp import StreamsBuilder
from streamapp import skips as skips_module
from streamapp.dsl.windows import JoinWindows, SessionWindows, SlidingWindows, TimeWindows
from streamapp.processing import stream_thread
from streamapp.processing.status import RecordLatenessStatus, task_drop_status
from streamapp.skips import SkipLog
from streamapp.testing import TopologyTestDriver

DROPS_LOGGER = "streamapp.processors.drops"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[Clock]:
    """A fresh process-wide skip log for the drops logger, on a clock the test turns."""
    clock = Clock()
    monkeypatch.setattr(skips_module, "_LOGS", {DROPS_LOGGER: SkipLog(logging.getLogger(DROPS_LOGGER), clock=clock)})
    # the stream thread's periodic flush runs on the wall clock: off here (test_skips.py covers it)
    monkeypatch.setattr(stream_thread, "flush_due_skip_logs", lambda: None)
    yield clock


def drop_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == DROPS_LOGGER and r.levelno == logging.WARNING]


def windowed_count(windows: object) -> StreamsBuilder:
    builder = StreamsBuilder()
    events = builder.stream("events", key_serde="string", value_serde="json", name="events")
    events.group_by_key().windowed_by(windows).count(name="counts").to_stream(name="changes").to("out", name="sink")
    return builder


def test_a_late_record_is_counted_as_late_and_logged_with_its_place_window_and_stream_time(
    clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    topology = windowed_count(TimeWindows.of_size_and_grace(10, 5))
    with caplog.at_level(logging.WARNING), TopologyTestDriver(topology) as d:
        events = d.create_input_topic("events")
        for timestamp in (1, 30, 4):  # 4 is in [0,10), which closed at 10 + 5 <= 30
            events.pipe_input("k", {}, timestamp)
        metrics = d.metrics()
        (task,) = d.tasks()
        status = task_drop_status(task.metrics)
        kafka = {(m.name, m.tag("processor-node-id") or m.tag("task-id")): v for m, v in d.kafka_metrics().items()}

    assert metrics.dropped_records_by_reason == {"late": 1}
    assert kafka[("dropped-records-total", "0_0")] == 1
    assert (kafka[("record-lateness-max", "counts")], round(kafka[("record-lateness-avg", "counts")], 1)) == (26, 8.7)
    assert metrics.dropped_records_total == 1
    assert status["dropped_records"] == {"late": 1}
    assert status["record_lateness"] == {"counts": RecordLatenessStatus(count=3, avg_ms=8.7, max_ms=26)}
    assert drop_lines(caplog) == [
        "Skipping record for expired window in counts: task=[0_0] topic=[events] partition=[0] offset=[2] "
        "timestamp=[4] window=[0,10) expiration=[25] streamTime=[30]"
    ]


def test_late_records_are_logged_once_per_rate_window_with_the_count_of_the_others(
    clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    topology = windowed_count(TimeWindows.of_size_and_grace(10, 0))
    with caplog.at_level(logging.WARNING), TopologyTestDriver(topology) as d:
        events = d.create_input_topic("events")
        events.pipe_input("k", {}, 100)
        for timestamp in range(5):  # five late records within one rate window: one line
            events.pipe_input("k", {}, timestamp)
        lines_in_window = drop_lines(caplog)
        clock.now += 10.0  # the next late record after the window says how many were not logged
        events.pipe_input("k", {}, 50)
        late = d.metrics().dropped_records_by_reason["late"]

    assert late == 6
    assert len(lines_in_window) == 1 and "offset=[1] timestamp=[0] window=[0,10)" in lines_in_window[0]
    assert drop_lines(caplog)[1:] == [
        "Skipping record for expired window in counts: 5 more in the last 10 s; the latest: task=[0_0] "
        "topic=[events] partition=[0] offset=[6] timestamp=[50] window=[50,60) expiration=[100] streamTime=[100]"
    ]


@pytest.mark.parametrize(
    ("windows", "window"),
    [
        (SessionWindows.of_inactivity_gap_and_grace(5, 0), "window=[4,4] expiration=[95]"),
        (SlidingWindows.of_time_difference_and_grace(5, 0), "window=[4,9] expiration=[100]"),
    ],
    ids=["session", "sliding"],
)
def test_session_and_sliding_window_late_records_are_counted_as_late_and_logged(
    windows: object, window: str, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING), TopologyTestDriver(windowed_count(windows)) as d:
        events = d.create_input_topic("events")
        events.pipe_input("k", {}, 100)
        events.pipe_input("k", {}, 4)
        dropped = d.metrics().dropped_records_by_reason

    assert dropped == {"late": 1}
    (line,) = drop_lines(caplog)
    assert line.startswith("Skipping record for expired window in counts: task=[0_0] topic=[events]")
    assert line.endswith(f"offset=[1] timestamp=[4] {window} streamTime=[100]")


def test_a_stream_stream_join_record_older_than_the_join_store_retention_is_counted_as_late(
    clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    builder = StreamsBuilder()
    left = builder.stream("left", key_serde="string", value_serde="json", name="left")
    right = builder.stream("right", key_serde="string", value_serde="json", name="right")
    left.join(right, pair, JoinWindows.of_time_difference_and_grace(5, 0), name="pairs").to("out", name="sink")
    with caplog.at_level(logging.WARNING), TopologyTestDriver(builder) as d:
        d.create_input_topic("left").pipe_input("k", "a", 100)
        d.create_input_topic("left").pipe_input("k", "b", 50)  # 50 < 100 - retention (5 + 5 + 0): not kept
        dropped = d.metrics().dropped_records_by_reason
        (task,) = d.tasks()
        lateness = task_drop_status(task.metrics)["record_lateness"]

    assert dropped == {"late": 1}
    assert lateness == {"pairs": RecordLatenessStatus(count=2, avg_ms=25.0, max_ms=50)}
    (line,) = drop_lines(caplog)
    assert line.startswith("Skipping record for expired window in pairs: task=[0_0] topic=[left]")
    assert line.endswith("offset=[1] timestamp=[50] window=[45,55] expiration=[90] streamTime=[100]")


def test_null_keys_and_values_into_an_aggregation_are_counted_under_their_reason(clock: Clock) -> None:
    builder = StreamsBuilder()
    events = builder.stream("events", key_serde="string", value_serde="json", name="events")
    events.group_by_key().count(name="counts")
    with TopologyTestDriver(builder) as d:
        d.create_input_topic("events").pipe_records([(None, {}, 1), ("k", None, 2), ("k", {}, 3)])
        assert d.metrics().dropped_records_by_reason == {"null_key_or_value": 2}


def stream_table_join() -> StreamsBuilder:
    builder = StreamsBuilder()
    users = builder.table("users", key_serde="string", value_serde="json", name="users")
    orders = builder.stream("orders", key_serde="string", value_serde="json", name="orders")
    orders.join(users, pair, name="enrich").to("out", name="sink")
    return builder


def test_a_stream_table_join_miss_is_counted_and_says_when_the_table_only_has_newer_updates(
    clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING), TopologyTestDriver(stream_table_join()) as d:
        d.create_input_topic("users").pipe_input("alice", {"region": "eu"}, 200)
        d.create_input_topic("orders").pipe_input("bob", {"n": 1}, 100)  # before every table update
        clock.now += 10.0
        d.create_input_topic("orders").pipe_input("carol", {"n": 2}, 300)  # after it: carol is simply absent
        d.create_input_topic("orders").pipe_input("alice", {"n": 3}, 300)  # a hit
        (task,) = d.tasks()
        misses = task_drop_status(task.metrics)["join_misses"]
        joined = d.create_output_topic("out").read_key_values_to_list()

    assert misses == {"enrich": 2}
    assert joined == [("alice", [{"n": 3}, {"region": "eu"}])]
    assert drop_lines(caplog) == [
        "Stream record found no table value in join enrich: task=[0_0] topic=[orders] partition=[0] offset=[0] "
        "timestamp=[100] key=['bob']: the table has only updates newer than the stream record (oldest table "
        "update processed at 200): the table side was behind in event time",
        "Stream record found no table value in join enrich: 1 more in the last 10 s; the latest: task=[0_0] "
        "topic=[orders] partition=[0] offset=[1] timestamp=[300] key=['carol']: the key is absent from the table",
    ]


def test_a_stream_global_table_join_miss_is_counted_and_names_the_absent_key(
    clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    builder = StreamsBuilder()
    users = builder.global_table("users", store="users-store", key_serde="string", value_serde="json", name="users")
    orders = builder.stream("orders", key_serde="string", value_serde="json", name="orders")
    orders.left_join(users, user_of, pair, name="enrich").to("out", name="sink")
    with caplog.at_level(logging.WARNING), TopologyTestDriver(builder) as d:
        d.create_input_topic("orders").pipe_input("o1", {"user": "zed"}, 5)
        (task,) = d.tasks()
        misses = task_drop_status(task.metrics)["join_misses"]
        joined = d.create_output_topic("out").read_key_values_to_list()

    assert misses == {"enrich": 1}
    assert joined == [("o1", [{"user": "zed"}, None])]  # a left join still forwards the miss
    assert drop_lines(caplog) == [
        "Stream record found no table value in join enrich: task=[0_0] topic=[orders] partition=[0] offset=[0] "
        "timestamp=[5] globalKey=['zed']: the key is absent from the table"
    ]
