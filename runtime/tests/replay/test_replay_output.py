"""Effectively-once replay output (docs/adr/0006-replay-output.md): a replay job killed while it writes, then run
again, leaves every output record exactly once for a ``read_committed`` consumer: no duplicate, no gap."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from conformance.harness import wait_stable
from streamapp import StreamsBuilder
from streamapp.replay import ReplayPlan, run_replay
from streamapp.replay.output import markers_topic
from streamapp.serdes import serde_for

from replay.reading import read_committed

pytestmark = pytest.mark.integration

RECORDS = 3_000
KEYS = 30
CHUNK = 10
STREAMAPP = Path(sys.executable).parent / "streamapp"


def counts_per_key() -> StreamsBuilder:
    builder = StreamsBuilder()
    (
        builder.stream("numbers", key_serde="string", value_serde="long", name="numbers")
        .group_by_key()
        .count(name="count", store="counts")
        .to_stream(name="changes")
        .to("counts", name="out")
    )
    return builder


def read_counts(bootstrap: str, topic: str, partitions: int) -> list[tuple[str, int]]:
    """Every committed record of ``topic`` as ``(key, count)``, partition by partition in offset order."""
    key_serde, value_serde = serde_for("string", topic, is_key=True), serde_for("long", topic)
    return [
        (key_serde.deserialize(key), value_serde.deserialize(value))
        for _, key, value, _ in read_committed(bootstrap, topic, partitions)
    ]


def test_a_replay_killed_while_writing_then_run_again_has_no_duplicate_and_no_gap(
    spark_session: Any, conformance_bootstrap: str, tmp_path: Path
) -> None:
    prefix = f"kill-{uuid.uuid4().hex[:8]}"
    source, sink = f"{prefix}.numbers", f"{prefix}.counts"
    admin = AdminClient({"bootstrap.servers": conformance_bootstrap})
    for future in admin.create_topics(
        [NewTopic(source, 1, 1, config={"retention.ms": "-1"}), NewTopic(sink, 2, 1, config={"retention.ms": "-1"})]
    ).values():
        future.result()
    producer = Producer({"bootstrap.servers": conformance_bootstrap})
    for i in range(RECORDS):
        producer.produce(source, key=f"k{i % KEYS}".encode(), value=(i).to_bytes(8, "big"), timestamp=1_000 + i)
    assert producer.flush(30) == 0
    document = counts_per_key().build().to_dict()
    for node in document["nodes"]:
        node.update({"topics": [source]} if node.get("topics") else {"topic": sink} if node.get("topic") else {})
    plan = ReplayPlan.from_document(
        {
            "replayId": prefix,
            "bootstrapServers": conformance_bootstrap,
            "topology": document,
            "config": {"application.id": f"{prefix}-v2"},
            "from": {source: {0: 0}},
            "to": {source: {0: RECORDS}},
            "partitions": {sink: 2},
        }
    )
    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text(yaml.safe_dump(plan.to_document()))

    # 1. the job, as `streamapp replay run`, killed (SIGKILL, driver JVM and Python workers) mid-write
    log = (tmp_path / "replay.log").open("wb")
    job = subprocess.Popen(
        [str(STREAMAPP), "replay", "run", "--plan", str(plan_file), "--chunk-records", str(CHUNK)],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 240
        while committed_markers(conformance_bootstrap, admin, prefix) < 20:
            assert job.poll() is None, f"the replay ended before it was killed: {(tmp_path / 'replay.log').read_text()}"
            assert time.monotonic() < deadline, "the replay wrote no chunk within 240 s"
            time.sleep(0.2)
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait(30)

    # 2. the rerun: same plan, same replay id
    result = run_replay(spark_session, plan, chunk_records=CHUNK)

    assert sum(w.chunks_skipped for w in result.writes) > 0, "the killed job had committed some chunks"
    assert sum(w.chunks_written for w in result.writes) > 0, "the job was killed before it wrote them all"
    wait_stable(admin, [TopicPartition(w.topic, w.partition) for w in result.writes])
    counts = read_counts(conformance_bootstrap, sink, 2)
    assert len(counts) == RECORDS
    per_key: dict[str, list[int]] = {}
    for key, count in counts:
        per_key.setdefault(key, []).append(count)
    assert per_key == {f"k{k}": list(range(1, RECORDS // KEYS + 1)) for k in range(KEYS)}  # no duplicate, no gap
    changelog = read_counts(conformance_bootstrap, f"{prefix}-v2-counts-changelog", 1)
    assert dict(changelog) == {f"k{k}": RECORDS // KEYS for k in range(KEYS)}

    admin.delete_topics([source, sink, f"{prefix}-v2-counts-changelog", markers_topic(prefix)])


def committed_markers(bootstrap: str, admin: AdminClient, replay_id: str) -> int:
    """End offsets of the replay's markers topic summed (two per committed chunk: the marker and the commit
    marker; 0 while the topic does not exist)."""
    topic = markers_topic(replay_id)
    metadata = admin.list_topics(topic, timeout=10).topics.get(topic)
    if metadata is None or metadata.error is not None:
        return 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "markers-probe"})
    try:
        return sum(
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1]
            for p in metadata.partitions
        )
    finally:
        consumer.close()
