"""Pod phase and conditions follow the kubelet's getPhase and condition rules."""

from __future__ import annotations

import pytest

from e2e.nodeagent.status import ContainerSnapshot, PodView, Termination, pod_phase, pod_status, without_times

T0, T1 = "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z"


def running(name: str = "app", ready: bool = True) -> ContainerSnapshot:
    return ContainerSnapshot(name=name, image="img", state="running", started_at=T0, ready=ready, started=True)


def exited(code: int, name: str = "app") -> ContainerSnapshot:
    return ContainerSnapshot(
        name=name,
        image="img",
        state="terminated",
        termination=Termination(code, "Completed" if code == 0 else "Error", T0, T1),
    )


def backing_off(name: str = "app") -> ContainerSnapshot:
    return ContainerSnapshot(
        name=name,
        image="img",
        state="waiting",
        reason="CrashLoopBackOff",
        last_termination=Termination(1, "Error", T0, T1),
        restart_count=2,
    )


CREATING = ContainerSnapshot(name="app", image="img", state="waiting", reason="ContainerCreating")


@pytest.mark.parametrize(
    ("policy", "containers", "phase"),
    [
        ("Always", [CREATING], "Pending"),
        ("Always", [running(), CREATING], "Pending"),
        ("Always", [running()], "Running"),
        ("Always", [backing_off()], "Running"),  # restarting counts as stopped, not waiting
        ("Always", [exited(0)], "Running"),  # Always restarts even after success
        ("OnFailure", [exited(0), exited(0, "b")], "Succeeded"),
        ("OnFailure", [exited(1)], "Running"),  # about to be restarted
        ("Never", [exited(0), exited(2, "b")], "Failed"),
        ("Never", [exited(0)], "Succeeded"),
        ("Never", [running(), exited(1, "b")], "Running"),
    ],
)
def test_phase_follows_kubelet_rules(policy: str, containers: list[ContainerSnapshot], phase: str) -> None:
    assert pod_phase(policy, initialized=True, init_failed=False, containers=containers) == phase


def test_uninitialized_pod_is_pending_and_failed_init_fails_it() -> None:
    assert pod_phase("Always", initialized=False, init_failed=False, containers=[running()]) == "Pending"
    assert pod_phase("Never", initialized=False, init_failed=True, containers=[CREATING]) == "Failed"


def view(containers: list[ContainerSnapshot], previous: list[dict] | None = None) -> PodView:
    return PodView(
        restart_policy="Always",
        pod_ip="127.0.100.2",
        host_ip="127.0.0.1",
        start_time=T0,
        initialized=True,
        init_failed=False,
        init_containers=[],
        containers=containers,
        previous_conditions=previous or [],
    )


def conditions(status: dict) -> dict[str, str]:
    return {c["type"]: c["status"] for c in status["conditions"]}


def test_ready_only_when_every_container_is_ready() -> None:
    status = pod_status(view([running("a"), running("b", ready=False)]), T1)
    assert conditions(status) == {
        "PodScheduled": "True",
        "Initialized": "True",
        "ContainersReady": "False",
        "Ready": "False",
    }
    status = pod_status(view([running("a"), running("b")]), T1)
    assert conditions(status)["Ready"] == "True"
    assert status["podIP"] == "127.0.100.2" and status["podIPs"] == [{"ip": "127.0.100.2"}]
    assert status["hostIP"] == "127.0.0.1" and status["phase"] == "Running"


def test_transition_time_moves_only_when_condition_status_changes() -> None:
    first = pod_status(view([running()]), T0)
    same = pod_status(view([running()], first["conditions"]), T1)
    assert {c["lastTransitionTime"] for c in same["conditions"]} == {T0}
    flipped = pod_status(view([running(ready=False)], first["conditions"]), T1)
    times = {c["type"]: c["lastTransitionTime"] for c in flipped["conditions"]}
    assert times == {"PodScheduled": T0, "Initialized": T0, "ContainersReady": T1, "Ready": T1}


def test_container_status_reports_restart_and_last_state() -> None:
    entry = pod_status(view([backing_off()]), T1)["containerStatuses"][0]
    assert entry["state"] == {"waiting": {"reason": "CrashLoopBackOff"}}
    assert entry["lastState"]["terminated"]["exitCode"] == 1
    assert entry["restartCount"] == 2 and entry["ready"] is False


def test_completed_pod_is_not_ready_with_reason_pod_completed() -> None:
    done = PodView(
        restart_policy="Never",
        pod_ip="127.0.100.2",
        host_ip="127.0.0.1",
        start_time=T0,
        initialized=True,
        init_failed=False,
        init_containers=[],
        containers=[exited(0)],
        previous_conditions=[],
    )
    status = pod_status(done, T1)
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert status["phase"] == "Succeeded" and ready["status"] == "False" and ready["reason"] == "PodCompleted"


def test_status_comparison_ignores_timestamps_only() -> None:
    a = pod_status(view([running()]), T0)
    b = pod_status(view([running()]), T1)
    assert without_times(a) == without_times(b)
    assert without_times(a) != without_times(pod_status(view([running(ready=False)]), T1))
