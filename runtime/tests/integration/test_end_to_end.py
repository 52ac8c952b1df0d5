"""End to end on the real broker: exact counts with two stream threads, and a killed worker restarted."""

from __future__ import annotations

import os
import signal
import time
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

PARTITIONS = 4


def app_config(kafka: KafkaTestClient, workdir: Path, app: str) -> dict[str, object]:
    return {
        "application.id": app,
        "bootstrap.servers": kafka.bootstrap,
        "num.stream.threads": 2,
        "commit.interval.ms": 200,
        "state.dir": str(workdir / "state"),
    }


def test_end_to_end_count_with_two_threads_is_exact(
    kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance]
) -> None:
    app, source, output = unique("e2e"), unique("events"), unique("counts")
    kafka.create_topics({source: PARTITIONS, output: PARTITIONS})
    events = color_events(0, 5000, colors=13)
    kafka.produce(source, events[:2500])
    instance = StreamAppInstance(workdir, count_by_color_topology([source], output), app_config(kafka, workdir, app))
    instances.append(instance.start())
    instance.wait_ready()
    kafka.produce(source, events[2500:])
    expected = expected_color_counts(events)
    wait_for(lambda: kafka.latest_longs(output) == expected, 120, "exact counts", 1.0)
    status = instance.status()
    assert status["ready"] and len(status["workers"]) == 2
    assert {t["task_id"] for w in status["workers"] for t in w["tasks"]} == {
        f"{s}_{p}" for s in (0, 1) for p in range(PARTITIONS)
    }
    wait_for(lambda: instance.metric("streamapp_consumer_lag_records") == 0, 30, "zero consumer lag")
    # Threads report about once a second, and a position (hence lag) runs ahead of processing by the fetched
    # batch: the counter reaches its total a report later. It must then stay exactly there (no double count).
    processed_total = len(events) + sum(expected.values())
    wait_for(lambda: instance.metric("streamapp_records_processed_total") >= processed_total, 30, "all processed")
    assert instance.metric("streamapp_records_processed_total") == processed_total
    assert instance.stop() == 0


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_killed_worker_is_restarted_and_counts_continue_exactly(
    kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance], protocol: str
) -> None:
    app, source, output = unique("kill"), unique("events"), unique("counts")
    kafka.create_topics({source: PARTITIONS, output: PARTITIONS})
    topology = count_by_color_topology([source], output)
    config = {**app_config(kafka, workdir, app), "group.protocol": protocol}
    instance = StreamAppInstance(workdir, topology, config, instance_id=f"{app}-0")
    instances.append(instance.start())
    instance.wait_ready()
    first = color_events(0, 2000)
    kafka.produce(source, first)
    wait_for(lambda: kafka.latest_longs(output) == expected_color_counts(first), 90, "first counts", 1.0)
    time.sleep(1.0)  # let the next commit interval pass: the killed worker has nothing uncommitted

    victim = instance.status()["workers"][0]
    os.kill(int(victim["pid"]), signal.SIGKILL)
    wait_for(lambda: instance.status()["workers"][0]["restarts"] == 1, 30, "the supervisor to restart the worker")
    second = color_events(2000, 1000)
    kafka.produce(source, second)
    # with static membership the broker keeps the killed member's partitions: the classic protocol hands
    # them to the restarted worker at once, KIP-848 only after the dead member's session timed out (45 s);
    # either way no record is lost and none is counted twice
    wait_for(
        lambda: kafka.latest_longs(output) == expected_color_counts(first + second), 180, "counts after restart", 2.0
    )
    instance.wait_ready(120)
    assert instance.stop() == 0


def test_workers_stop_when_their_supervisor_is_killed(
    kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance]
) -> None:
    app, source, output = unique("orphan"), unique("events"), unique("counts")
    kafka.create_topics({source: PARTITIONS, output: PARTITIONS})
    instance = StreamAppInstance(workdir, count_by_color_topology([source], output), app_config(kafka, workdir, app))
    instances.append(instance.start())
    instance.wait_ready()
    workers = instance.worker_pids()
    assert len(workers) == 2
    assert instance.process is not None
    os.kill(instance.process.pid, signal.SIGKILL)
    instance.process.wait(10)

    def gone(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return Path(f"/proc/{pid}/status").read_text().find("State:\tZ") >= 0

    wait_for(lambda: all(gone(pid) for pid in workers), 30, "orphaned workers to stop")


def test_instance_is_not_ready_until_its_external_topics_exist(
    kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance]
) -> None:
    app, source, output = unique("wait"), unique("events"), unique("counts")
    kafka.create_topics({source: PARTITIONS})
    instance = StreamAppInstance(workdir, count_by_color_topology([source], output), app_config(kafka, workdir, app))
    instances.append(instance.start())
    wait_for(lambda: instance.get("/healthz")[0] == 200, 30, "the instance to serve HTTP")
    time.sleep(2)
    code, reason = instance.get("/readyz")
    assert code == 503
    assert reason.startswith(f"INCOMPLETE_SOURCE_TOPIC_METADATA: sink topics missing: {output}"), reason
    assert f"{app}-counts-changelog" not in kafka.end_offsets_of_existing([f"{app}-counts-changelog"])
    kafka.create_topics({output: PARTITIONS})
    instance.wait_ready(60)
    events = color_events(0, 100)
    kafka.produce(source, events)
    wait_for(lambda: kafka.latest_longs(output) == expected_color_counts(events), 60, "counts", 1.0)
    assert instance.stop() == 0
