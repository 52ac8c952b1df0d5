"""A PodDisruptionBudget keeps a node drain from evicting several stream-thread pods at once (each eviction
moves tasks that restore their state elsewhere), and never blocks every eviction.

Pure decisions (``desired.disruption_budget``, the spec model) and the reconcile step against the
hand-written ``TestingCluster``; ``test_operator_on_api_server`` checks the same on the real API server.
"""

from __future__ import annotations

from typing import Any

import pytest
from operator_fakes import TestingCluster, TestingInstances, TestingKafka, flights_spec
from pydantic import ValidationError
from streamapp_operator.kinds import Owner
from streamapp_operator.streamapps import desired
from streamapp_operator.streamapps.reconcile import App, Result, World, reconcile
from streamapp_operator.streamapps.resources import StreamAppSpec
from streamapp_operator.streamapps.validate import SPEC_INVALID, parse_spec

OWNER = Owner("StreamApp", name="flights-per-carrier", namespace="apps", uid="uid-1")
APP = App(name="flights-per-carrier", namespace="apps", uid="uid-1", generation=1)
NOW = "2026-01-01T00:00:00Z"


def _budget(replicas: int = 3, **budget: Any) -> desired.DisruptionBudget:
    spec = flights_spec(replicas=replicas)
    if budget:
        spec["disruptionBudget"] = budget
    return desired.disruption_budget(OWNER, StreamAppSpec.parse(spec))


def _run(cluster: TestingCluster, kafka: TestingKafka, status: dict[str, Any] | None = None, **spec: Any) -> Result:
    world = World(cluster=cluster, kafka_for=lambda servers: kafka, instances=TestingInstances())
    return reconcile(APP, flights_spec(**spec), status or {}, world, NOW)


def _pdb(cluster: TestingCluster) -> dict[str, Any] | None:
    return cluster.get("PodDisruptionBudget", "apps", "flights-per-carrier")


def test_default_budget_lets_one_pod_go_at_a_time_and_selects_exactly_the_statefulset_pods() -> None:
    budget = _budget()
    assert budget.manifest is not None
    assert (budget.summary, budget.blocking) == ("maxUnavailable=1", False)
    assert budget.manifest["apiVersion"] == "policy/v1"
    assert budget.manifest["metadata"]["name"] == "flights-per-carrier"
    assert budget.manifest["spec"] == {
        "maxUnavailable": 1,
        "selector": {"matchLabels": {"app.kubernetes.io/name": "streamapp", "app.kubernetes.io/instance": OWNER.name}},
        "unhealthyPodEvictionPolicy": "AlwaysAllow",
    }
    sts = desired.stateful_set(OWNER, StreamAppSpec.parse(flights_spec(replicas=3)), "abc")
    assert budget.manifest["spec"]["selector"] == sts["spec"]["selector"]
    assert budget.manifest["metadata"]["ownerReferences"] == [OWNER.reference()]


def test_configured_bound_is_used_as_given() -> None:
    assert _budget(maxUnavailable=2).manifest["spec"]["maxUnavailable"] == 2  # type: ignore[index]
    minimum = _budget(minAvailable=2).manifest
    assert minimum is not None
    assert minimum["spec"]["minAvailable"] == 2
    assert "maxUnavailable" not in minimum["spec"]


def test_a_single_replica_keeps_the_default_budget_so_a_drain_can_still_evict_it() -> None:
    budget = _budget(replicas=1)
    assert budget.manifest is not None and budget.manifest["spec"]["maxUnavailable"] == 1


@pytest.mark.parametrize(("replicas", "min_available"), [(1, 1), (2, 2), (2, 3)])
def test_no_budget_when_min_available_would_block_every_eviction(replicas: int, min_available: int) -> None:
    budget = _budget(replicas=replicas, minAvailable=min_available)
    assert budget.manifest is None and budget.blocking
    assert budget.summary == (
        f"none: minAvailable {min_available} with {replicas} replicas would block every voluntary eviction"
    )


def test_no_budget_when_disabled_or_scaled_to_zero() -> None:
    assert _budget(enabled=False).manifest is None
    assert _budget(enabled=False).summary == "none: spec.disruptionBudget.enabled is false"
    zero = _budget(replicas=0)
    assert (zero.manifest, zero.summary, zero.blocking) == (None, "none: no replicas", False)


@pytest.mark.parametrize(
    ("budget", "message"),
    [
        ({"maxUnavailable": 0}, "disruptionBudget.maxUnavailable: Input should be greater than or equal to 1"),
        ({"minAvailable": 0}, "disruptionBudget.minAvailable: Input should be greater than or equal to 1"),
        ({"maxUnavailable": 1, "minAvailable": 1}, "set either maxUnavailable or minAvailable, not both"),
        ({"maxUnavailable": "50%"}, "disruptionBudget.maxUnavailable: Input should be a valid integer"),
    ],
)
def test_invalid_budget_is_a_spec_problem_naming_the_field(budget: dict[str, Any], message: str) -> None:
    spec, problems = parse_spec(flights_spec(disruptionBudget=budget))
    assert spec is None
    (problem,) = problems
    assert problem.reason == SPEC_INVALID
    assert message in problem.message, problem.message
    with pytest.raises(ValidationError):
        StreamAppSpec.parse(flights_spec(disruptionBudget=budget))


def test_reconcile_creates_updates_and_deletes_the_budget_with_the_spec(
    cluster: TestingCluster, kafka: TestingKafka
) -> None:
    status = _run(cluster, kafka).status
    created = _pdb(cluster)
    assert created is not None and created["spec"]["maxUnavailable"] == 1
    assert status["disruptionBudget"] == "maxUnavailable=1"

    result = _run(cluster, kafka, status, disruptionBudget={"minAvailable": 1})
    updated = _pdb(cluster)
    assert updated is not None and updated["metadata"]["uid"] == created["metadata"]["uid"]
    assert updated["spec"]["minAvailable"] == 1 and "maxUnavailable" not in updated["spec"]
    assert ("Updated", "Updated PodDisruptionBudget flights-per-carrier") in [
        (e.reason, e.message) for e in result.events
    ]

    result = _run(cluster, kafka, result.status, disruptionBudget={"enabled": False})
    assert _pdb(cluster) is None
    assert [e.message for e in result.events if e.reason == "Deleted"] == [
        "Deleted PodDisruptionBudget flights-per-carrier (none: spec.disruptionBudget.enabled is false)"
    ]
    assert result.status["disruptionBudget"] == "none: spec.disruptionBudget.enabled is false"
    again = _run(cluster, kafka, result.status, disruptionBudget={"enabled": False})
    assert [e for e in again.events if e.reason == "Deleted"] == []


def test_scaling_below_min_available_removes_the_budget_and_warns_once(
    cluster: TestingCluster, kafka: TestingKafka
) -> None:
    status = _run(cluster, kafka, replicas=3, disruptionBudget={"minAvailable": 2}).status
    assert _pdb(cluster) is not None
    first = _run(cluster, kafka, status, replicas=2, disruptionBudget={"minAvailable": 2})
    assert _pdb(cluster) is None
    warnings = [(e.type, e.reason, e.message) for e in first.events if e.reason == "DisruptionBudgetSkipped"]
    assert warnings == [
        ("Warning", "DisruptionBudgetSkipped",
         "No PodDisruptionBudget: minAvailable 2 with 2 replicas would block every voluntary eviction"),
    ]  # fmt: skip
    second = _run(cluster, kafka, first.status, replicas=2, disruptionBudget={"minAvailable": 2})
    assert [e for e in second.events if e.reason == "DisruptionBudgetSkipped"] == []
    _run(cluster, kafka, second.status, replicas=3, disruptionBudget={"minAvailable": 2})
    assert _pdb(cluster) is not None


def test_a_budget_of_the_same_name_not_owned_by_the_streamapp_is_never_deleted(
    cluster: TestingCluster, kafka: TestingKafka
) -> None:
    foreign = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "flights-per-carrier", "namespace": "apps"},
        "spec": {"maxUnavailable": 3},
    }
    cluster.apply(foreign)
    _run(cluster, kafka, disruptionBudget={"enabled": False})
    assert _pdb(cluster) is not None


def _foreign(name: str, selector: dict[str, Any] | None, owner_uid: str | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": "apps"}
    if owner_uid is not None:
        metadata["ownerReferences"] = [{"kind": "StreamApp", "name": OWNER.name, "uid": owner_uid}]
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": metadata,
            "spec": {"maxUnavailable": 1, "selector": selector}}  # fmt: skip


def _decide(*existing: dict[str, Any], pod_labels: tuple[dict[str, str], ...] = ()) -> desired.DisruptionBudget:
    return desired.disruption_budget(OWNER, StreamAppSpec.parse(flights_spec(replicas=3)), existing, pod_labels)


def test_a_same_name_budget_we_do_not_own_is_never_applied_over() -> None:
    decision = _decide(_foreign(OWNER.name, {"matchLabels": {"team": "x"}}))
    assert (decision.manifest, decision.foreign, decision.blocking) == (None, True, False)
    assert decision.summary == f"none: PodDisruptionBudget {OWNER.name} exists and is not owned by this StreamApp"


def test_our_own_budget_is_not_in_the_way() -> None:
    ours = _foreign(OWNER.name, {"matchLabels": desired.selector_labels(OWNER.name)}, owner_uid=OWNER.uid)
    decision = _decide(ours)
    assert decision.manifest is not None and not decision.foreign


@pytest.mark.parametrize(
    "selector",
    [
        {"matchLabels": {"app.kubernetes.io/name": "streamapp"}},  # every StreamApp of the namespace
        {},  # policy/v1: an empty selector selects every pod of the namespace
        {"matchExpressions": [{"key": "app.kubernetes.io/instance", "operator": "In", "values": [OWNER.name]}]},
        {"matchExpressions": [{"key": "app.kubernetes.io/instance", "operator": "Exists"}]},
        {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["web"]}]},
        {"matchLabels": {"statefulset.kubernetes.io/pod-name": f"{OWNER.name}-1"}},  # one running pod
    ],
    ids=["name-label", "empty", "in", "exists", "not-in", "running-pod-label"],
)
def test_no_budget_when_someone_elses_already_covers_the_pods(selector: dict[str, Any]) -> None:
    running = {**desired.labels(OWNER.name), "statefulset.kubernetes.io/pod-name": f"{OWNER.name}-1"}
    decision = _decide(_foreign("team-pdb", selector), pod_labels=(running,))
    assert (decision.manifest, decision.foreign) == (None, True)
    assert decision.summary == "none: PodDisruptionBudget team-pdb already covers the pods"


@pytest.mark.parametrize(
    "selector",
    [
        None,  # a null selector selects nothing
        {"matchLabels": {"app.kubernetes.io/instance": "other-app"}},
        {"matchExpressions": [{"key": "app.kubernetes.io/instance", "operator": "NotIn", "values": [OWNER.name]}]},
        {"matchExpressions": [{"key": "app.kubernetes.io/name", "operator": "DoesNotExist"}]},
    ],
    ids=["null", "other-app", "not-in-us", "does-not-exist"],
)
def test_budgets_over_other_pods_do_not_keep_ours_out(selector: dict[str, Any] | None) -> None:
    decision = _decide(_foreign("other", selector))
    assert decision.manifest is not None and decision.summary == "maxUnavailable=1"


def test_reconcile_never_takes_over_a_same_name_budget_and_warns_once(
    cluster: TestingCluster, kafka: TestingKafka
) -> None:
    cluster.apply(_foreign("flights-per-carrier", {"matchLabels": {"team": "x"}}))
    first = _run(cluster, kafka)
    stored = _pdb(cluster)
    assert stored is not None and stored["spec"]["selector"] == {"matchLabels": {"team": "x"}}
    assert [a["kind"] for a in cluster.applied].count("PodDisruptionBudget") == 1  # only the test's own apply
    summary = "none: PodDisruptionBudget flights-per-carrier exists and is not owned by this StreamApp"
    assert first.status["disruptionBudget"] == summary
    assert [(e.type, e.message) for e in first.events if e.reason == "DisruptionBudgetSkipped"] == [
        ("Warning", "No PodDisruptionBudget: " + summary.removeprefix("none: "))
    ]
    second = _run(cluster, kafka, first.status)
    assert [e for e in second.events if e.reason == "DisruptionBudgetSkipped"] == []


def test_reconcile_deletes_its_budget_when_another_comes_to_cover_the_pods(
    cluster: TestingCluster, kafka: TestingKafka
) -> None:
    status = _run(cluster, kafka).status
    assert _pdb(cluster) is not None
    cluster.apply(_foreign("team-pdb", {"matchLabels": {"app.kubernetes.io/name": "streamapp"}}))
    result = _run(cluster, kafka, status)
    assert _pdb(cluster) is None, "two budgets over one pod make it impossible to evict"
    assert result.status["disruptionBudget"] == "none: PodDisruptionBudget team-pdb already covers the pods"
    assert [e.reason for e in result.events].count("DisruptionBudgetSkipped") == 1
