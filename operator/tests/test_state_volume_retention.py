"""State volumes of scaled-away pods are kept warm for retainAfterScaleDown, then deleted; never someone else's."""

from __future__ import annotations

from typing import Any

import pytest
from operator_fakes import TestingCluster, TestingInstances, TestingKafka, flights_spec
from streamapp_operator.reconcile import App, World, reconcile
from streamapp_operator.volumes import SCALED_DOWN_ANNOTATION, ClaimAction, parse_duration, plan_claims

LABELS = {"app.kubernetes.io/name": "streamapp", "app.kubernetes.io/instance": "app"}


def _claim(name: str, *, marked: str | None = None, owner: str | None = None, **labels: str) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "uid": f"uid-{name}", "labels": {**LABELS, **labels}}
    if marked is not None:
        metadata["annotations"] = {SCALED_DOWN_ANNOTATION: marked}
    if owner is not None:
        metadata["ownerReferences"] = [{"uid": owner}]
    return {"metadata": metadata}


def _plan(claims: list[dict[str, Any]], replicas: int, now: str = "2026-01-01T01:00:00Z") -> list[ClaimAction]:
    return plan_claims(
        claims, app="app", replicas=replicas, stateful_set_uid="sts", retain_seconds=3600, now=now
    ).actions


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
