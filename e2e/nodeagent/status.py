"""Pod status computation: container snapshots -> the ``status`` the kubelet would report. Pure.

The phase rule is the kubelet's ``getPhase``: a waiting container that never ran keeps the pod Pending;
any running container makes it Running; when all have stopped, restartPolicy decides between Running
(about to restart), Succeeded and Failed. Condition ``lastTransitionTime`` only moves when the condition's
status changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

StateName = Literal["waiting", "running", "terminated"]


def rfc3339(at: datetime | None = None) -> str:
    """UTC timestamp with second precision, as the API server stores it (now when ``at`` is None)."""
    return (at or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Termination:
    """How one run of a container ended. Times are RFC 3339 strings (UTC, second precision)."""

    exit_code: int
    reason: str  # "Completed" (exit 0), "Error", "ContainerCannotRun"...
    started_at: str
    finished_at: str
    message: str = ""
    signal: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The ``state.terminated`` object."""
        out: dict[str, Any] = {
            "exitCode": self.exit_code,
            "reason": self.reason,
            "startedAt": self.started_at,
            "finishedAt": self.finished_at,
        }
        if self.message:
            out["message"] = self.message
        if self.signal is not None:
            out["signal"] = self.signal
        return out


@dataclass(frozen=True)
class ContainerSnapshot:
    """The observable state of one container at one moment.

    ``state`` "waiting" carries ``reason`` (ContainerCreating, PodInitializing, CrashLoopBackOff,
    CreateContainerConfigError); "running" carries ``started_at``; "terminated" carries ``termination``.
    ``last_termination`` is the previous run's end (``lastState``), if it restarted at least once.
    """

    name: str
    image: str
    state: StateName
    reason: str = ""
    message: str = ""
    started_at: str = ""
    termination: Termination | None = None
    last_termination: Termination | None = None
    restart_count: int = 0
    ready: bool = False
    started: bool = False
    container_id: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The ``containerStatuses[]`` entry."""
        state: dict[str, Any]
        if self.state == "running":
            state = {"running": {"startedAt": self.started_at}}
        elif self.state == "terminated" and self.termination is not None:
            state = {"terminated": self.termination.to_dict()}
        else:
            waiting: dict[str, Any] = {"reason": self.reason or "ContainerCreating"}
            if self.message:
                waiting["message"] = self.message
            state = {"waiting": waiting}
        out: dict[str, Any] = {
            "name": self.name,
            "image": self.image,
            "imageID": self.image,
            "ready": self.ready,
            "started": self.started,
            "restartCount": self.restart_count,
            "state": state,
            "lastState": {"terminated": self.last_termination.to_dict()} if self.last_termination else {},
        }
        if self.container_id:
            out["containerID"] = self.container_id
        return out


def pod_phase(
    restart_policy: str,
    initialized: bool,
    init_failed: bool,
    containers: Sequence[ContainerSnapshot],
) -> str:
    """Pending / Running / Succeeded / Failed from the main containers (kubelet ``getPhase``).

    ``init_failed`` means an init container failed and will not be retried (restartPolicy Never).
    """
    if init_failed:
        return "Failed"
    if not initialized:
        return "Pending"
    running = waiting = stopped = succeeded = 0
    for c in containers:
        if c.state == "running":
            running += 1
        elif c.state == "terminated":
            stopped += 1
            if c.termination is not None and c.termination.exit_code == 0:
                succeeded += 1
        elif c.last_termination is not None:
            stopped += 1
        else:
            waiting += 1
    if waiting > 0:
        return "Pending"
    if running > 0:
        return "Running"
    if stopped > 0:
        if restart_policy == "Always":
            return "Running"
        if stopped == succeeded:
            return "Succeeded"
        if restart_policy == "Never":
            return "Failed"
        return "Running"
    return "Pending"


def _condition(kind: str, ok: bool, previous: Sequence[dict[str, Any]], now: str, reason: str = "") -> dict[str, Any]:
    """A pod condition that keeps the previous ``lastTransitionTime`` when its status did not change."""
    status = "True" if ok else "False"
    before = next((c for c in previous if c.get("type") == kind), None)
    since = before.get("lastTransitionTime", now) if before and before.get("status") == status else now
    out: dict[str, Any] = {"type": kind, "status": status, "lastProbeTime": None, "lastTransitionTime": since}
    if reason and not ok:
        out["reason"] = reason
    return out


@dataclass(frozen=True)
class PodView:
    """Everything the pod status is computed from.

    ``previous_conditions`` are the conditions currently on the API object (the scheduler's PodScheduled
    is kept from there). ``start_time`` and ``now`` are RFC 3339 strings.
    """

    restart_policy: str
    pod_ip: str
    host_ip: str
    start_time: str
    initialized: bool
    init_failed: bool
    init_containers: Sequence[ContainerSnapshot]
    containers: Sequence[ContainerSnapshot]
    previous_conditions: Sequence[dict[str, Any]]


def pod_status(view: PodView, now: str) -> dict[str, Any]:
    """The full ``status`` object for a merge patch of ``pods/status``."""
    phase = pod_phase(view.restart_policy, view.initialized, view.init_failed, view.containers)
    terminal = phase in ("Succeeded", "Failed")
    all_ready = bool(view.containers) and all(c.ready for c in view.containers)
    not_ready = "PodCompleted" if terminal else "ContainersNotReady"
    conditions = [
        _condition("PodScheduled", True, view.previous_conditions, now),
        _condition("Initialized", view.initialized, view.previous_conditions, now, "ContainersNotInitialized"),
        _condition("ContainersReady", all_ready and not terminal, view.previous_conditions, now, not_ready),
        _condition("Ready", all_ready and not terminal, view.previous_conditions, now, not_ready),
    ]
    status: dict[str, Any] = {
        "phase": phase,
        "conditions": conditions,
        "hostIP": view.host_ip,
        "hostIPs": [{"ip": view.host_ip}],
        "startTime": view.start_time,
        "containerStatuses": [c.to_dict() for c in view.containers],
    }
    if view.pod_ip:
        status["podIP"] = view.pod_ip
        status["podIPs"] = [{"ip": view.pod_ip}]
    if view.init_containers:
        status["initContainerStatuses"] = [c.to_dict() for c in view.init_containers]
    return status


def without_times(status: dict[str, Any]) -> dict[str, Any]:
    """``status`` with condition probe/transition times dropped: equality means "nothing to report"."""
    copy = dict(status)
    copy["conditions"] = [
        {k: v for k, v in c.items() if k not in ("lastTransitionTime", "lastProbeTime")}
        for c in status.get("conditions", [])
    ]
    return copy
