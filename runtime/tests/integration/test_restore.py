"""Restore against the real broker: a task's store is rebuilt from its changelog, exactly, and only as much
as needed: everything after deleted local state, only the tail after a clean stop or a crash; ``/status``
reports what was restored per store of a task.

The app counts events per colour through a repartition topic into a RocksDB store with a changelog.
"""

from __future__ import annotations

import shutil
import struct
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from streamapp.state.rocksdb import RocksDBMemory, RocksDBStore
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

PARTITIONS = 3


def setup_app(kafka: KafkaTestClient, workdir: Path) -> tuple[str, str, dict[str, object], dict[str, object]]:
    app, source, output = unique("restore-app"), unique("events"), unique("counts")
    kafka.create_topics({source: PARTITIONS, output: PARTITIONS})
    return app, source, app_config(app, kafka, workdir), count_by_color_topology([source], output)


def app_config(app: str, kafka: KafkaTestClient, workdir: Path) -> dict[str, object]:
    return {
        "application.id": app,
        "bootstrap.servers": kafka.bootstrap,
        "num.stream.threads": 1,
        "commit.interval.ms": 200,
        "state.dir": str(workdir / "state"),
    }


def output_topic(topology: dict[str, object]) -> str:
    return str(topology["nodes"][-1]["topic"])  # type: ignore[index]


def run_until_counts(
    instance: StreamAppInstance, kafka: KafkaTestClient, output: str, expected: dict[str, int]
) -> None:
    instance.start()
    instance.wait_ready()
    wait_for(lambda: kafka.latest_longs(output) == expected, 90, f"counts {expected} in {output}", 1.0)


def test_restore_after_local_state_deleted(
    kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance]
) -> None:
    app, source, config, topology = setup_app(kafka, workdir)
    output = output_topic(topology)
    first = color_events(0, 600)
    kafka.produce(source, first)
    instance = StreamAppInstance(workdir / "run1", topology, config)
    instances.append(instance)
    run_until_counts(instance, kafka, output, expected_color_counts(first))
    assert instance.stop() == 0
    assert any((workdir / "state" / app).glob("1_*/rocksdb/counts"))

    shutil.rmtree(workdir / "state")
    second = color_events(600, 300)
    kafka.produce(source, second)
    again = StreamAppInstance(workdir / "run2", topology, config)
    instances.append(again)
    run_until_counts(again, kafka, output, expected_color_counts(first + second))
    changelog_records = sum(kafka.end_offsets(f"{app}-counts-changelog").values())
    assert again.metric("streamapp_restore_records_total") > 0
    assert again.metric("streamapp_restore_records_total") <= changelog_records
    assert again.stop() == 0


def test_restore_resumes_from_checkpoint(
    kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance]
) -> None:
    app, source, config, topology = setup_app(kafka, workdir)
    output = output_topic(topology)
    changelog = f"{app}-counts-changelog"
    first = color_events(0, 600)
    kafka.produce(source, first)
    home = StreamAppInstance(workdir / "home", topology, config)
    instances.append(home)
    run_until_counts(home, kafka, output, expected_color_counts(first))
    assert home.stop() == 0
    checkpointed = _checkpointed_offsets(workdir / "state" / app)
    assert checkpointed, "a clean stop writes the tasks' .checkpoint files"

    # another instance (other state dir) processes more input: the changelog grows past our checkpoint
    second = color_events(600, 300)
    kafka.produce(source, second)
    elsewhere = StreamAppInstance(workdir / "elsewhere", topology, {**config, "state.dir": str(workdir / "other")})
    instances.append(elsewhere)
    run_until_counts(elsewhere, kafka, output, expected_color_counts(first + second))
    assert elsewhere.stop() == 0

    ends = kafka.end_offsets(changelog)
    tail = sum(end - (checkpointed.get(p, -1) + 1) for p, end in ends.items())
    assert 0 < tail < sum(ends.values())

    third = color_events(900, 90)
    kafka.produce(source, third)
    back = StreamAppInstance(workdir / "back", topology, config)
    instances.append(back)
    run_until_counts(back, kafka, output, expected_color_counts(first + second + third))
    assert back.metric("streamapp_restore_records_total") == tail
    assert back.stop() == 0


def two_counts_topology(source: str, output: str) -> dict[str, Any]:
    """One sub-topology, so one task per partition, with two stores: ``all-counts`` counts every event per
    key, ``kept-counts`` only those whose ``n`` is not a multiple of 3 (so their changelogs differ)."""
    return {
        "nodes": [
            {"name": "events", "type": "source", "topics": [source], "keySerde": "string", "valueSerde": "json"},
            {"name": "all", "type": "count", "input": "events", "store": "all-counts"},
            {"name": "kept", "type": "filter", "input": "events",
             "predicate": "integration_functions:not_multiple_of_three"},
            {"name": "kept-count", "type": "count", "input": "kept", "store": "kept-counts"},
            {"name": "changes", "type": "to_stream", "input": "all"},
            {"name": "out", "type": "sink", "input": "changes", "topic": output, "keySerde": "string",
             "valueSerde": "long"},
        ],
        "stores": [
            {"name": "all-counts", "type": "key_value", "keySerde": "string", "valueSerde": "long"},
            {"name": "kept-counts", "type": "key_value", "keySerde": "string", "valueSerde": "long"},
        ],
    }  # fmt: skip


def test_status_reports_the_restore_of_each_store_of_a_task(
    kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance]
) -> None:
    """After the local state is deleted, the task restores both of its stores from their changelogs; its
    ``/status`` entry names each store with its changelog partition and the records restored into it (the
    whole changelog partition), and the task's ``restored_records`` is their sum."""
    app, source, output = unique("restore-stores"), unique("events"), unique("counts")
    kafka.create_topics({source: 1, output: 1})
    config = app_config(app, kafka, workdir)
    topology = two_counts_topology(source, output)
    events = color_events(0, 300)
    kafka.produce(source, events)
    first = StreamAppInstance(workdir / "run1", topology, config)
    instances.append(first)
    first.start()
    first.wait_ready()
    expected = {key: 1 for key, _ in events}
    wait_for(lambda: kafka.latest_longs(output) == expected, 90, f"counts in {output}", 1.0)
    assert first.stop() == 0

    shutil.rmtree(workdir / "state")
    ends = {store: kafka.end_offsets(f"{app}-{store}-changelog")[0] for store in ("all-counts", "kept-counts")}
    assert ends["all-counts"] > ends["kept-counts"] > 0
    again = StreamAppInstance(workdir / "run2", topology, config)
    instances.append(again.start())
    again.wait_ready()
    (task,) = [task for worker in again.status()["workers"] for task in worker["tasks"]]
    assert task["task_id"] == "0_0"
    assert [(s["store"], s["changelog"], s["restored_records"], s["restore_remaining"]) for s in task["stores"]] == [
        (store, f"{app}-{store}-changelog-0", end, 0) for store, end in ends.items()
    ]
    assert task["restored_records"] == sum(ends.values())
    assert again.stop() == 0


def _checkpointed_offsets(app_dir: Path) -> dict[int, int]:
    offsets: dict[int, int] = {}
    for checkpoint in app_dir.glob("*/.checkpoint"):
        lines = checkpoint.read_text().splitlines()
        for line in lines[2:]:
            _, partition, offset = line.split()
            offsets[int(partition)] = int(offset)
    return offsets


def test_restore_after_a_crash_mid_stream_replays_only_the_changelog_tail_under_exactly_once(
    kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance]
) -> None:
    """SIGKILL the whole instance while input flows (transactions open); each store on disk is at its last
    committed batch; the restarted instance restores exactly the committed changelog records after each
    store's offset (no wipe, no full replay) and the output stays exact."""
    app, source, config, topology = setup_app(kafka, workdir)
    output = output_topic(topology)
    config = {**config, "processing.guarantee": "exactly_once_v2"}
    del config["commit.interval.ms"]  # Kafka's EOS default, 100 ms
    changelog = f"{app}-counts-changelog"
    instance = StreamAppInstance(workdir / "run1", topology, config, instance_id=f"{app}-0")
    instances.append(instance.start())
    instance.wait_ready()
    events = color_events(0, 6000, colors=40)
    stop = threading.Event()

    def produce() -> None:
        for start in range(0, len(events), 100):
            if stop.is_set():
                return
            kafka.produce(source, events[start : start + 100])
            time.sleep(0.1)

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    wait_for(lambda: sum(kafka.end_offsets(changelog).values()) > 200, 60, "changelog records", 0.2)
    instance.kill()
    stop.set()
    producer.join(30)

    # settle the killed producer's open transaction the way the restarted thread will (same transactional.id)
    fence = Producer({"bootstrap.servers": kafka.bootstrap, "transactional.id": f"{app}-{app}-0-1"})
    fence.init_transactions(30)
    stored = _stored_offsets(workdir / "state" / app, "counts")
    assert stored, "the stores hold their changelog offsets"
    committed = kafka.read_committed(changelog)
    tail = {p: sum(1 for part, offset, _, _ in committed if part == p and offset > stored.get(p, -1)) for p in stored}
    assert sum(tail.values()) < len(committed), "a crash must not need a full restore"

    again = StreamAppInstance(workdir / "run2", topology, config, instance_id=f"{app}-0")
    instances.append(again.start())
    again.wait_ready()
    restored = {
        int(task["task_id"].split("_")[1]): task["restored_records"]
        for worker in again.status()["workers"]
        for task in worker["tasks"]
        if task["task_id"].startswith("1_")
    }
    assert restored == tail, f"stored offsets {stored}, committed changelog records {len(committed)}"
    print(f"crash restore: restored {restored} of {len(committed)} committed changelog records (tail {tail})")
    produced = sum(kafka.end_offsets(source).values())
    kafka.produce(source, events[produced:])
    expected = expected_color_counts(events)
    wait_for(lambda: _committed_latest(kafka, output) == expected, 90, "exact counts after the crash", 1.0)
    assert again.stop() == 0


def _stored_offsets(app_dir: Path, store: str) -> dict[int, int]:
    """The changelog offset inside each task's RocksDB store (what restore resumes after), by partition."""
    memory = RocksDBMemory(8 << 20, 2 << 20)
    offsets: dict[int, int] = {}
    for path in sorted(app_dir.glob(f"1_*/rocksdb/{store}")):
        db = RocksDBStore(store, path, memory)
        try:
            offset = db.changelog_offset()
        finally:
            db.close()
        if offset is not None:
            offsets[int(path.parent.parent.name.split("_")[1])] = offset
    return offsets


def _committed_latest(kafka: KafkaTestClient, topic: str) -> dict[str, int]:
    latest: dict[str, int] = {}
    for _, _, key, value in sorted(kafka.read_committed(topic)):
        assert key is not None and value is not None
        latest[key.decode()] = struct.unpack(">q", value)[0]
    return latest
