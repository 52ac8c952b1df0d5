"""``streamapp.kafka.range_reader.read_range`` (the replay's Kafka reads) on the real broker: exactly the committed
records of ``[start, end)`` in offset order, with their keys, values, timestamps and headers; aborted transactions
and the control records of committed ones skipped, also when the range ends on a control record; a start below the
log-start offset is an error naming the partition, never a silent skip (Spark's ``failOnDataLoss``)."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from streamapp.kafka.range_reader import read_range
from streamapp.kafka.types import KafkaClientError
from streamapp_harness import KafkaTestClient, unique

pytestmark = pytest.mark.integration


def _rows(bootstrap: str, topic: str, start: int, end: int, batch_records: int = 3) -> list[tuple[object, ...]]:
    rows = []
    for batch in read_range({"bootstrap.servers": bootstrap}, topic, 0, start, end, batch_records=batch_records):
        assert len(batch) <= batch_records
        rows.extend(zip(batch.offsets, batch.keys, batch.values, batch.timestamps, batch.headers, strict=True))
    return rows


def _transactional(bootstrap: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"range-reader-{uuid.uuid4()}"})
    producer.init_transactions(30)
    return producer


def test_a_range_gives_its_committed_records_with_their_fields_and_nothing_past_its_end(
    bootstrap: str, kafka: KafkaTestClient
) -> None:
    topic = unique("range-plain")
    kafka.create_topics({topic: 1})
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        headers = [("h", f"v{i}".encode())] if i % 2 else None
        producer.produce(
            topic,
            key=None if i == 4 else f"k{i}".encode(),
            value=f"{i}".encode(),
            timestamp=1_000 + i,
            partition=0,
            headers=headers,
        )
    producer.flush(30)

    rows = _rows(bootstrap, topic, 2, 7)

    assert [r[0] for r in rows] == [2, 3, 4, 5, 6]
    assert rows[2][1] is None and rows[0][1] == b"k2"
    assert [r[2] for r in rows] == [b"2", b"3", b"4", b"5", b"6"]
    assert [r[3] for r in rows] == [1_002, 1_003, 1_004, 1_005, 1_006]
    assert rows[1][4] == [("h", b"v3")] and rows[0][4] is None
    assert _rows(bootstrap, topic, 5, 5) == []


def test_aborted_records_and_control_records_are_skipped_and_a_range_ending_on_a_marker_ends(
    bootstrap: str, kafka: KafkaTestClient
) -> None:
    topic = unique("range-txn")
    kafka.create_topics({topic: 1})
    producer = _transactional(bootstrap)
    for batch, commit in (("a", True), ("b", False), ("c", True)):
        producer.begin_transaction()
        for i in range(3):
            producer.produce(topic, key=f"{batch}{i}".encode(), value=b"x", partition=0)
        producer.flush(30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    end = kafka.end_offsets(topic)[0]  # 3 records + marker, 3 aborted + marker, 3 + marker = 12

    keys = [r[1] for r in _rows(bootstrap, topic, 0, end)]

    assert end == 12
    assert keys == [b"a0", b"a1", b"a2", b"c0", b"c1", b"c2"]
    # a range whose last offset is the first transaction's commit marker ends without waiting for a record
    assert [r[1] for r in _rows(bootstrap, topic, 0, 4)] == [b"a0", b"a1", b"a2"]


def test_a_start_below_the_log_start_offset_fails_naming_the_partition(bootstrap: str, kafka: KafkaTestClient) -> None:
    topic = unique("range-deleted")
    kafka.create_topics({topic: 1})
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(6):
        producer.produce(topic, value=f"{i}".encode(), partition=0)
    producer.flush(30)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_records([TopicPartition(topic, 0, 3)]).values():
        future.result(30)

    with pytest.raises(KafkaClientError, match=rf"{topic}-0"):
        _rows(bootstrap, topic, 0, 6)
    assert [r[0] for r in _rows(bootstrap, topic, 3, 6)] == [3, 4, 5]
