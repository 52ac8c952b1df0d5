"""Standby replicas on the real broker: a standby task keeps a warm copy of a store on another instance, so when
the active instance dies the new owner restores only the changelog tail (docs/adr/0004-standby-replicas.md).

Two instances with one stream thread each, ``num.standby.replicas: 1``, the colour count over 4 partitions.
The classic protocol with a 6 s session timeout makes the dead instance's partitions move quickly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from streamapp_harness import (
    KafkaTestClient,
    StreamAppInstance,
    color_events,
    count_by_color_topology,
    expected_color_counts,
    two_instances,
    unique,
    wait_for,
)

pytestmark = pytest.mark.integration

PARTITIONS = 4


def _tasks(instance: StreamAppInstance, prefix: str = "1_") -> dict[str, dict[str, Any]]:
    return {
        t["task_id"]: t for w in instance.status()["workers"] for t in w["tasks"] if t["task_id"].startswith(prefix)
    }


def _standbys(instance: StreamAppInstance) -> dict[str, dict[str, int]]:
    standbys: dict[str, dict[str, int]] = {}
    for worker in instance.status()["workers"]:
        standbys.update(worker.get("standby_tasks") or {})
    return standbys


def test_restore_after_failover_to_a_standby_replays_only_the_tail(
    kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance]
) -> None:
    app, source, output = unique("standby"), unique("events"), unique("counts")
    changelog = f"{app}-counts-changelog"
    kafka.create_topics({source: PARTITIONS, output: PARTITIONS})
    topology = count_by_color_topology([source], output)
    a, b = two_instances(kafka, workdir, app, topology)
    instances.extend([a.start(), b.start()])
    a.wait_ready()
    b.wait_ready()
    first = color_events(0, 8000, colors=500)
    kafka.produce(source, first)
    wait_for(lambda: kafka.latest_longs(output) == expected_color_counts(first), 90, "the first counts", 1.0)
    wait_for(lambda: _tasks(a) and _tasks(b), 60, "both instances to own count tasks")
    owned_by_a = set(_tasks(a))

    def b_standbys_caught_up() -> bool:
        standbys = _standbys(b)
        ends = kafka.end_offsets(changelog)
        return set(standbys) == owned_by_a and all(
            offset >= ends[int(tp.rsplit("-", 1)[1])] for offsets in standbys.values() for tp, offset in offsets.items()
        )

    wait_for(b_standbys_caught_up, 60, f"b's standbys of {sorted(owned_by_a)} to reach the changelog end", 1.0)
    assert not set(_standbys(b)) & set(_tasks(b)), "a standby never runs where its task is active"
    assert b.metric("streamapp_standby_records_total") > 0, "b's standbys applied changelog records"
    records_of_a = sum(kafka.end_offsets(changelog)[int(t.split("_")[1])] for t in owned_by_a)
    assert records_of_a > 0

    a.kill()
    wait_for(lambda: set(_tasks(b)) >= owned_by_a and b.ready(), 90, "b to take over a's tasks", 1.0)
    taken_over = _tasks(b)
    restored = {t: taken_over[t]["restored_records"] for t in owned_by_a}
    assert restored == dict.fromkeys(owned_by_a, 0), f"only the tail (nothing) is restored, not {records_of_a} records"

    second = color_events(8000, 2000, colors=500)
    kafka.produce(source, second)
    wait_for(lambda: kafka.latest_longs(output) == expected_color_counts(first + second), 90, "exact counts", 1.0)
    taken = sorted(owned_by_a)
    print(f"standby failover: {taken} taken over, restored {restored}, {records_of_a} records in their changelogs")
    assert b.stop() == 0


def test_an_instance_losing_tasks_to_a_joining_instance_keeps_their_open_stores_as_standbys(
    kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance]
) -> None:
    """Kafka Streams recycles a ``StreamTask`` it loses into a ``StandbyTask`` on the same ``ProcessorStateManager``
    (``TaskManager`` with ``ProcessorStateManager#transitionTaskType``): the tasks ``b`` takes from ``a`` stay open on
    ``a`` as standbys (never closed and opened again), and when ``b`` dies ``a`` takes them back restoring nothing."""
    app, source, output = unique("recycle"), unique("events"), unique("counts")
    kafka.create_topics({source: PARTITIONS, output: PARTITIONS})
    topology = count_by_color_topology([source], output)
    a, b = two_instances(kafka, workdir, app, topology)
    instances.append(a.start())
    a.wait_ready()
    first = color_events(0, 8000, colors=500)
    kafka.produce(source, first)
    wait_for(lambda: kafka.latest_longs(output) == expected_color_counts(first), 90, "the first counts", 1.0)
    wait_for(lambda: len(_tasks(a)) == PARTITIONS, 60, "a to own every count task")

    instances.append(b.start())
    b.wait_ready()
    wait_for(lambda: _tasks(a) and _tasks(b), 90, "b to take some count tasks from a")
    moved = set(_tasks(b))
    wait_for(lambda: set(_standbys(a)) == moved, 60, f"a to hold standbys of {sorted(moved)}", 1.0)

    log = a.log_file.read_text(errors="replace")
    for task in sorted(moved):
        assert f"Standby task {task} recycled from the active task" in log, f"{task}'s state moved to a standby"
        assert f"Created standby task {task}" not in log, f"{task}'s stores were reopened for the standby"

    second = color_events(8000, 2000, colors=500)
    kafka.produce(source, second)
    wait_for(lambda: kafka.latest_longs(output) == expected_color_counts(first + second), 90, "the counts", 1.0)
    b.kill()
    wait_for(lambda: set(_tasks(a)) >= moved and a.ready(), 90, "a to take its tasks back", 1.0)
    back = _tasks(a)
    wait_for(lambda: set(_standbys(a)).isdisjoint(moved), 30, "a's standbys to become active")
    restored = {t: _tasks(a)[t]["restored_records"] for t in moved}
    assert restored == dict.fromkeys(moved, 0), f"the standbys followed b's changelog: nothing to restore ({back})"
    third = color_events(10_000, 1000, colors=500)
    kafka.produce(source, third)
    everything = first + second + third
    wait_for(lambda: kafka.latest_longs(output) == expected_color_counts(everything), 90, "exact counts", 1.0)
    assert a.stop() == 0
