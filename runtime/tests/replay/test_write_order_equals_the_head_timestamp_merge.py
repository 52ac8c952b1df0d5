"""The canonical order of a partition written by several producers is a sort (docs/replay.md "Canonical order").

Merging producers' sequences by head timestamp, ties to the producer listed first (the replay's
``tasks.iter_merged``, the runtime's ``PartitionGroup.next_record`` between a task's queues), gives the same order
as a stable sort by ``(running max timestamp within the producer's own sequence, producer index, position)``. The
write relies on it: ``streamapp.replay.spark.write.in_write_order`` sorts with Spark instead of merging in Python.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from streamapp.kafka.types import ConsumerRecord, TopicPartition
from streamapp.processing.partition_group import PartitionGroup, RecordQueue, StampedRecord
from streamapp.replay.tasks import iter_merged

Sequences = list[list[ConsumerRecord]]

timestamps = st.integers(0, 6)  # few values: many ties, within and across producers
sequences_of_timestamps = st.lists(st.lists(timestamps, max_size=8), min_size=1, max_size=4)


def producers(raw: list[list[int]]) -> Sequences:
    """One sequence per producer; a record's key names its producer and position (``b"<producer>:<position>"``)."""
    return [
        [ConsumerRecord("out", 0, j, f"{i}:{j}".encode(), None, ts) for j, ts in enumerate(sequence)]
        for i, sequence in enumerate(raw)
    ]


def sorted_by_running_max(sequences: Sequences) -> list[ConsumerRecord]:
    """The sort the write does: (running max timestamp of the producer's sequence, producer index, position)."""
    keyed: list[tuple[tuple[int, int, int], ConsumerRecord]] = []
    for index, sequence in enumerate(sequences):
        running = -1
        for position, record in enumerate(sequence):
            running = max(running, record.timestamp)
            keyed.append(((running, index, position), record))
    return [record for _, record in sorted(keyed, key=lambda pair: pair[0])]


def partition_group_order(sequences: Sequences) -> list[ConsumerRecord]:
    """The runtime's order: one queue per producer, added in producer order, drained by ``next_record``."""
    group = PartitionGroup(-1)
    for index, sequence in enumerate(sequences):
        queue = RecordQueue(
            TopicPartition(f"producer-{index}", 0),
            lambda _, record: StampedRecord(record, record.key, record.value, record.timestamp),
            lambda _: None,
        )
        for record in sequence:
            queue.add(record)
        group.add_queue(queue)
    order: list[ConsumerRecord] = []
    while (stamped := group.next_record()) is not None:
        order.append(stamped.record)
    return order


@settings(max_examples=2_000, deadline=None)
@given(raw=sequences_of_timestamps)
def test_the_head_timestamp_merge_equals_the_sort_by_running_max_producer_and_position(raw: list[list[int]]) -> None:
    sequences = producers(raw)

    expected = sorted_by_running_max(sequences)

    assert list(iter_merged(sequences)) == expected
    assert partition_group_order(sequences) == expected


def test_a_record_below_its_producers_running_max_follows_the_record_that_set_it() -> None:
    # producer 0: 5, 1 (the 1 is late); producer 1: 3, 4. Merge: 3 and 4 leave before 5, the 1 right after 5.
    sequences = producers([[5, 1], [3, 4]])

    order = [record.key for record in iter_merged(sequences)]

    assert order == [b"1:0", b"1:1", b"0:0", b"0:1"] == [r.key for r in sorted_by_running_max(sequences)]


@pytest.mark.integration
def test_the_writes_spark_sort_puts_every_writers_records_in_the_head_timestamp_merge_order(
    spark_session: Any,
) -> None:
    from pyspark.sql import functions as F
    from streamapp.replay.spark.write import WRITER, in_write_order

    generator = random.Random(17)
    cases: list[Sequences] = []
    rows: list[tuple[int, int, int, int, int, str]] = []
    for writer in range(300):  # one random case per writer, all in one job
        raw = [
            [generator.randint(0, 6) for _ in range(generator.randint(0, 8))] for _ in range(generator.randint(1, 4))
        ]
        sequences = producers(raw)
        cases.append(sequences)
        # producers numbered as (sub-topology, partition) pairs whose order is the producer index; rows shuffled
        rows.extend(
            (writer, index // 2, index % 2, r.offset, r.timestamp, r.key.decode())
            for index, sequence in enumerate(sequences)
            for r in sequence
            if r.key is not None
        )
    generator.shuffle(rows)
    frame = spark_session.createDataFrame(
        rows, f"{WRITER} int, producer_sub int, producer_part int, offset long, timestamp long, id string"
    )

    ordered = in_write_order(frame, 4).withColumn("task", F.spark_partition_id()).collect()

    by_writer: dict[int, list[bytes]] = {}
    for row in ordered:
        assert row["task"] == row[WRITER] % 4
        by_writer.setdefault(row[WRITER], []).append(row["id"].encode())
    for writer, sequences in enumerate(cases):
        assert by_writer.get(writer, []) == [r.key for r in iter_merged(sequences)], writer


@pytest.mark.integration
def test_each_output_partition_gets_the_index_of_its_writer(spark_session: Any) -> None:
    from streamapp.replay.spark.write import writer_index

    # writers are the sorted (topic, partition) pairs that get records: partitions of a topic may be missing
    targets = [("a", 0), ("a", 2), ("b", 1), ("c", 0)]
    frame = spark_session.createDataFrame(targets, "topic string, partition int")

    rows = frame.select("topic", "partition", writer_index(targets).alias("writer")).collect()

    assert {(row["topic"], row["partition"]): row["writer"] for row in rows} == {t: i for i, t in enumerate(targets)}
