"""``handover.outputs: TakeOver`` on the broker, per key across the switch: the old version (a real ``streamapp run``)
counts per key into ``out`` while records arrive, is stopped with SIGTERM (what scaling it to 0 does to its pods),
more records arrive, the replay (a real ``streamapp replay run`` on local Spark) runs the new topology over
``[earliest, where the old version stopped)`` without its sink into ``out`` (``takeover.without_sinks``), the new
version's group is set to the switch (``takeover.switch_offsets``) and the new version (a real ``streamapp run``)
goes on, with records arriving while it runs. Per key, ``out`` must read exactly 1, 2, ..., n in offset order: no
count lost or written twice at the switch; the new output ``new-out`` too (the replay's history, then the new
version's own). The controller's part (when it stops, scales back, what it records) is tested over fakes in
``test_replay_takeover.py``; this is the part the switch's guarantee rests on.

Needs the broker and Spark; about a minute (Spark's start most of it).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from streamapp import StreamsBuilder
from streamapp_operator.streamreplays import replay_plan, takeover

pytestmark = pytest.mark.integration

BOOTSTRAP = os.environ.get("STREAMAPP_TEST_BOOTSTRAP", "127.0.0.1:9092")
KEYS = 7
BIN = Path(sys.executable).parent


def _topology(prefix: str) -> dict[str, Any]:
    """Counts per key into ``out`` (the old version's output, taken over) and, in the new version, ``new-out``."""
    builder = StreamsBuilder()
    counts = builder.stream(f"{prefix}.in", key_serde="string", value_serde="string", name="in").group_by_key()
    changes = counts.count(name="count", store="counts").to_stream(name="changes")
    for sink in ("out", "new-out"):
        changes.to(f"{prefix}.{sink}", name=sink, key_serde="string", value_serde="long")
    return builder.build().to_dict()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class _App:
    """A ``streamapp run`` process of ``topology`` under ``application_id``, exactly-once, record cache off."""

    def __init__(self, folder: Path, topology: dict[str, Any], application_id: str) -> None:
        folder.mkdir(parents=True)
        (folder / "topology.yaml").write_text(yaml.safe_dump(topology))
        config = {
            "application.id": application_id,
            "bootstrap.servers": BOOTSTRAP,
            "processing.guarantee": "exactly_once_v2",
            "statestore.cache.max.bytes": 0,
            "commit.interval.ms": 100,
            "state.dir": str(folder / "state"),
            "http.port": _free_port(),
        }
        (folder / "streams.yaml").write_text(yaml.safe_dump(config))
        self.log = folder / "app.log"
        command = [str(BIN / "streamapp"), "run", "--topology", "topology.yaml", "--config", "streams.yaml"]
        with self.log.open("w") as out:
            self.process = subprocess.Popen(command, cwd=folder, stdout=out, stderr=subprocess.STDOUT)

    def stop(self) -> int:
        """SIGTERM, as a pod's deletion sends: the runtime closes its tasks and commits."""
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=90)


@pytest.fixture
def prefix() -> Iterator[str]:
    prefix = f"takeover-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    topics = [NewTopic(f"{prefix}.{t}", 2, 1, config={"retention.ms": "-1"}) for t in ("in", "out", "new-out")]
    for future in admin.create_topics(topics).values():
        future.result()
    yield prefix
    doomed = [t for t in admin.list_topics(timeout=10).topics if t.startswith(prefix)]
    admin.delete_topics(doomed, operation_timeout=30)
    for group in (f"{prefix}-v1", f"{prefix}-v2"):
        admin.delete_consumer_groups([group])


def _read(topic: str, group: str) -> list[tuple[str, int, int, int]]:
    """Every committed record of ``topic``: (key, count, partition, offset), read up to the end offsets."""
    consumer = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": group, "isolation.level": "read_committed",
                         "enable.auto.commit": False})  # fmt: skip
    try:
        parts = [TopicPartition(topic, p, 0) for p in (0, 1)]
        consumer.assign(parts)
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in (0, 1)}
        records: list[tuple[str, int, int, int]] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                count = int.from_bytes(message.value(), "big")
                records.append((message.key().decode(), count, message.partition(), message.offset()))
            positions = {tp.partition: tp.offset for tp in consumer.position(parts)}
            if all(positions[p] >= end for p, end in ends.items()):
                break
        return records
    finally:
        consumer.close()


def _wait_for(topic: str, records: int, what: str, app: _App, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(_read(topic, f"reader-{uuid.uuid4().hex[:6]}")) >= records:
            return
        assert app.process.poll() is None, app.log.read_text()[-3000:]
        time.sleep(1)
    raise AssertionError(f"timed out waiting for {what}: {app.log.read_text()[-3000:]}")


def test_the_new_version_takes_over_the_old_versions_output_with_no_count_lost_or_twice_per_key(
    prefix: str, tmp_path: Path
) -> None:
    source, out, new_out = f"{prefix}.in", f"{prefix}.out", f"{prefix}.new-out"
    producer = Producer({"bootstrap.servers": BOOTSTRAP, "partitioner": "murmur2_random"})
    sent: dict[str, int] = {}

    def produce(n: int) -> None:
        for _ in range(n):
            i = sum(sent.values())
            key = f"k{i % KEYS}"
            producer.produce(source, key=key.encode(), value=b"x", timestamp=1_000 + i)
            sent[key] = sent.get(key, 0) + 1
        assert producer.flush(30) == 0

    old_topology = takeover.without_sinks(_topology(prefix), [new_out])  # the old version writes out only
    produce(140)
    old = _App(tmp_path / "v1", old_topology, f"{prefix}-v1")
    _wait_for(out, 140, "the old version's counts of the history", old)
    produce(1500)  # arriving while the old version runs: it stops somewhere among them
    assert old.stop() == 0, old.log.read_text()[-3000:]

    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    request = [ConsumerGroupTopicPartitions(f"{prefix}-v1", [TopicPartition(source, p) for p in (0, 1)])]
    listed = admin.list_consumer_group_offsets(request)[f"{prefix}-v1"].result()
    committed = {source: {tp.partition: tp.offset for tp in listed.topic_partitions if tp.offset >= 0}}
    switch = takeover.switch_offsets(committed, {source: {0: 0, 1: 0}})
    assert 140 <= sum(switch[source].values()) < sum(sent.values()), "the old version stopped among the records"
    produce(50)  # arriving while the replay runs

    replay_dir = tmp_path / "replay"
    replay_dir.mkdir()
    plan = replay_plan.plan_document(
        replay_plan.PlanInputs(
            replay_id=prefix,
            topology=takeover.without_sinks(_topology(prefix), [out]),
            config={"application.id": f"{prefix}-v2", "processing.guarantee": "exactly_once_v2"},
            bootstrap_servers=BOOTSTRAP,
            start={source: {0: 0, 1: 0}},
            end=switch,
            sink_partitions={new_out: 2},
        )
    )
    (replay_dir / "plan.yaml").write_text(yaml.safe_dump(plan))
    command = [str(BIN / "streamapp"), "replay", "run", "--plan", "plan.yaml", "--master", "local[1]"]
    replayed = subprocess.run(command, cwd=replay_dir, capture_output=True, text=True, timeout=300)
    assert replayed.returncode == 0, replayed.stderr[-3000:]

    offsets = [TopicPartition(source, p, o) for p, o in switch[source].items()]
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(f"{prefix}-v2", offsets)])[f"{prefix}-v2"].result()
    new = _App(tmp_path / "v2", _topology(prefix), f"{prefix}-v2")
    produce(60)  # arriving while the new version runs
    total = sum(sent.values())
    _wait_for(out, total, "every count in out", new)
    _wait_for(new_out, total, "every count in new-out", new)
    assert new.stop() == 0, new.log.read_text()[-3000:]

    for topic in (out, new_out):
        per_key: dict[str, list[int]] = {}
        for key, count, _, _ in sorted(_read(topic, f"check-{uuid.uuid4().hex[:6]}"), key=lambda r: (r[2], r[3])):
            per_key.setdefault(key, []).append(count)
        assert per_key == {key: list(range(1, n + 1)) for key, n in sent.items()}, topic
