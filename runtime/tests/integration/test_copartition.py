"""Co-partitioning with several worker processes in one consumer group, on the real broker.

A task ``<subtopology>_<p>`` needs partition ``p`` of *every* topic its sub-topology reads. librdkafka has
no pluggable assignor, so this rests on the group protocol's ``range`` assignor (docs/adr/0001): these
tests prove it for both protocols, from the assignment each worker reports and from the results (a
count over two topics is exact only if one task owns partition p of both).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest
from streamapp_harness import (
    KafkaTestClient,
    StreamAppInstance,
    count_by_color_topology,
    count_by_key_topology,
    unique,
    wait_for,
)

pytestmark = pytest.mark.integration

PARTITIONS = 6


def copartitioned_app(
    kafka: KafkaTestClient, workdir: Path, protocol: str, threads: int
) -> tuple[StreamAppInstance, list[str], str]:
    app, left, right, output = unique("copart"), unique("left"), unique("right"), unique("out")
    kafka.create_topics({left: PARTITIONS, right: PARTITIONS, output: PARTITIONS})
    config = {
        "application.id": app,
        "bootstrap.servers": kafka.bootstrap,
        "num.stream.threads": threads,
        "commit.interval.ms": 200,
        "state.dir": str(workdir / "state"),
        "group.protocol": protocol,
    }
    instance = StreamAppInstance(workdir, count_by_color_topology([left, right], output), config, instance_id="pod-0")
    return instance, [left, right], output


def reported_tasks(instance: StreamAppInstance) -> list[tuple[str, int, set[str]]]:
    """(task id, thread, input partitions) for every task every worker reports."""
    return [
        (task["task_id"], worker["thread"], set(task["partitions"]))
        for worker in instance.status()["workers"]
        for task in worker.get("tasks", [])
    ]


def assignment(instance: StreamAppInstance) -> dict[str, tuple[int, set[str]]]:
    """task id -> (thread, input partitions); a task reported by two threads fails."""
    owners: dict[str, tuple[int, set[str]]] = {}
    for task, thread, partitions in reported_tasks(instance):
        assert task not in owners, f"task {task} is owned by two stream threads"
        owners[task] = (thread, partitions)
    return owners


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_copartition_each_task_gets_partition_p_of_every_copartitioned_topic(
    kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance], protocol: str
) -> None:
    instance, (left, right), _ = copartitioned_app(kafka, workdir, protocol, threads=3)
    instances.append(instance.start())
    instance.wait_ready()
    repartition = f"{instance.status()['application_id']}-by-color-repartition"

    def spread_over_all_threads() -> bool:
        # reports are about a second apart, so a task moving between threads may show up twice until
        # the group settles
        reported = reported_tasks(instance)
        return len(reported) == 2 * PARTITIONS == len({t for t, _, _ in reported}) and (
            len({thread for _, thread, _ in reported}) == 3
        )

    wait_for(lambda: instance.ready() and spread_over_all_threads(), 90, "tasks spread over the 3 threads")
    owners = assignment(instance)
    for p in range(PARTITIONS):
        assert owners[f"0_{p}"][1] == {f"{left}-{p}", f"{right}-{p}"}
        assert owners[f"1_{p}"][1] == {f"{repartition}-{p}"}
    threads_of = defaultdict(set)
    for task, (thread, _) in owners.items():
        threads_of[thread].add(task)
    assert all(len(tasks) == 4 for tasks in threads_of.values()), threads_of
    assert instance.stop() == 0


def test_copartition_counts_over_two_topics_are_exact_across_instances_and_threads(
    kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance]
) -> None:
    app, left, right, output = unique("copart"), unique("left"), unique("right"), unique("out")
    kafka.create_topics({left: PARTITIONS, right: PARTITIONS, output: PARTITIONS})
    topology = count_by_key_topology([left, right], output)
    for pod in range(2):
        config = {
            "application.id": app,
            "bootstrap.servers": kafka.bootstrap,
            "num.stream.threads": 2,
            "commit.interval.ms": 200,
            "state.dir": str(workdir / f"pod-{pod}" / "state"),
        }
        instances.append(StreamAppInstance(workdir / f"pod-{pod}", topology, config, f"{app}-{pod}").start())
    for instance in instances:
        instance.wait_ready()
    # every key is written to both topics: only a task owning partition p of both sees all its records
    keys = [f"key-{i}" for i in range(60)]
    for round_ in range(5):
        kafka.produce(left, [(k, {"n": round_}) for k in keys])
        kafka.produce(right, [(k, {"n": round_}) for k in keys])
    expected = {k: 10 for k in keys}
    wait_for(lambda: kafka.latest_longs(output) == expected, 90, "every key counted 10 times", 1.0)

    def one_owner_per_task() -> bool:
        tasks = [task for instance in instances for task, _, _ in reported_tasks(instance)]
        return sorted(tasks) == [f"0_{p}" for p in range(PARTITIONS)]

    wait_for(one_owner_per_task, 30, "each task owned by exactly one of the 4 stream threads")
    for instance in instances:
        assert instance.stop() == 0
