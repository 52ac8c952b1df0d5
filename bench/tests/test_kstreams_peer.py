"""The Kafka Streams (Java) peer counts per key with Kafka's default record cache (it needs mvn and java; the build
is cached in .cache/bench-kstreams/)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient

from bench.data import delete_topics, produce_all, recreate_topic
from bench.peers.kstreams import ensure_kstreams, kstreams_command

BOOTSTRAP = os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:9092")
KEYS = [f"N{i}" for i in range(5)]
PER_KEY = 200


def read_all(topic: str) -> list[tuple[str, int]]:
    consumer = Consumer(
        {"bootstrap.servers": BOOTSTRAP, "group.id": f"read-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    records: list[tuple[str, int]] = []
    idle = 0
    while idle < 3:
        batch = consumer.consume(1000, timeout=1.0)
        idle = 0 if batch else idle + 1
        for message in batch:
            key, value = message.key(), message.value()
            if message.error() is None and key is not None and value is not None:
                records.append((key.decode(), int(value)))
    consumer.close()
    return records


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("mvn") is None or shutil.which("java") is None, reason="needs mvn and java")
def test_the_kafka_streams_peer_counts_every_key_and_merges_updates_in_its_record_cache(tmp_path: Path) -> None:
    tag = f"bench-kstreams-{uuid.uuid4().hex[:6]}"
    source, sink = f"{tag}-in", f"{tag}-out"
    classpath = ensure_kstreams()
    process = None
    try:
        recreate_topic(BOOTSTRAP, source, 2)
        recreate_topic(BOOTSTRAP, sink, 2)
        inputs = ((key.encode(), b'{"dep_time": 1}', 1_700_000_000_000 + i) for i in range(PER_KEY) for key in KEYS)
        assert produce_all(BOOTSTRAP, source, inputs) == PER_KEY * len(KEYS)
        command = kstreams_command(classpath, BOOTSTRAP, tag, source, sink, "at_least_once", 500, tmp_path / "state")
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        deadline = time.monotonic() + 120
        latest: dict[str, int] = {}
        records: list[tuple[str, int]] = []
        while time.monotonic() < deadline and latest != dict.fromkeys(KEYS, PER_KEY):
            time.sleep(2)
            records = read_all(sink)
            latest = dict(records)

        assert latest == dict.fromkeys(KEYS, PER_KEY)
        assert len(records) < PER_KEY * len(KEYS) // 2  # the cache merged a key's updates between commits
    finally:
        if process is not None:
            process.send_signal(signal.SIGTERM)
            process.wait(60)
        admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
        delete_topics(BOOTSTRAP, [t for t in admin.list_topics(timeout=10).topics if tag in t])
