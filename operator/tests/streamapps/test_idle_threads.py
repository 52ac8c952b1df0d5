"""More stream threads than tasks is reported (ScalingLimited=True, IdleThreads) with one Warning event."""

from __future__ import annotations

from typing import Any

from operator_fakes import TestingCluster, TestingInstances, TestingKafka, flights_spec
from streamapp_operator.streamapps.conditions import Capacity
from streamapp_operator.streamapps.reconcile import App, World, reconcile

APP = App(name="flights-per-carrier", namespace="apps", uid="uid-1", generation=1)


def _scaling(status: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == "ScalingLimited")


def test_replicas_times_threads_above_the_task_count_is_idle_threads_with_one_event(
    cluster: TestingCluster, kafka: TestingKafka
) -> None:
    world = World(cluster=cluster, kafka_for=lambda _: kafka, instances=TestingInstances())
    within = reconcile(APP, flights_spec(replicas=2, threads=4), {}, world, "2026-01-01T00:00:00Z")
    condition = _scaling(within.status)
    assert (condition["status"], condition["reason"]) == ("False", "WithinTaskCount")
    assert condition["message"] == "2 replicas x 4 threads = 8 stream threads for 8 tasks"
    over = reconcile(APP, flights_spec(replicas=3, threads=4), within.status, world, "2026-01-01T00:00:10Z")
    condition = _scaling(over.status)
    assert (condition["status"], condition["reason"]) == ("True", "IdleThreads")
    assert condition["message"] == (
        "3 replicas x 4 threads = 12 stream threads for 8 tasks: 4 stream threads idle; scale in or add partitions"
    )
    assert [(e.type, e.reason) for e in over.events if e.reason == "IdleThreads"] == [("Warning", "IdleThreads")]
    again = reconcile(APP, flights_spec(replicas=3, threads=4), over.status, world, "2026-01-01T00:00:20Z")
    assert not [e for e in again.events if e.reason == "IdleThreads"]  # once per change, not per reconcile


def test_idle_threads_count_never_goes_negative() -> None:
    assert Capacity(replicas=1, threads=1, tasks=8).idle == 0
    assert Capacity(replicas=3, threads=2, tasks=4).idle == 2
