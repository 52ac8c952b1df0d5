"""Exception handlers with a dead-letter queue on the real broker (KIP-1034 / KIP-1033): poison records — bytes
that are not JSON, a value a user function rejects — go to the dead-letter topic with the original key, value and
headers plus the error headers, and every record after them is still processed, under both guarantees."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from streamapp_harness import (
    KafkaTestClient,
    StreamAppInstance,
    color_events,
    count_by_color_topology,
    expected_color_counts,
    unique,
    wait_for,
)

pytestmark = pytest.mark.integration


def _read_with_headers(kafka: KafkaTestClient, topic: str) -> list[tuple[bytes | None, bytes | None, dict[str, bytes]]]:
    consumer = Consumer(
        {"bootstrap.servers": kafka.bootstrap, "group.id": unique("dlq-reader"), "enable.partition.eof": True}
    )
    out = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None:
                continue
            if message.error():
                break  # partition EOF
            out.append((message.key(), message.value(), dict(message.headers() or [])))
    finally:
        consumer.close()
    return out


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_poison_records_go_to_the_dead_letter_topic_and_the_rest_is_processed(
    kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance], guarantee: str
) -> None:
    app, source, output, dlq = unique("dlq-app"), unique("events"), unique("counts"), unique("dead-letters")
    kafka.create_topics({source: 1, output: 1, dlq: 1})
    config = {
        "application.id": app,
        "bootstrap.servers": kafka.bootstrap,
        "processing.guarantee": guarantee,
        "commit.interval.ms": 200,
        "state.dir": str(workdir / "state"),
        "default.deserialization.exception.handler": "dead_letter_queue",
        "processing.exception.handler": "dead_letter_queue",
        "errors.dead.letter.queue.topic.name": dlq,
    }
    before, after = color_events(0, 50), color_events(50, 50)
    kafka.produce(source, before)
    kafka.producer.produce(source, key=b"poison", value=b"{not json", headers=[("trace-id", b"t-1")])
    kafka.producer.produce(source, key=b"no-color", value=json.dumps({"n": 1}).encode())  # color() raises KeyError
    assert kafka.producer.flush(30) == 0
    kafka.produce(source, after)

    instance = StreamAppInstance(workdir, count_by_color_topology([source], output), config)
    instances.append(instance.start())
    instance.wait_ready()
    expected = expected_color_counts(before + after)
    wait_for(lambda: kafka.latest_longs(output) == expected, 60, "counts of every record around the poison", 1.0)
    letters = _read_with_headers(kafka, dlq)
    assert [(key, value) for key, value, _ in letters] == [(b"poison", b"{not json"), (b"no-color", b'{"n": 1}')]
    (_, _, poison), (_, _, rejected) = letters
    assert poison["trace-id"] == b"t-1"
    assert poison["__streams.errors.exception"] == b"SerdeError"
    assert (poison["__streams.errors.topic"], poison["__streams.errors.partition"]) == (source.encode(), b"0")
    assert poison["__streams.errors.offset"] == b"50"
    assert rejected["__streams.errors.exception"] == b"KeyError"
    assert rejected["__streams.errors.offset"] == b"51"
    assert b"Traceback" in rejected["__streams.errors.stacktrace"]
    wait_for(lambda: instance.metric("streamapp_dropped_records_total") == 2, 30, "2 dropped records in /metrics")
    assert instance.metric("streamapp_dead_letter_records_total") == 2
    assert instance.stop() == 0
