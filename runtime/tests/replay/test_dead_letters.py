"""Dead letters on the replay: a record a processor fails on goes to the dead-letter topic with its own headers
first and the error headers after them, as the runtime's exception handler writes it (KIP-1033/1034); the
headers travel through the range reads, the task and the writer."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from conformance.harness import wait_stable
from streamapp import StreamsBuilder
from streamapp.replay import ReplayPlan, run_replay
from streamapp.replay.output import markers_topic

from replay import functions as fn

pytestmark = pytest.mark.integration


def test_a_failing_record_becomes_a_dead_letter_with_its_headers(
    spark_session: Any, conformance_bootstrap: str
) -> None:
    prefix = f"dlq-{uuid.uuid4().hex[:8]}"
    source, sink, dlq = f"{prefix}.numbers", f"{prefix}.even", f"{prefix}.dead-letters"
    admin = AdminClient({"bootstrap.servers": conformance_bootstrap})
    topics = [NewTopic(t, 1, 1, config={"retention.ms": "-1"}) for t in (source, sink, dlq)]
    for future in admin.create_topics(topics).values():
        future.result()
    producer = Producer({"bootstrap.servers": conformance_bootstrap})
    for i in range(6):
        producer.produce(
            source,
            key=f"k{i}".encode(),
            value=i.to_bytes(8, "big"),
            timestamp=1_000 + i,
            headers=[("trace", b"t%d" % i)],
        )
    assert producer.flush(30) == 0
    builder = StreamsBuilder()
    (
        builder.stream(source, key_serde="string", value_serde="long", name="numbers")
        .map_values(fn.only_even, name="even")
        .to(sink, name="out")
    )
    plan = ReplayPlan(
        builder.build(),
        {
            "application.id": f"{prefix}-v2",
            "processing.exception.handler": "dead_letter_queue",
            "errors.dead.letter.queue.topic.name": dlq,
        },
        conformance_bootstrap,
        start_offsets={source: {0: 0}},
        end_offsets={source: {0: 6}},
        partitions={sink: 1},
        replay_id=prefix,
    )

    result = run_replay(spark_session, plan)

    wait_stable(admin, [TopicPartition(w.topic, w.partition) for w in result.writes])
    assert result.records_written == {sink: 3, dlq: 3}
    letters = read_with_headers(conformance_bootstrap, dlq, 3)
    assert [key for key, _ in letters] == [b"k1", b"k3", b"k5"]
    for i, (_, headers) in zip((1, 3, 5), letters, strict=True):
        assert headers[0] == ("trace", b"t%d" % i), "the source record's headers come first"
        assert any(b"odd value" in (value or b"") for _, value in headers[1:]), headers
    admin.delete_topics([source, sink, dlq, markers_topic(prefix)])


def read_with_headers(bootstrap: str, topic: str, count: int) -> list[tuple[bytes, list[tuple[str, bytes]]]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:8]}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    records: list[tuple[bytes, list[tuple[str, bytes]]]] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        for _ in range(100):
            message = consumer.poll(0.3)
            if message is not None and not message.error():
                records.append((message.key(), list(message.headers() or [])))
            if len(records) == count:
                break
    finally:
        consumer.close()
    return records
