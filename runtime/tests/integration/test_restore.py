"""Restore against the real broker: a task's store is rebuilt from its changelog, exactly.

The app counts events per colour through a repartition topic into a RocksDB store with a changelog.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
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
    config = {
        "application.id": app,
        "bootstrap.servers": kafka.bootstrap,
        "num.stream.threads": 1,
        "commit.interval.ms": 200,
        "state.dir": str(workdir / "state"),
    }
    return app, source, config, count_by_color_topology([source], output)


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


def _checkpointed_offsets(app_dir: Path) -> dict[int, int]:
    offsets: dict[int, int] = {}
    for checkpoint in app_dir.glob("*/.checkpoint"):
        lines = checkpoint.read_text().splitlines()
        for line in lines[2:]:
            _, partition, offset = line.split()
            offsets[int(partition)] = int(offset)
    return offsets
