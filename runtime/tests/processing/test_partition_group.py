"""A task's input queues: timestamp order across partitions and max.task.idle.ms (Kafka's PartitionGroup)."""

from __future__ import annotations

from streamapp.kafka.types import ConsumerRecord, TopicPartition
from streamapp.processing.partition_group import PartitionGroup, RecordQueue, StampedRecord

A, B = TopicPartition("a", 0), TopicPartition("b", 0)


def stamp(queue: RecordQueue, record: ConsumerRecord) -> StampedRecord | None:
    if record.value == b"skip":
        return None
    return StampedRecord(record, record.key, record.value, record.timestamp)


def group_of(max_idle_ms: int, skipped: list[int] | None = None) -> PartitionGroup:
    group = PartitionGroup(max_idle_ms)
    for tp in (A, B):
        group.add_queue(RecordQueue(tp, stamp, lambda r: (skipped if skipped is not None else []).append(r.offset)))
    return group


def add(group: PartitionGroup, tp: TopicPartition, offset: int, timestamp: int, value: bytes = b"v") -> None:
    group.queues[tp].add(ConsumerRecord(tp.topic, tp.partition, offset, b"k", value, timestamp))


def drain(group: PartitionGroup) -> list[tuple[str, int]]:
    out = []
    while (head := group.next_record()) is not None:
        out.append((head.record.topic, head.timestamp))
    return out


def test_records_of_several_partitions_are_taken_in_timestamp_order() -> None:
    group = group_of(0)
    for offset, ts in enumerate([10, 30, 50]):
        add(group, A, offset, ts)
    for offset, ts in enumerate([20, 40]):
        add(group, B, offset, ts)
    assert drain(group) == [("a", 10), ("b", 20), ("a", 30), ("b", 40), ("a", 50)]
    assert group.stream_time == 50


def test_an_empty_partition_with_lag_makes_the_task_wait() -> None:
    group = group_of(0)
    add(group, A, 0, 10)
    assert not group.ready(1_000, lambda tp: (0, 5) if tp == B else (0, 1))  # b has 5 unfetched records
    assert not group.ready(1_000, lambda tp: None)  # lag of b unknown


def test_an_empty_partition_without_lag_is_waited_for_max_task_idle_ms_then_skipped() -> None:
    group = group_of(500)
    add(group, A, 0, 10)
    no_lag = lambda tp: (0, 1) if tp == A else (0, 0)  # noqa: E731
    assert not group.ready(1_000, no_lag)
    assert not group.ready(1_499, no_lag)
    assert group.ready(1_500, no_lag)
    assert group.enforced_processing == 1


def test_max_task_idle_ms_minus_one_never_waits() -> None:
    group = group_of(-1)
    add(group, A, 0, 10)
    assert group.ready(0, lambda tp: None)


def test_skipped_head_records_are_reported_so_their_offsets_are_committed() -> None:
    skipped: list[int] = []
    group = group_of(0, skipped)
    add(group, A, 0, 10, b"skip")
    add(group, A, 1, 11)
    assert drain(group) == [("a", 11)]
    assert skipped == [0]
