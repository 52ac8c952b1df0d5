"""``streamapp reset`` on the real broker: committed offsets move to the target, the application's internal
topics are deleted and no other topic is, and a group with live members is refused without any change."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from streamapp.cli import main
from streamapp.kafka.admin import TopicAdmin
from streamapp.kafka.types import TopicPartition
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

RECORDS_PER_PARTITION = 10
T0_MS = 1_700_000_000_000  # record i of a partition has timestamp T0 + i seconds


@dataclass
class App:
    """A stopped application's footprint: its input topic with records and committed offsets at the end, its
    internal topics, and foreign topics that a reset must not touch."""

    application_id: str
    input_topic: str
    internal: list[str]
    foreign: list[str]
    admin: TopicAdmin
    bootstrap: str

    def partitions(self) -> list[TopicPartition]:
        return [TopicPartition(self.input_topic, p) for p in range(2)]

    def committed(self) -> dict[TopicPartition, int | None]:
        return self.admin.committed_offsets(self.application_id, self.partitions())

    def existing(self, topics: list[str]) -> set[str]:
        return set(self.admin.partition_counts(topics))

    def reset(self, *args: str) -> Any:
        return CliRunner().invoke(
            main,
            ["reset", "--application-id", self.application_id, "--bootstrap-server", self.bootstrap, *args],
            catch_exceptions=False,
        )


@pytest.fixture
def app(kafka: KafkaTestClient, bootstrap: str) -> Iterator[App]:
    application_id = unique("reset-app")
    other = unique("reset-other")
    input_topic = f"{application_id}-input-events"
    internal = [f"{application_id}-by-color-repartition", f"{application_id}-counts-changelog"]
    foreign = [f"{other}-counts-changelog", f"{application_id}-notes", f"{other}-events"]
    kafka.create_topics({input_topic: 2, **dict.fromkeys(internal, 2), **dict.fromkeys(foreign, 1)})
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition in range(2):
        for i in range(RECORDS_PER_PARTITION):
            producer.produce(input_topic, value=b"v", partition=partition, timestamp=T0_MS + i * 1000)
    assert producer.flush(30) == 0
    admin = TopicAdmin({"bootstrap.servers": bootstrap})
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": application_id, "enable.auto.commit": False})
    consumer.commit(
        offsets=[KafkaTopicPartition(input_topic, p, RECORDS_PER_PARTITION) for p in range(2)], asynchronous=False
    )
    consumer.close()
    yield App(application_id, input_topic, internal, foreign, admin, bootstrap)
    admin.delete_topics([input_topic, *internal, *foreign])


def test_reset_to_earliest_rewinds_the_group_and_deletes_only_the_internal_topics(app: App, tmp_path: Path) -> None:
    assert app.committed() == dict.fromkeys(app.partitions(), RECORDS_PER_PARTITION)
    (tmp_path / app.application_id / "0_0").mkdir(parents=True)
    (tmp_path / "another-app").mkdir()

    result = app.reset("--input-topics", app.input_topic, "--to-earliest", "--state-dir", str(tmp_path))

    assert result.exit_code == 0, result.output
    assert app.committed() == dict.fromkeys(app.partitions(), 0)
    wait_for(lambda: not app.existing(app.internal), 30, "the internal topics to be deleted")
    assert app.existing(app.foreign) == set(app.foreign)
    assert app.existing([app.input_topic]) == {app.input_topic}
    assert not (tmp_path / app.application_id).exists()
    assert (tmp_path / "another-app").is_dir()


def test_reset_to_datetime_commits_the_first_offset_at_or_after_the_time(app: App) -> None:
    result = app.reset("--input-topics", app.input_topic, "--to-datetime", "2023-11-14T22:13:25Z")  # T0 + 5 s

    assert result.exit_code == 0, result.output
    assert app.committed() == dict.fromkeys(app.partitions(), 5)


def test_reset_to_offsets_commits_them_within_the_partition_range(app: App) -> None:
    result = app.reset(
        "--input-topics", app.input_topic, "--to-offsets", f"{app.input_topic}:0=3,{app.input_topic}:1=99"
    )

    assert result.exit_code == 0, result.output
    assert app.committed() == {app.partitions()[0]: 3, app.partitions()[1]: RECORDS_PER_PARTITION}


def test_dry_run_prints_the_plan_and_changes_nothing(app: App) -> None:
    result = app.reset("--input-topics", app.input_topic, "--dry-run")

    assert result.exit_code == 0, result.output
    assert all(f"    {topic}\n" in result.output for topic in app.internal)
    assert not any(topic in result.output for topic in app.foreign)
    assert app.committed() == dict.fromkeys(app.partitions(), RECORDS_PER_PARTITION)
    assert app.existing(app.internal) == set(app.internal)


def test_reset_of_a_group_with_a_live_member_is_refused_naming_it_and_changes_nothing(app: App, bootstrap: str) -> None:
    member = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": app.application_id,
            "client.id": "live-instance-StreamThread-1-consumer",
            "enable.auto.commit": False,
        }
    )
    member.subscribe([app.input_topic])
    try:
        wait_for(lambda: _joined(member), 60, "the member to join the group", interval_s=0)
        result = app.reset("--input-topics", app.input_topic)
    finally:
        member.close()

    assert result.exit_code == 1
    assert "live-instance-StreamThread-1-consumer" in result.output
    assert "active member" in result.output
    assert app.committed() == dict.fromkeys(app.partitions(), RECORDS_PER_PARTITION)
    assert app.existing(app.internal) == set(app.internal)


def _joined(member: Consumer) -> bool:
    member.poll(0.5)
    return bool(member.assignment())


def test_the_input_topics_come_from_the_topology_source_nodes(app: App, tmp_path: Path) -> None:
    topology = tmp_path / "topology.yaml"
    topology.write_text(
        "nodes:\n"
        f"  - {{name: in, type: source, topics: [{app.input_topic}]}}\n"
        f"  - {{name: out, type: sink, input: in, topic: {app.foreign[2]}}}\n"
    )

    result = app.reset("--topology", str(topology), "--dry-run")

    assert result.exit_code == 0, result.output
    assert f"2 partition(s) of {app.input_topic} to earliest" in result.output


def test_a_real_application_is_refused_while_running_and_recounts_from_scratch_after_a_reset(
    kafka: KafkaTestClient, bootstrap: str, workdir: Path, instances: list[StreamAppInstance]
) -> None:
    """The whole cycle with a running ``streamapp run``: the reset names its group member and changes nothing;
    after a stop and a reset (with the local state) the restarted application counts its input again from the
    start and arrives at the same counts, not at twice them (state and changelog were deleted with the offsets)."""
    application_id, source, output = unique("reset-run"), unique("reset-events"), unique("reset-counts")
    kafka.create_topics({source: 2, output: 2})
    events = color_events(0, 300)
    kafka.produce(source, events)
    expected = expected_color_counts(events)
    state_dir = workdir / "state"
    config = {
        "application.id": application_id,
        "bootstrap.servers": bootstrap,
        "num.stream.threads": 1,
        "commit.interval.ms": 200,
        "state.dir": str(state_dir),
    }
    topology = count_by_color_topology([source], output)
    internal = [f"{application_id}-by-color-repartition", f"{application_id}-counts-changelog"]
    admin = TopicAdmin({"bootstrap.servers": bootstrap})
    reset_args = ["reset", "--application-id", application_id, "--bootstrap-server", bootstrap]
    try:
        first = StreamAppInstance(workdir / "run1", topology, config)
        instances.append(first)
        first.start().wait_ready()
        wait_for(lambda: kafka.latest_longs(output) == expected, 90, f"counts {expected} in {output}", 1.0)

        refused = CliRunner().invoke(main, [*reset_args, "--topology", str(first.topology_file)])
        assert refused.exit_code == 1
        assert f"{application_id}-" in refused.output and "StreamThread-1-consumer" in refused.output
        assert set(admin.partition_counts(internal)) == set(internal)

        assert first.stop() == 0
        wait_for(lambda: not admin.describe_group(application_id).members, 60, "the group to be empty")
        output_records = sum(kafka.end_offsets(output).values())
        done = CliRunner().invoke(
            main, [*reset_args, "--topology", str(first.topology_file), "--state-dir", str(state_dir)]
        )
        assert done.exit_code == 0, done.output
        assert not (state_dir / application_id).exists()
        wait_for(lambda: not admin.partition_counts(internal), 30, "the internal topics to be deleted")

        second = StreamAppInstance(workdir / "run2", topology, config)
        instances.append(second)
        second.start().wait_ready()
        wait_for(
            lambda: sum(kafka.end_offsets(output).values()) > output_records and kafka.latest_longs(output) == expected,
            90,
            "the input counted again from the start",
            1.0,
        )
        assert second.stop() == 0
        assert kafka.latest_longs(output) == expected
    finally:
        admin.delete_topics([source, output, *internal])
