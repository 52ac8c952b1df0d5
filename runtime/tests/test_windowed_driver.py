"""Windows through the production task core (TopologyTestDriver): late records reach the dropped-records
metric, and the task's window, session and suppression stores hold what the outputs say."""

from __future__ import annotations

import pytest
from streamapp import StreamsBuilder
from streamapp.dsl.windows import SessionWindows, Suppressed, TimeWindows
from streamapp.state.window_store import WindowValue
from streamapp.testing import TopologyTestDriver
from streamapp.windowed import Windowed


def topology() -> StreamsBuilder:
    builder = StreamsBuilder()
    events = builder.stream("events", key_serde="string", value_serde="json", name="events")
    counts = events.group_by_key().windowed_by(TimeWindows.of_size_and_grace(10, 5)).count(name="counts")
    counts.to_stream(name="count-changes").to("counts", name="counts-out")
    counts.suppress(Suppressed.until_window_closes().with_name("final")).to_stream(name="finals").to(
        "finals", name="finals-out"
    )
    events.group_by_key().windowed_by(SessionWindows.of_inactivity_gap_and_grace(3, 20)).count(name="sessions")
    return builder


@pytest.mark.parametrize("backend", ["memory", "rocksdb"])
def test_late_records_are_counted_as_dropped_and_stores_hold_the_live_windows(backend: str) -> None:
    with TopologyTestDriver(topology(), {"application.id": "w"}, store_backend=backend) as driver:
        events = driver.create_input_topic("events")
        for timestamp in (1, 4, 12, 3, 16, 2):  # 3 is late but within grace (10 + 5 > 12); 2 after it (15 <= 16)
            events.pipe_input("k", {}, timestamp)
        assert driver.metrics().dropped_records_total == 1  # 2 in the time window; the sessions have 20 ms grace
        assert driver.create_output_topic("finals").read_key_values_to_list() == [(Windowed("k", 0, 10), 3)]
        (task,) = driver.tasks()
        assert task.windowed_state.window_store("counts-store").all() == [
            (Windowed("k", 0, 10), WindowValue(3, 4)),
            (Windowed("k", 10, 20), WindowValue(2, 16)),
        ]
        assert task.windowed_state.session_store("sessions-store").all() == [
            (Windowed("k", 1, 4), 4),
            (Windowed("k", 12, 12), 1),
            (Windowed("k", 16, 16), 1),
        ]
        assert task.windowed_state.suppression_buffer("final-store").num_records == 1  # [10,20) still open


def test_a_strict_suppression_buffer_that_overflows_fails_the_record_with_kafkas_message() -> None:
    builder = StreamsBuilder()
    (
        builder.stream("events", key_serde="string", value_serde="json", name="events")
        .group_by_key()
        .windowed_by(TimeWindows.of_size_and_grace(10, 0))
        .count(name="counts")
        .suppress(Suppressed.until_window_closes(Suppressed.BufferConfig.max_records(1).shut_down_when_full()))
        .to_stream(name="finals")
        .to("finals", name="finals-out")
    )
    with TopologyTestDriver(builder, {"application.id": "w"}) as driver:
        events = driver.create_input_topic("events")
        events.pipe_input("a", {}, 1)
        with pytest.raises(Exception, match=r"buffer exceeded its max capacity. Currently \[2/1\] records"):
            events.pipe_input("b", {}, 2)
