"""On the real broker, output records carry the headers of the input record that caused them (Kafka's
``Record.headers()``): through a repartition topic into a count, each count update (record cache off: one per
record) is written with its input record's headers."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from streamapp_harness import KafkaTestClient, StreamAppInstance, count_by_color_topology, unique, wait_for

pytestmark = pytest.mark.integration

EVENTS = [(f"k{n}", {"n": n, "color": f"c{n % 2}"}) for n in (1, 2, 4, 5, 7)]  # n % 3 == 0 is filtered out


def read_with_headers(bootstrap: str, topic: str, count: int) -> list[tuple[bytes | None, list[tuple[str, bytes]]]]:
    """The first ``count`` records of partition 0 of ``topic``: ``(key, headers)``."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("reader"), "enable.auto.commit": False})
    out: list[tuple[bytes | None, list[tuple[str, bytes]]]] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 60
        while len(out) < count and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None or message.error():
                continue
            out.append((message.key(), list(message.headers() or [])))
    finally:
        consumer.close()
    return out


def test_every_count_update_after_a_repartition_carries_its_input_records_headers(
    kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance]
) -> None:
    app, source, output = unique("headers"), unique("events"), unique("counts")
    kafka.create_topics({source: 1, output: 1})
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    for key, value in EVENTS:
        trace = f"trace-{value['n']}".encode()
        producer.produce(source, key=key.encode(), value=json.dumps(value).encode(), headers=[("trace", trace)])
    assert producer.flush(30) == 0
    settings = {
        "application.id": app,
        "bootstrap.servers": kafka.bootstrap,
        "state.dir": str(workdir / app),
        "statestore.cache.max.bytes": 0,
    }
    instance = StreamAppInstance(workdir, count_by_color_topology([source], output), settings)
    instances.append(instance.start())
    wait_for(lambda: sum(kafka.end_offsets(output).values()) >= len(EVENTS), 120, "one count per event", 1.0)
    instance.stop()

    written = read_with_headers(kafka.bootstrap, output, len(EVENTS))

    assert written == [(f"c{n % 2}".encode(), [("trace", f"trace-{n}".encode())]) for n in (1, 2, 4, 5, 7)]
