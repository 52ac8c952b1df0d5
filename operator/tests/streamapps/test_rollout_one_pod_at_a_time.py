"""A rollout replaces one pod at a time, the next only when the app is calm again, and resumes after a crash.

The pure decision (``rollout.plan_rollout``) on hand-made observations, and the ``roll_pods`` step on the fakes:
the intent is in status before the StatefulSet's partition is lowered.
"""

from __future__ import annotations

from typing import Any

from operator_fakes import TestingCluster, TestingInstances, TestingKafka, flights_spec
from streamapp_operator.streamapps import handlers
from streamapp_operator.streamapps.reconcile import App, World, reconcile
from streamapp_operator.streamapps.rollout import (
    ROLLOUT_INTERVAL,
    PodState,
    RolloutInputs,
    RolloutPlan,
    in_progress,
    partition_of,
    plan_rollout,
    pod_states,
)

NOW = "2026-01-01T00:00:10Z"
NAME = "app"


def _sts(partition: int, *, generation: int = 2, observed: int = 2, revision: str = "rev-2") -> dict[str, Any]:
    return {
        "metadata": {"name": NAME, "generation": generation},
        "spec": {"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": partition}}},
        "status": {"observedGeneration": observed, "updateRevision": revision, "currentRevision": "rev-1"},
    }


def _pods(
    revisions: list[str], ready: tuple[int, ...] | None = None, terminating: tuple[int, ...] = ()
) -> list[PodState]:
    ready_set = set(range(len(revisions))) if ready is None else set(ready)
    return [PodState(f"{NAME}-{i}", i, rev, i in ready_set, i in terminating) for i, rev in enumerate(revisions)]


def _plan(
    partition: int,
    pods: list[PodState],
    *,
    group: str | None = "Stable",
    restoring: tuple[str, ...] = (),
    changes: bool = False,
    sts: dict[str, Any] | None = None,
    previous: dict[str, Any] | None = None,
    failing: tuple[str, ...] = (),
) -> RolloutPlan:
    inputs = RolloutInputs(
        name=NAME,
        replicas=3,
        target="hash-2",
        template_changes=changes,
        stateful_set=sts if sts is not None else _sts(partition),
        pods=pods,
        group_state=group,
        restoring=list(restoring),
        failing=failing,
    )
    return plan_rollout(inputs, previous, NOW)


def test_a_new_template_is_applied_with_the_partition_at_replicas_so_no_pod_is_replaced_by_it() -> None:
    plan = _plan(0, _pods(["rev-1"] * 3), changes=True)
    assert (plan.hold, plan.partition, plan.replacing) == (3, 3, None)
    assert plan.status is not None and plan.status["targetRevision"] == "hash-2"


def test_the_highest_ordinal_is_handed_over_first_when_every_pod_is_ready_and_the_group_stable() -> None:
    plan = _plan(3, _pods(["rev-1"] * 3))
    assert (plan.hold, plan.partition, plan.replacing) == (3, 2, "app-2")
    assert plan.status == {
        "targetRevision": "hash-2", "partition": 2, "updated": 0, "total": 3, "replacing": "app-2", "since": NOW,
        "waitingFor": "pod app-2 is being replaced",
    }  # fmt: skip


def test_the_next_pod_waits_while_the_replaced_pod_is_gone_not_updated_or_not_ready() -> None:
    gone = _plan(2, [p for p in _pods(["rev-1", "rev-1", "rev-2"]) if p.ordinal != 2])
    assert (gone.partition, gone.replacing, gone.waiting) == (2, None, "pod app-2 is being replaced")
    stale = _plan(2, _pods(["rev-1", "rev-1", "rev-1"]))  # the controller has not replaced it yet
    assert (stale.partition, stale.waiting) == (2, "pod app-2 does not run revision rev-2 yet")
    unready = _plan(2, _pods(["rev-1", "rev-1", "rev-2"], ready=(0, 1)))
    assert unready.partition == 2 and unready.waiting.startswith("pod app-2 is not ready")
    terminating = _plan(2, _pods(["rev-1", "rev-1", "rev-2"], terminating=(0,)))
    assert (terminating.partition, terminating.waiting) == (2, "pod app-0 is being replaced")


def test_the_next_pod_waits_for_restores_and_a_stable_group() -> None:
    pods = _pods(["rev-1", "rev-1", "rev-2"])
    assert _plan(2, pods, restoring=("app-2",)).waiting == "pods app-2 restore state"
    assert _plan(2, pods, group="Reconciling").waiting == "the consumer group is Reconciling, not Stable"
    assert _plan(2, pods, group=None).waiting == "the consumer group's state is unknown (Kafka not read)"
    assert _plan(2, pods).replacing == "app-1"


def test_a_stale_stateful_set_status_is_never_trusted() -> None:
    pods = _pods(["rev-1", "rev-1", "rev-2"])
    plan = _plan(2, pods, sts=_sts(2, generation=3, observed=2))
    assert (plan.partition, plan.waiting) == (2, "the StatefulSet controller has not observed the new pod template yet")


def test_a_rollout_resumes_from_the_partition_after_an_operator_restart_and_never_hands_over_two_pods() -> None:
    # Whatever the operator remembers (no previous status at all here), the partition in the StatefulSet
    # says where the rollout is: pod app-1 was handed over and is not back yet, so nothing moves.
    pods = _pods(["rev-1", "rev-1", "rev-2"], ready=(0, 2))
    plan = _plan(1, pods, previous=None)
    assert (plan.partition, plan.replacing) == (1, None)
    assert plan.waiting == "pod app-1 does not run revision rev-2 yet"
    back = _plan(1, _pods(["rev-1", "rev-2", "rev-2"]), previous={"since": "2026-01-01T00:00:00Z"})
    assert (back.partition, back.replacing) == (0, "app-0")


def test_a_fix_for_a_crashing_app_replaces_every_pod_at_once_when_none_is_ready() -> None:
    """The forced rollback (Kubernetes' StatefulSet documentation): nothing healthy to protect, nothing to wait for."""
    plan = _plan(3, _pods(["rev-1"] * 3, ready=()), group="Reconciling", failing=("app-0", "app-1", "app-2"))
    assert (plan.hold, plan.partition, plan.replacing) == (3, 0, "app-0, app-1, app-2")
    assert plan.forced == "no pod is ready (app-0, app-1, app-2): every pod is replaced at once"
    assert plan.status is not None and plan.status["partition"] == 0 and plan.status["waitingFor"] == ""
    # not before the StatefulSet controller has seen the fixed template
    unseen = _plan(3, _pods(["rev-1"] * 3, ready=()), sts=_sts(3, generation=3, observed=2), failing=("app-0",))
    assert unseen.partition == 3 and unseen.forced == ""


def test_crashing_pods_do_not_hold_back_a_rollout_while_the_healthy_ones_still_do() -> None:
    pods = _pods(["rev-1", "rev-1", "rev-1"], ready=(0, 2))  # app-1 crash-loops: not ready, restoring, group moving
    plan = _plan(3, pods, group="Reconciling", restoring=("app-1",), failing=("app-1",))
    assert (plan.partition, plan.replacing) == (2, "app-2")
    assert plan.forced == "not waiting for crashing pods app-1"
    # a healthy pod that is not ready yet (the replaced one, restoring) still holds the next one back
    after = _plan(2, _pods(["rev-1", "rev-1", "rev-2"], ready=(0,)), group="Reconciling", failing=("app-1",))
    assert (after.partition, after.replacing) == (2, None)
    assert after.waiting.startswith("pod app-2 is not ready")
    # without crashing pods the gate is the same as before: a moving group holds the rollout back
    assert _plan(3, _pods(["rev-1"] * 3), group="Reconciling").replacing is None


def test_a_finished_rollout_and_a_first_creation_need_no_rollout_status() -> None:
    assert _plan(0, _pods(["rev-2"] * 3)) == RolloutPlan(0, 0)
    inputs = RolloutInputs(NAME, 3, "h", template_changes=False, stateful_set=None, pods=[], group_state=None,
                           restoring=[])  # fmt: skip
    created = plan_rollout(inputs, None, NOW)
    assert created == RolloutPlan(0, 0)


def test_pod_states_and_partition_are_read_as_the_api_server_serves_them() -> None:
    pod = {
        "metadata": {"name": "app-1", "labels": {"controller-revision-hash": "rev-2"}},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }
    assert pod_states([pod, {"metadata": {"name": "stray"}}]) == [PodState("app-1", 1, "rev-2", True, False)]
    assert partition_of(_sts(2)) == 2
    assert partition_of({"spec": {}}) == 0
    assert partition_of(None) == 0


def _app(generation: int) -> App:
    return App(name="flights-per-carrier", namespace="apps", uid="uid-1", generation=generation)


def test_roll_pods_writes_the_intent_to_status_before_it_lowers_the_partition(
    cluster: TestingCluster, kafka: TestingKafka
) -> None:
    world = World(cluster=cluster, kafka_for=lambda _: kafka, instances=TestingInstances())
    first = reconcile(_app(1), flights_spec(), {}, world, NOW)
    labels = {"app.kubernetes.io/name": "streamapp", "app.kubernetes.io/instance": "flights-per-carrier"}
    ready = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    for i in range(2):
        cluster.add_pod("apps", f"flights-per-carrier-{i}", {**labels, "controller-revision-hash": "rev-1"}, ready)
    second = reconcile(_app(2), flights_spec(image="localhost/streamapp:2"), first.status, world, NOW)
    sts = cluster.get("StatefulSet", "apps", "flights-per-carrier")
    assert sts is not None and partition_of(sts) == 2  # the new template replaced no pod
    cluster.set_status("StatefulSet", "apps", "flights-per-carrier",
                       {"observedGeneration": sts["metadata"]["generation"], "updateRevision": "rev-2",
                        "currentRevision": "rev-1", "replicas": 2, "readyReplicas": 2})  # fmt: skip
    cluster.journal.clear()
    third = reconcile(_app(2), flights_spec(image="localhost/streamapp:2"), second.status, world, NOW)
    assert cluster.journal[-2:] == ["status", "apply StatefulSet"]
    assert cluster.status_writes[-1]["rollout"]["replacing"] == "flights-per-carrier-1"
    sts = cluster.get("StatefulSet", "apps", "flights-per-carrier")
    assert sts is not None and partition_of(sts) == 1
    assert third.status["rollout"]["replacing"] == "flights-per-carrier-1"
    assert [e.reason for e in third.events if e.reason == "ReplacingPod"] == ["ReplacingPod"]
    # The next reconciles wait (the controller has not seen the new partition, then pod 1 is not replaced yet)
    # and lower nothing.
    cluster.journal.clear()
    fourth = reconcile(_app(2), flights_spec(image="localhost/streamapp:2"), third.status, world, NOW)
    assert (
        fourth.status["rollout"]["waitingFor"] == "the StatefulSet controller has not observed the new pod template yet"
    )
    sts = cluster.get("StatefulSet", "apps", "flights-per-carrier")
    assert sts is not None
    cluster.set_status("StatefulSet", "apps", "flights-per-carrier",
                       {**sts["status"], "observedGeneration": sts["metadata"]["generation"]})  # fmt: skip
    fifth = reconcile(_app(2), flights_spec(image="localhost/streamapp:2"), fourth.status, world, NOW)
    assert "status" not in cluster.journal
    assert partition_of(cluster.get("StatefulSet", "apps", "flights-per-carrier")) == 1
    assert fifth.status["rollout"]["waitingFor"] == "pod flights-per-carrier-1 does not run revision rev-2 yet"
    assert fifth.status["rollout"]["replacing"] == "flights-per-carrier-1"


def test_the_rollout_is_reconciled_at_its_own_faster_pace_only_while_it_is_in_progress() -> None:
    """The next pod goes within ``ROLLOUT_INTERVAL`` of the app being calm again, not up to the 10 s timer later;
    without a rollout only the 10 s timer runs."""
    rolling = {"rollout": {"partition": 2, "replacing": "app-2"}}
    assert in_progress(rolling) and handlers.rolling_out(status=rolling)
    assert not in_progress({}) and not in_progress(None) and not handlers.rolling_out(status={"rollout": None})
    assert ROLLOUT_INTERVAL < handlers.RECONCILE_INTERVAL
