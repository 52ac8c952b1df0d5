"""State volumes of scaled-away pods are kept warm for retainAfterScaleDown, then deleted; never someone else's."""

from __future__ import annotations

from typing import Any

import pytest
from operator_fakes import TestingCluster, TestingInstances, TestingKafka, flights_spec
from streamapp_operator.identity import foreign_claims
from streamapp_operator.streamapps.reconcile import App, World, cleanup, reconcile
from streamapp_operator.streamapps.volumes import (
    SCALED_DOWN_ANNOTATION,
    ClaimAction,
    ClaimRules,
    claim_name,
    claim_ordinals,
    parse_duration,
    plan_claims,
)

LABELS = {"app.kubernetes.io/name": "streamapp", "app.kubernetes.io/instance": "app"}


def _claim(name: str, *, marked: str | None = None, owner: str | None = None, **labels: str) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "uid": f"uid-{name}", "labels": {**LABELS, **labels}}
    if marked is not None:
        metadata["annotations"] = {SCALED_DOWN_ANNOTATION: marked}
    if owner is not None:
        metadata["ownerReferences"] = [{"uid": owner}]
    return {"metadata": metadata}


def _plan(claims: list[dict[str, Any]], replicas: int, now: str = "2026-01-01T01:00:00Z") -> list[ClaimAction]:
    return plan_claims(claims, ClaimRules("app", replicas, stateful_set_uid="sts", retain_seconds=3600), now).actions


def test_a_scaled_away_claim_is_marked_once_then_deleted_after_the_retention() -> None:
    claims = [_claim("state-app-0"), _claim("state-app-1"), _claim("state-app-2")]
    assert _plan(claims, 1) == [
        ClaimAction("mark", "state-app-1", "uid-state-app-1", "2026-01-01T01:00:00Z"),
        ClaimAction("mark", "state-app-2", "uid-state-app-2", "2026-01-01T01:00:00Z"),
    ]
    kept = [_claim("state-app-0"), _claim("state-app-1", marked="2026-01-01T00:30:00Z")]
    assert _plan(kept, 1) == []
    expired = [_claim("state-app-0"), _claim("state-app-1", marked="2026-01-01T00:00:00Z")]
    assert _plan(expired, 1, now="2026-01-01T01:00:01Z") == [ClaimAction("delete", "state-app-1", "uid-state-app-1")]


def test_a_scale_up_in_time_reuses_the_claim_and_unmarks_it() -> None:
    claims = [_claim("state-app-0"), _claim("state-app-1", marked="2026-01-01T00:30:00Z")]
    assert _plan(claims, 2) == [ClaimAction("unmark", "state-app-1", "uid-state-app-1")]


def test_claims_that_are_not_this_apps_are_never_touched() -> None:
    claims = [
        _claim("state-app-1", owner="someone-else"),  # owned by another object
        _claim("data-app-1"),  # another claim template
        _claim("state-app-other-1"),  # another app whose name starts alike
        _claim("state-app-x"),
    ]
    assert _plan(claims, 0) == []
    assert _plan([_claim("state-app-1", owner="sts")], 0)[0].action == "mark"  # the app's StatefulSet owns it


def test_retention_durations_are_go_style() -> None:
    assert parse_duration("1h") == 3600
    assert parse_duration("1h30m") == 5400
    assert parse_duration("45s") == 45
    for bad in ("", "1d", "h", "1h 30m", "-1h"):
        with pytest.raises(ValueError):
            parse_duration(bad)


def test_the_reconcile_marks_the_claims_a_scale_down_left_and_lists_them_in_status(
    cluster: TestingCluster, kafka: TestingKafka
) -> None:
    world = World(cluster=cluster, kafka_for=lambda _: kafka, instances=TestingInstances())
    app = App(name="flights-per-carrier", namespace="apps", uid="uid-1", generation=1)
    labels = {"app.kubernetes.io/name": "streamapp", "app.kubernetes.io/instance": "flights-per-carrier"}
    for i in range(3):
        claim = {"kind": "PersistentVolumeClaim", "metadata": {"name": f"state-flights-per-carrier-{i}",
                 "namespace": "apps", "uid": f"c{i}", "labels": labels}}  # fmt: skip
        cluster.add(claim)
    result = reconcile(app, flights_spec(replicas=1), {}, world, "2026-01-01T00:00:00Z")
    assert result.status["retainedVolumes"] == [
        {"name": "state-flights-per-carrier-1", "since": "2026-01-01T00:00:00Z"},
        {"name": "state-flights-per-carrier-2", "since": "2026-01-01T00:00:00Z"},
    ]
    later = flights_spec(replicas=1, state={"size": "1Gi", "retainAfterScaleDown": "30m"})
    result = reconcile(app, later, result.status, world, "2026-01-01T00:31:00Z")
    assert result.status["retainedVolumes"] is None
    assert [e.reason for e in result.events].count("StateVolumeDeleted") == 2
    assert cluster.get("PersistentVolumeClaim", "apps", "state-flights-per-carrier-0") is not None
    assert cluster.get("PersistentVolumeClaim", "apps", "state-flights-per-carrier-1") is None


# -- a state volume someone else owns (issue 19, D-H2) -----------------------------------------------------------


def test_a_state_claim_without_the_apps_labels_or_owned_by_anything_else_is_foreign_and_named() -> None:
    ours = _claim("state-app-0", owner="sts")
    unowned = _claim("state-app-1")
    theirs = {"metadata": {"name": "state-app-2", "labels": {"team": "x"}}}
    elsewhere = {"metadata": {"name": "state-app-3", "labels": LABELS,
                              "ownerReferences": [{"kind": "Deployment", "name": "db", "uid": "db-1"}]}}  # fmt: skip
    claims = {"state-app-0": ours, "state-app-1": unowned, "state-app-2": theirs, "state-app-3": elsewhere,
              "state-app-4": None}  # fmt: skip
    problems = foreign_claims(claims, LABELS, "sts")
    assert [p.reason for p in problems] == ["ForeignObject", "ForeignObject"]
    assert (
        "PersistentVolumeClaim state-app-2" in problems[0].message
        and "app.kubernetes.io/instance=app" in problems[0].message
    )
    assert "PersistentVolumeClaim state-app-3" in problems[1].message and "Deployment db" in problems[1].message
    assert all("neither mounted nor deleted" in p.message for p in problems)


def test_the_claims_checked_are_those_the_stateful_set_may_mount() -> None:
    assert claim_name("app", 2) == "state-app-2"
    assert claim_ordinals(2, None, None) == 2
    assert claim_ordinals(2, 5, None) == 5  # the autoscaler may scale up to maxReplicas
    assert claim_ordinals(2, None, {"spec": {"replicas": 3}}) == 3  # what it runs now


def _foreign_volume(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": "apps", "uid": "team-x-volume", "labels": {"team": "x"}},
            "spec": {"accessModes": ["ReadWriteOnce"]}}  # fmt: skip


def test_a_foreign_state_volume_is_named_before_the_stateful_set_is_applied_and_never_mounted_nor_deleted(
    cluster: TestingCluster, kafka: TestingKafka
) -> None:
    """Audit #29: a pre-existing ``state-<app>-0`` of another team was mounted into the app's pod and, with
    ``cleanupPolicy: Delete``, deleted with the StreamApp."""
    world = World(cluster=cluster, kafka_for=lambda _: kafka, instances=TestingInstances())
    app = App(name="pvcvictim", namespace="apps", uid="uid-1", generation=1)
    volume = _foreign_volume("state-pvcvictim-0")
    cluster.add(volume)
    spec = flights_spec(replicas=1, cleanupPolicy="Delete")
    result = reconcile(app, spec, {}, world, "2026-01-01T00:00:00Z")
    degraded = next(c for c in result.status["conditions"] if c["type"] == "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "ForeignObject")
    assert "PersistentVolumeClaim state-pvcvictim-0" in degraded["message"] and "team" not in str(cluster.applied)
    assert cluster.get("StatefulSet", "apps", "pvcvictim") is None  # nothing would mount it
    cleanup(app, spec, result.status, world)
    assert cluster.get("PersistentVolumeClaim", "apps", "state-pvcvictim-0") == volume


def test_a_foreign_claim_of_an_ordinal_a_scale_up_would_mount_stops_the_scale_up(
    cluster: TestingCluster, kafka: TestingKafka
) -> None:
    world = World(cluster=cluster, kafka_for=lambda _: kafka, instances=TestingInstances())
    app = App(name="pvcvictim", namespace="apps", uid="uid-1", generation=1)
    first = reconcile(app, flights_spec(replicas=1), {}, world, "2026-01-01T00:00:00Z")
    assert cluster.get("StatefulSet", "apps", "pvcvictim")["spec"]["replicas"] == 1  # type: ignore[index]
    cluster.add(_foreign_volume("state-pvcvictim-1"))
    result = reconcile(app, flights_spec(replicas=2), first.status, world, "2026-01-01T00:01:00Z")
    degraded = next(c for c in result.status["conditions"] if c["type"] == "Degraded")
    assert degraded["reason"] == "ForeignObject" and "state-pvcvictim-1" in degraded["message"]
    assert cluster.get("StatefulSet", "apps", "pvcvictim")["spec"]["replicas"] == 1  # type: ignore[index]


def test_a_foreign_claim_above_the_replicas_is_never_marked_nor_deleted_by_the_retention(
    cluster: TestingCluster, kafka: TestingKafka
) -> None:
    world = World(cluster=cluster, kafka_for=lambda _: kafka, instances=TestingInstances())
    app = App(name="pvcvictim", namespace="apps", uid="uid-1", generation=1)
    volume = _foreign_volume("state-pvcvictim-3")
    cluster.add(volume)
    spec = flights_spec(replicas=1, state={"size": "1Gi", "retainAfterScaleDown": "1s"})
    status = reconcile(app, spec, {}, world, "2026-01-01T00:00:00Z").status
    reconcile(app, spec, status, world, "2026-01-02T00:00:00Z")
    assert cluster.get("PersistentVolumeClaim", "apps", "state-pvcvictim-3") == volume
