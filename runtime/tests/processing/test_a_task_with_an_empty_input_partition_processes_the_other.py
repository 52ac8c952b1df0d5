"""A task with two input partitions whose one partition is empty (a stream-table join once its table is loaded):
``StreamTask.process_ready`` takes the other partition's records in one run, as if it asked the partition group
before each record, with the lags of one moment (Kafka Streams' lags as of the consumer's last poll)."""

from __future__ import annotations

from pathlib import Path

from join_helpers import OUTPUT, STREAM, TABLE, stream_table_join_task
from kafka_fakes import FakeCluster, FakeProducer
from streamapp.kafka.types import ConsumerRecord, TopicPartition
from streamapp.processing.task import StreamTask
from streamapp.state.record_cache import ThreadCache

CARRIERS, FLIGHTS = TopicPartition(TABLE, 0), TopicPartition(STREAM, 0)


def new_task(tmp_path: Path, max_task_idle_ms: int = 0) -> tuple[StreamTask, FakeCluster, FakeProducer]:
    return stream_table_join_task(tmp_path, ThreadCache(10 << 20), max_task_idle_ms=max_task_idle_ms)


def add(task: StreamTask, tp: TopicPartition, offset: int, key: str, value: str, timestamp: int) -> None:
    task.add_record(ConsumerRecord(tp.topic, 0, offset, key.encode(), value.encode(), timestamp), tp)


def joined(cluster: FakeCluster, producer: FakeProducer) -> list[str]:
    producer.flush(1)
    return [r.value.decode() for r in cluster.records(OUTPUT) if r.value]


class Watermarks:
    """The consumer's fetched ``(low, high)`` per partition, counting the questions."""

    def __init__(self, marks: dict[TopicPartition, tuple[int, int]]) -> None:
        self.marks = marks
        self.asked: list[TopicPartition] = []

    def __call__(self, tp: TopicPartition) -> tuple[int, int] | None:
        self.asked.append(tp)
        return self.marks.get(tp)


def test_the_stream_is_drained_past_the_loaded_table_with_one_enforced_processing_per_record(tmp_path: Path) -> None:
    task, cluster, producer = new_task(tmp_path)
    add(task, CARRIERS, 0, "AA", "American", 1)
    add(task, CARRIERS, 1, "UA", "United", 2)
    for offset in range(5):
        add(task, FLIGHTS, offset, "AA" if offset % 2 else "UA", f"f{offset}", 10 + offset)
    marks = Watermarks({CARRIERS: (0, 2), FLIGHTS: (0, 5)})

    assert task.process_ready(marks, now_ms=1_000) == 7

    assert joined(cluster, producer) == [
        "f0 by United",
        "f1 by American",
        "f2 by United",
        "f3 by American",
        "f4 by United",
    ]
    assert task.input.enforced_processing == 5  # one per flight taken while the carriers waited, as ready() counts
    assert task.input.stream_time == 14
    assert task.consumed_offsets == {CARRIERS: 2, FLIGHTS: 5}
    assert marks.asked.count(CARRIERS) == 1  # the empty partition's lag is read once per call


def test_the_drain_stops_at_the_slice_and_goes_on_in_the_next_call(tmp_path: Path) -> None:
    task, cluster, producer = new_task(tmp_path)
    add(task, CARRIERS, 0, "AA", "American", 1)
    for offset in range(5):
        add(task, FLIGHTS, offset, "AA", f"f{offset}", 10 + offset)
    marks = Watermarks({CARRIERS: (0, 1), FLIGHTS: (0, 5)})

    assert task.process_ready(marks, now_ms=1_000, max_records=3) == 3
    assert task.consumed_offsets == {CARRIERS: 1, FLIGHTS: 2}
    assert task.process_ready(marks, now_ms=1_000) == 3

    assert joined(cluster, producer) == [f"f{i} by American" for i in range(5)]
    assert task.input.enforced_processing == 5


def test_a_table_partition_with_unfetched_records_stops_the_drain_and_is_not_waited_past(tmp_path: Path) -> None:
    task, cluster, producer = new_task(tmp_path, max_task_idle_ms=500)
    add(task, CARRIERS, 0, "AA", "American", 1)
    for offset in range(3):
        add(task, FLIGHTS, offset, "AA", f"f{offset}", 10 + offset)

    assert task.process_ready(Watermarks({CARRIERS: (0, 3), FLIGHTS: (0, 3)}), now_ms=1_000) == 1  # 2 unfetched
    assert task.process_ready(Watermarks({CARRIERS: (0, 1), FLIGHTS: (0, 3)}), now_ms=1_000) == 0  # idle 500 ms
    assert task.process_ready(Watermarks({CARRIERS: (0, 1), FLIGHTS: (0, 3)}), now_ms=1_500) == 3

    assert joined(cluster, producer) == [f"f{i} by American" for i in range(3)]
    assert task.input.enforced_processing == 3
