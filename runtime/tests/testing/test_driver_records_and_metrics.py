"""The driver's Kafka-shaped test API: TestRecord with headers and record time, output topics of any name,
and metrics under Kafka Streams' names and tags (Kafka's TestRecord, createOutputTopic, metrics())."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from streamapp import StreamsBuilder
from streamapp.testing import MetricName, TestRecord, TopologyTestDriver


def carrier(key: Any, value: Any) -> Any:
    return (value or {}).get("carrier", "none")


def parity_topic(key: Any, value: Any) -> str:
    return "even" if value % 2 == 0 else "odd"


def carriers_counted() -> StreamsBuilder:
    builder = StreamsBuilder()
    (
        builder.stream("flights", key_serde="string", value_serde="json", name="flights")
        .group_by(carrier, name="by-carrier", key_serde="string")
        .count(name="per-carrier", store="per-carrier-store")
        .to_stream(name="changes")
        .to("per-carrier", name="out", value_serde="long")
    )
    return builder


def test_a_test_record_keeps_its_headers_and_record_time_on_the_topic_it_was_piped_into() -> None:
    with TopologyTestDriver(carriers_counted()) as driver:
        flights = driver.create_input_topic("flights")
        piped = TestRecord("N1", {"carrier": "UA"}, 1_700_000_000_000, headers=[("trace", b"t-1"), ("trace", b"t-2")])
        flights.pipe_input(piped)

        read = driver.create_output_topic("flights").read_record()

    assert read == piped
    assert read.headers == (("trace", b"t-1"), ("trace", b"t-2"))
    assert read.header("trace") == b"t-2"
    assert read.record_time == datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)


def test_pipe_input_takes_the_record_time_as_an_aware_datetime_and_rejects_a_naive_one() -> None:
    with TopologyTestDriver(carriers_counted()) as driver:
        flights = driver.create_input_topic("flights")
        flights.pipe_input("N1", {"carrier": "UA"}, datetime(2024, 1, 1, tzinfo=UTC), headers=[("h", b"v")])
        with pytest.raises(ValueError, match="no time zone"):
            flights.pipe_input("N2", {"carrier": "UA"}, datetime(2024, 1, 1))
        with pytest.raises(TypeError, match=r"\(str, bytes\) pair"):
            not_bytes: Any = [("h", "not bytes")]
            flights.pipe_input("N3", {"carrier": "UA"}, 5, headers=not_bytes)

        records = driver.create_output_topic("per-carrier").read_records_to_list()

    assert records == [TestRecord("UA", 1, 1_704_067_200_000, headers=[("h", b"v")])]  # the input's headers


def test_an_output_topic_nothing_writes_reads_empty_instead_of_failing() -> None:
    with TopologyTestDriver(carriers_counted()) as driver:
        driver.create_input_topic("flights").pipe_input("N1", {"carrier": "UA"}, 1_000)

        nowhere = driver.create_output_topic("no-such-topic")

        assert nowhere.is_empty()
        assert nowhere.read_records_to_list() == []


def test_a_topic_an_extractor_picks_is_read_with_the_extractor_sinks_serdes() -> None:
    builder = StreamsBuilder()
    builder.stream("numbers", key_serde="string", value_serde="long").to(parity_topic)

    with TopologyTestDriver(builder) as driver:
        driver.create_input_topic("numbers").pipe_records([("a", 1, 10), ("b", 2, 20), ("c", 3, 30)])

        odd, even = driver.create_output_topic("odd"), driver.create_output_topic("even")

        assert odd.read_key_values_to_list() == [("a", 1), ("c", 3)]
        assert even.read_key_values_to_list() == [("b", 2)]


def test_metrics_have_kafka_names_with_thread_task_and_source_node_tags() -> None:
    with TopologyTestDriver(carriers_counted(), partitions={"flights": 2}) as driver:
        driver.create_input_topic("flights").pipe_records(
            [("N1", {"carrier": "UA"}, 1), ("N2", {"carrier": "AA"}, 2), ("N3", None, 3), ("N4", {"carrier": "UA"}, 4)]
        )
        metrics = driver.kafka_metrics()
        driver.advance_wall_clock_time(60_000)
        later = driver.kafka_metrics()

    thread_id = next(name.tag("thread-id") for name in metrics)
    assert thread_id is not None

    def value(name: str, group: str, **tags: str) -> float:
        return metrics[MetricName.of(name, group, {"thread-id": thread_id, **tags})]

    task_ids = sorted({task for name in metrics if (task := name.tag("task-id")) is not None})
    assert task_ids == ["0_0", "0_1", "1_0", "1_1"]
    per_task = {task: value("process-total", "stream-task-metrics", **{"task-id": task}) for task in task_ids}
    assert per_task["0_0"] + per_task["0_1"] == 4  # every flight, over the source topic's two partitions
    assert per_task["1_0"] + per_task["1_1"] == 4  # all repartitioned; the count drops the null value
    assert value("process-total", "stream-thread-metrics") == 8
    assert sum(value("dropped-records-total", "stream-task-metrics", **{"task-id": t}) for t in task_ids) == 1
    flights_read = [
        value("process-total", "stream-processor-node-metrics", **{"task-id": t, "processor-node-id": "flights"})
        for t in ("0_0", "0_1")
    ]
    assert flights_read == [per_task["0_0"], per_task["0_1"]]
    assert value("process-rate", "stream-thread-metrics") == pytest.approx(8 / 30)  # Kafka's Rate: >= 30 s
    assert later[MetricName.of("process-rate", "stream-thread-metrics", {"thread-id": thread_id})] == pytest.approx(
        8 / 60
    )
