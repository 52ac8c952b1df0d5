"""Status conditions follow the API conventions and say Ready only when every desired pod is ready."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from streamapp_operator.outcomes import Event, Problem
from streamapp_operator.streamapps.conditions import (
    CONDITION_TYPES,
    Health,
    Rollout,
    condition_events,
    conditions,
    rollout,
)
from streamapp_operator.streamapps.pod_status import (
    UNBOUND_CLAIM_AFTER_SECONDS,
    UNSCHEDULABLE_AFTER_SECONDS,
    failing_pods,
    unschedulable_pods,
)

T0, T1 = "2026-01-01T00:00:00Z", "2026-01-01T00:00:10Z"


def _sts(generation: int = 1, **status: Any) -> dict[str, Any]:
    return {"metadata": {"generation": generation}, "status": status}


def _by_type(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in items}


def _progress(sts: dict[str, Any], desired: int) -> Rollout:
    progress = rollout(sts, desired)
    assert progress is not None
    return progress


def test_rollout_is_complete_only_when_the_controller_saw_the_latest_spec() -> None:
    settled = _sts(2, observedGeneration=2, replicas=2, readyReplicas=2, updatedReplicas=2,
                   currentRevision="r2", updateRevision="r2")  # fmt: skip
    assert _progress(settled, 2) == Rollout(desired=2, replicas=2, ready=2, updated=2, current=True)
    assert _progress(settled, 2).all_ready
    stale = _sts(3, observedGeneration=2, replicas=2, readyReplicas=2, updatedReplicas=2)
    assert not _progress(stale, 2).complete
    rolling = _sts(2, observedGeneration=2, replicas=2, readyReplicas=2, updatedReplicas=1,
                   currentRevision="r1", updateRevision="r2")  # fmt: skip
    assert not _progress(rolling, 2).complete
    assert rollout(None, 2) is None


def test_every_condition_is_written_on_every_visit() -> None:
    result = conditions(Health(generation=1, problems=[], progress=None, topology_checked=False), previous=[], now=T0)
    assert [c["type"] for c in result] == list(CONDITION_TYPES)
    assert _by_type(result)["TopologyValid"]["status"] == "Unknown"
    assert all(c["observedGeneration"] == 1 and c["lastTransitionTime"] == T0 for c in result)


def test_all_pods_ready_means_ready_and_not_progressing() -> None:
    progress = Rollout(desired=2, replicas=2, ready=2, updated=2, current=True)
    result = _by_type(
        conditions(Health(generation=3, problems=[], progress=progress, topology_checked=True), previous=[], now=T0)
    )
    assert (result["Ready"]["status"], result["Ready"]["message"]) == ("True", "2/2 pods ready")
    assert result["Progressing"]["status"] == "False"
    assert result["Degraded"]["status"] == "False"
    assert result["TopologyValid"]["status"] == "True"


def test_pods_starting_means_progressing_and_not_ready() -> None:
    progress = Rollout(desired=2, replicas=2, ready=1, updated=2, current=True)
    result = _by_type(
        conditions(Health(generation=1, problems=[], progress=progress, topology_checked=True), previous=[], now=T0)
    )
    assert (result["Ready"]["status"], result["Ready"]["reason"]) == ("False", "ReplicasNotReady")
    assert result["Ready"]["message"] == "1/2 pods ready"
    scaling = Rollout(desired=3, replicas=2, ready=2, updated=2, current=True)
    result = _by_type(
        conditions(Health(generation=2, problems=[], progress=scaling, topology_checked=True), previous=[], now=T0)
    )
    assert (result["Progressing"]["status"], result["Progressing"]["reason"]) == ("True", "RollingOut")


def test_invalid_topology_is_degraded_with_its_message_everywhere_it_matters() -> None:
    problem = Problem("TopologyInvalid", "spec.topology: node 'count': input 'x' does not exist", topology=True)
    result = _by_type(
        conditions(Health(generation=2, problems=[problem], progress=None, topology_checked=False), previous=[], now=T0)
    )
    for kind in ("Degraded", "TopologyValid"):
        assert result[kind]["reason"] == "TopologyInvalid"
        assert result[kind]["message"] == problem.message
    assert result["Degraded"]["status"] == "True"
    assert result["TopologyValid"]["status"] == "False"
    assert result["Ready"]["status"] == "False"
    assert (result["Progressing"]["status"], result["Progressing"]["reason"]) == ("False", "ReconcileBlocked")


def test_kafka_problem_is_degraded_but_does_not_invalidate_the_topology() -> None:
    problem = Problem("KafkaUnavailable", "cannot check the topology's topics: timeout")
    result = _by_type(
        conditions(Health(generation=1, problems=[problem], progress=None, topology_checked=False), previous=[], now=T0)
    )
    assert result["Degraded"]["status"] == "True"
    assert result["TopologyValid"]["status"] == "Unknown"


def test_last_transition_time_changes_only_when_status_changes() -> None:
    progress = Rollout(desired=1, replicas=1, ready=0, updated=1, current=True)
    first = conditions(Health(generation=1, problems=[], progress=progress, topology_checked=True), previous=[], now=T0)
    ready = Rollout(desired=1, replicas=1, ready=1, updated=1, current=True)
    second = _by_type(
        conditions(Health(generation=1, problems=[], progress=ready, topology_checked=True), previous=first, now=T1)
    )
    assert second["Ready"]["lastTransitionTime"] == T1  # False -> True
    assert second["Degraded"]["lastTransitionTime"] == T0  # False -> False


def test_events_fire_on_transitions_not_on_every_visit() -> None:
    problem = Problem("SourceTopicMissing", "source topic 'flights' does not exist in Kafka", topology=True)
    healthy = conditions(
        Health(
            generation=1,
            problems=[],
            progress=Rollout(desired=1, replicas=1, ready=1, updated=1, current=True),
            topology_checked=True,
        ),
        previous=[],
        now=T0,
    )
    degraded = conditions(
        Health(generation=2, problems=[problem], progress=None, topology_checked=False), previous=healthy, now=T1
    )
    assert condition_events([], healthy) == [Event("Normal", "Ready", "1/1 pods ready")]
    assert condition_events(healthy, healthy) == []
    assert condition_events(healthy, degraded) == [Event("Warning", "SourceTopicMissing", problem.message)]
    assert condition_events(degraded, degraded) == []
    recovered = condition_events(degraded, healthy)
    assert [e.reason for e in recovered] == ["Recovered", "Ready"]


def _pod(name: str, waiting: str | None = None, exit_code: int | None = None, **metadata: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "streamapp", "ready": False, "restartCount": 3, "state": {}}
    if waiting is not None:
        container["state"] = {"waiting": {"reason": waiting, "message": "back-off 40s restarting"}}
    if exit_code is not None:
        container["lastState"] = {"terminated": {"exitCode": exit_code}}
    return {"metadata": {"name": name, **metadata}, "status": {"containerStatuses": [container]}}


def test_failing_pods_name_the_pod_the_reason_and_the_exit_code() -> None:
    pods = [
        _pod("app-1", "ImagePullBackOff"),
        _pod("app-0", "CrashLoopBackOff", exit_code=1),
        _pod("app-2", "ContainerCreating"),
        _pod("app-3", "CrashLoopBackOff", exit_code=2, deletionTimestamp="2026-01-01T00:00:00Z"),
    ]
    assert failing_pods(pods) == [
        "pod app-0: CrashLoopBackOff (last exit code 1)",
        "pod app-1: ImagePullBackOff (back-off 40s restarting)",
    ]


def test_crash_looping_pods_degrade_the_app_and_explain_ready() -> None:
    failing = failing_pods([_pod("app-0", "CrashLoopBackOff", exit_code=1)])
    progress = Rollout(desired=1, replicas=1, ready=0, updated=1, current=True)
    computed = conditions(
        Health(generation=1, problems=[], progress=progress, topology_checked=True, failing=failing),
        previous=[],
        now=T0,
    )
    result = _by_type(computed)
    assert (result["Degraded"]["status"], result["Degraded"]["reason"]) == ("True", "PodsFailing")
    assert result["Degraded"]["message"] == "pod app-0: CrashLoopBackOff (last exit code 1)"
    assert result["Ready"]["message"] == "0/1 pods ready; pod app-0: CrashLoopBackOff (last exit code 1)"
    assert result["TopologyValid"]["status"] == "True"


#: The scheduler's message, with the run of two spaces it writes between its sentences.
NO_NODE = "0/1 nodes are available: 1 Insufficient memory.  preemption: 0/1 nodes are available"


def _pending(name: str, since: str, reason: str = "Unschedulable", **metadata: Any) -> dict[str, Any]:
    scheduled = {"type": "PodScheduled", "status": "False", "reason": reason, "lastTransitionTime": since,
                 "message": NO_NODE}  # fmt: skip
    return {"metadata": {"name": name, **metadata}, "status": {"phase": "Pending", "conditions": [scheduled]}}


def test_a_pod_no_node_can_take_is_failing_once_the_scheduler_said_so_for_the_grace_period() -> None:
    later = datetime.fromisoformat(T0.replace("Z", "+00:00")).timestamp() + UNSCHEDULABLE_AFTER_SECONDS
    pods = [
        _pending("app-1", T0),
        _pending("app-0", T0),
        _pending("app-2", T1),  # unschedulable for 10 s: a volume being bound looks so for seconds
        _pending("app-3", T0, reason="SchedulingGated"),
        _pending("app-4", T0, deletionTimestamp=T1),
    ]

    said = " ".join(NO_NODE.split())
    assert unschedulable_pods(pods, later) == [f"pod app-{n}: Unschedulable ({said})" for n in (0, 1)]
    assert unschedulable_pods(pods, later - 1) == []


def test_a_pod_waiting_for_its_volume_to_be_bound_is_failing_only_after_the_claims_grace_period() -> None:
    waiting = "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: not helpful"
    pod = _pending("app-0", T0)
    pod["status"]["conditions"][0]["message"] = waiting
    start = datetime.fromisoformat(T0.replace("Z", "+00:00")).timestamp()

    assert unschedulable_pods([pod], start + UNSCHEDULABLE_AFTER_SECONDS) == []
    assert unschedulable_pods([pod], start + UNBOUND_CLAIM_AFTER_SECONDS) == [f"pod app-0: Unschedulable ({waiting})"]


def test_unschedulable_pods_degrade_the_app_and_the_rollout_is_not_complete() -> None:
    later = datetime.fromisoformat(T0.replace("Z", "+00:00")).timestamp() + UNSCHEDULABLE_AFTER_SECONDS
    unscheduled = unschedulable_pods([_pending("app-0", T0)], later)
    progress = Rollout(desired=1, replicas=1, ready=0, updated=1, current=True)  # the pod exists with the spec
    health = Health(generation=1, problems=[], progress=progress, topology_checked=True, failing=unscheduled,
                    unscheduled=unscheduled)  # fmt: skip

    result = _by_type(conditions(health, previous=[], now=T0))

    assert (result["Degraded"]["status"], result["Degraded"]["reason"]) == ("True", "PodsFailing")
    assert result["Degraded"]["message"] == unscheduled[0]
    assert result["Ready"]["message"] == f"0/1 pods ready; {unscheduled[0]}"
    assert (result["Progressing"]["status"], result["Progressing"]["reason"]) == ("False", "PodsUnschedulable")
    assert result["Progressing"]["message"] == "no node can take pod app-0 (Degraded says why)"
