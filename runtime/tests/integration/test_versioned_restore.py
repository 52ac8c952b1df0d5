"""A versioned table and the grace buffer of its stream-table join on the real broker, restored in another process
from their changelogs after the local state is deleted (record cache on, its default size): the changelog holds one
record per version in Kafka's format (``ChangeLoggingVersionedKeyValueBytesStore``), and the restored versions and
buffered records join as the first process would have joined them (Kafka's ``RocksDBVersionedStore`` restore)."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import ConfigResource
from streamapp import StreamsBuilder
from streamapp_harness import KafkaTestClient, StreamAppInstance, unique, wait_for

pytestmark = pytest.mark.integration

SECOND = 1_000
BASE = int(time.time() * 1000) - 120 * SECOND  # recent, so the broker keeps the records
RETENTION = 60 * SECOND


def topology(rates: str, orders: str, out: str) -> dict[str, Any]:
    builder = StreamsBuilder()
    table = builder.table(rates, key_serde="string", value_serde="json", name="rates", history_retention_ms=RETENTION)
    stream = builder.stream(orders, key_serde="string", value_serde="json", name="orders")
    stream.join(table, "integration_functions:pair", name="priced", grace_ms=SECOND).to(out, name="out")
    return builder.build().to_dict()


def produce(bootstrap: str, topic: str, records: list[tuple[str, Any, float]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for key, value, seconds in records:
        payload = None if value is None else json.dumps(value).encode()
        producer.produce(topic, key=key.encode(), value=payload, timestamp=BASE + int(seconds * SECOND))
    producer.flush(30)


def read_with_timestamps(bootstrap: str, topic: str, count: int) -> list[tuple[bytes | None, bytes | None, int]]:
    """The first ``count`` records of partition 0 of ``topic``: ``(key, value, timestamp)``; fewer after 30 s."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("reader"), "enable.auto.commit": False})
    out: list[tuple[bytes | None, bytes | None, int]] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 30
        while len(out) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                out.append((message.key(), message.value(), message.timestamp()[1]))
    finally:
        consumer.close()
    return out


def joined(kafka: KafkaTestClient, topic: str) -> list[Any]:
    """The joined values of every output record of ``topic`` (one partition), in offset order."""
    return [json.loads(value) for _, _, _, value in sorted(kafka.read_all(topic)) if value is not None]


def test_versions_and_buffered_records_are_restored_in_another_process(
    kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance]
) -> None:
    rates, orders, out = (unique(role) for role in ("rates", "orders", "priced"))
    kafka.create_topics(dict.fromkeys((rates, orders, out), 1))
    app = unique("versioned-restore")
    config = {"application.id": app, "bootstrap.servers": kafka.bootstrap, "state.dir": str(workdir / "state")}
    config["commit.interval.ms"] = 200  # the record cache keeps its default size
    desc = topology(rates, orders, out)
    changelog = f"{app}-rates-store-changelog"

    first = StreamAppInstance(workdir / "run1", desc, config)
    instances.append(first)
    first.start()
    first.wait_ready()
    produce(kafka.bootstrap, rates, [("eur", {"r": 1}, 1), ("eur", {"r": 3}, 3), ("eur", {"r": 2}, 2)])
    wait_for(lambda: len(read_with_timestamps(kafka.bootstrap, changelog, 3)) == 3, 60, "the table's changelog")
    # o1 (2.5 s) waits out the 1 s grace; o2 (4 s) moves stream time past it and stays buffered itself
    produce(kafka.bootstrap, orders, [("eur", {"o": 1}, 2.5), ("eur", {"o": 2}, 4)])
    wait_for(lambda: len(kafka.read_all(out)) == 1, 60, "the first join")
    time.sleep(1)  # a commit interval or more: o2 is in the buffer's changelog
    assert first.stop() == 0

    assert read_with_timestamps(kafka.bootstrap, changelog, 3) == [
        (b"eur", b'{"r":1}', BASE + 1 * SECOND),
        (b"eur", b'{"r":3}', BASE + 3 * SECOND),
        (b"eur", b'{"r":2}', BASE + 2 * SECOND),
    ]
    resource = ConfigResource(ConfigResource.Type.TOPIC, changelog)
    entries = kafka.admin.describe_configs([resource])[resource].result(30)
    assert entries["min.compaction.lag.ms"].value == str(RETENTION + 86_400_000)

    shutil.rmtree(workdir / "state")
    # o3 (5.5 s) evicts the restored o2, joined with the latest version; o4 (2.2 s) is older than stream time minus
    # the grace, so it joins at once, with the restored version valid at 2.2 s
    produce(kafka.bootstrap, orders, [("eur", {"o": 3}, 5.5), ("eur", {"o": 4}, 2.2)])
    second = StreamAppInstance(workdir / "run2", desc, config)
    instances.append(second)
    second.start()
    second.wait_ready()
    wait_for(lambda: len(kafka.read_all(out)) == 3, 60, "the joins after the restore")
    assert joined(kafka, out) == [
        [{"o": 1}, {"r": 2}],
        [{"o": 2}, {"r": 3}],
        [{"o": 4}, {"r": 2}],
    ]
    assert second.metric("streamapp_restore_records_total") > 0
    assert second.stop() == 0
