"""Restore progress per store: records restored, remaining, rate between two looks, estimated time left."""

from __future__ import annotations

from operator_fakes import TestingCluster, TestingInstances, TestingKafka, flights_spec
from streamapp_operator.conditions import RestoreView, RestoringTask
from streamapp_operator.reconcile import App, World, reconcile
from streamapp_operator.restore_progress import restore_progress, summary

STORES = {0: [], 1: ["departures-per-carrier-store"]}


def test_the_first_look_has_counts_and_no_rate_the_second_a_rate_and_time_left() -> None:
    first = restore_progress(
        RestoreView((RestoringTask("app-0", "1_0", remaining=9000, restored=1000),)),
        STORES,
        None,
        "2026-01-01T00:00:00Z",
    )
    assert first == [{"pod": "app-0", "task": "1_0", "stores": ["departures-per-carrier-store"], "restored": 1000,
                      "remaining": 9000, "ratePerSecond": None, "secondsLeft": None,
                      "observedAt": "2026-01-01T00:00:00Z"}]  # fmt: skip
    assert summary(first) == "1 task, 9000 left"
    second = restore_progress(
        RestoreView((RestoringTask("app-0", "1_0", remaining=5000, restored=5000),)),
        STORES,
        first,
        "2026-01-01T00:00:10Z",
    )
    assert second is not None
    assert (second[0]["ratePerSecond"], second[0]["secondsLeft"]) == (400.0, 12)
    assert summary(second) == "1 task, 5000 left, 400/s, ~12s"


def test_a_restarted_restore_or_another_pod_gives_no_rate_and_nothing_restoring_removes_the_field() -> None:
    previous = [{"pod": "app-0", "task": "1_0", "restored": 5000, "observedAt": "2026-01-01T00:00:00Z"}]
    again = restore_progress(
        RestoreView((RestoringTask("app-0", "1_0", 9000, 10),)), STORES, previous, "2026-01-01T00:00:10Z"
    )
    moved = restore_progress(
        RestoreView((RestoringTask("app-1", "1_0", 9000, 6000),)), STORES, previous, "2026-01-01T00:00:10Z"
    )
    assert again is not None and again[0]["ratePerSecond"] is None
    assert moved is not None and moved[0]["ratePerSecond"] is None
    assert restore_progress(RestoreView(()), STORES, previous, "2026-01-01T00:00:10Z") is None
    assert restore_progress(None, STORES, previous, "2026-01-01T00:00:10Z") is None
    assert summary(None) is None


def test_the_reconcile_reports_restore_progress_from_the_pods_status(
    cluster: TestingCluster, kafka: TestingKafka
) -> None:
    instances = TestingInstances()
    instances.documents["10.0.0.1"] = {"workers": [{"tasks": [
        {"task_id": "1_2", "state": "restoring", "restored_records": 300, "restore_remaining": 700}]}]}  # fmt: skip
    labels = {"app.kubernetes.io/name": "streamapp", "app.kubernetes.io/instance": "flights-per-carrier"}
    started = {"phase": "Running", "podIP": "10.0.0.1", "containerStatuses": [{"started": True}]}
    cluster.add_pod("apps", "flights-per-carrier-0", labels, started)
    world = World(cluster=cluster, kafka_for=lambda _: kafka, instances=instances)
    app = App(name="flights-per-carrier", namespace="apps", uid="uid-1", generation=1)
    status = reconcile(app, flights_spec(), {}, world, "2026-01-01T00:00:00Z").status
    assert [(e["pod"], e["task"], e["stores"], e["restored"], e["remaining"]) for e in status["restore"]] == [
        ("flights-per-carrier-0", "1_2", ["departures-per-carrier-store"], 300, 700)
    ]
    assert status["restoreProgress"] == "1 task, 700 left"
