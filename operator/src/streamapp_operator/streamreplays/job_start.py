"""Pure decisions about a replay Job that has not started: why its pod is not running, in Kubernetes' words,
and when that stops being a wait and becomes the replay's failure.

A Job's ``status.active`` counts pending pods too, so "active" is not "running": a pod that cannot be created
(a missing ServiceAccount, a ResourceQuota: the Job controller's ``FailedCreate`` events), scheduled
(``PodScheduled=False``, reason ``Unschedulable``) or started (a container waiting in ``ErrImagePull``,
``ImagePullBackOff``, ``CreateContainerConfigError``, ``InvalidImageName``) never fails the Job by itself. The
replay names the cause at once (``Degraded``) and fails it once ``spec.spark.startTimeoutSeconds`` passed since
the Job was created without any of its pods starting a container, or at once for a cause that never clears.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: Container waiting reasons that mean the pod cannot start its image or its container (the kubelet's names).
START_FAILURES = frozenset(
    {"ErrImagePull", "ImagePullBackOff", "CreateContainerConfigError", "CreateContainerError", "InvalidImageName"}
)
#: ... of those, the ones no retry clears (the image reference itself is invalid): the replay fails at once.
PERMANENT = frozenset({"InvalidImageName"})
UNSCHEDULABLE = "Unschedulable"
FAILED_CREATE = "FailedCreate"
#: The replay's reason when the Job's pod did not start in time and Kubernetes said nothing about why.
NOT_STARTED = "JobNotStarted"
#: Characters of a Kubernetes message kept in a condition (an event's message can be long).
MAX_MESSAGE = 600


@dataclass(frozen=True)
class StartProblem:
    """Why the Job's pod is not running: Kubernetes' ``reason`` and a message naming the pod or the Job."""

    reason: str
    message: str

    @property
    def permanent(self) -> bool:
        return self.reason in PERMANENT


@dataclass(frozen=True)
class StartVerdict:
    """What the replay does about a Job that has not started: ``failed`` (reason, message), else wait with
    ``problem`` (None: nothing wrong seen yet) in ``Degraded``."""

    failed: tuple[str, str] | None
    problem: StartProblem | None


def started(pods: Sequence[Mapping[str, Any]]) -> bool:
    """Whether any pod of the Job has started a container (running now, or run and terminated): from then on
    the Job's own conditions (``Complete``, ``Failed`` after its retries) tell the outcome."""
    for pod in pods:
        status = pod.get("status") or {}
        if status.get("phase") in ("Running", "Succeeded", "Failed"):
            return True
        for container in status.get("containerStatuses") or []:
            state = container.get("state") or {}
            if "running" in state or "terminated" in state or (container.get("lastState") or {}).get("terminated"):
                return True
    return False


def start_problem(pods: Sequence[Mapping[str, Any]], job_events: Sequence[Mapping[str, Any]]) -> StartProblem | None:
    """Why none of ``pods`` (the Job's, oldest first) runs, from the newest pod's container states and
    scheduling condition, or, with no pod at all, from the Job's newest ``FailedCreate`` event; None when
    Kubernetes says nothing wrong (the pod is being scheduled, its image pulled)."""
    for pod in reversed(pods):
        name = (pod.get("metadata") or {}).get("name")
        status = pod.get("status") or {}
        for container in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
            waiting = (container.get("state") or {}).get("waiting") or {}
            reason = str(waiting.get("reason") or "")
            if reason in START_FAILURES:
                detail = _text(waiting.get("message")) or reason
                return StartProblem(reason, f"pod {name}: container {container.get('name')}: {reason}: {detail}")
        for condition in status.get("conditions") or []:
            if (condition.get("type"), condition.get("status"), condition.get("reason")) == (
                "PodScheduled",
                "False",
                UNSCHEDULABLE,
            ):
                return StartProblem(UNSCHEDULABLE, f"pod {name} cannot be scheduled: {_text(condition.get('message'))}")
    if pods:
        return None
    refused = [e for e in job_events if e.get("reason") == FAILED_CREATE]
    if not refused:
        return None
    latest = max(refused, key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))
    return StartProblem(FAILED_CREATE, f"the Job cannot create its pod: {_text(latest.get('message'))}")


def pending_detail(pods: Sequence[Mapping[str, Any]]) -> str | None:
    """Where the newest pod waits when Kubernetes calls it no failure (``ContainerCreating`` with a message, a
    ``Pending`` phase), e.g. ``pod p: container replay: ContainerCreating: <message>``; None without a pod."""
    if not pods:
        return None
    pod = pods[-1]
    name, status = (pod.get("metadata") or {}).get("name"), pod.get("status") or {}
    for container in status.get("containerStatuses") or []:
        waiting = (container.get("state") or {}).get("waiting") or {}
        if waiting:
            said = _text(waiting.get("message"))
            return f"pod {name}: container {container.get('name')}: {waiting.get('reason')}" + (
                f": {said}" if said else ""
            )
    return f"pod {name} is {status.get('phase') or 'Pending'}"


def start_verdict(
    problem: StartProblem | None, seconds: int | None, timeout: int, job: str, detail: str | None = None
) -> StartVerdict:
    """Fail (``(reason, message)``) when ``problem`` never clears or ``seconds`` since the Job was created reached
    ``timeout`` (``spec.spark.startTimeoutSeconds``); else wait, ``problem`` to report. ``detail``: where the pod
    waits (:func:`pending_detail`), said when Kubernetes gave no reason."""
    if problem is not None and problem.permanent:
        return StartVerdict((problem.reason, f"the Spark job cannot start: {problem.message}; Job {job} deleted"), None)
    if seconds is None or seconds < timeout:
        return StartVerdict(None, problem)
    silent = f"no pod of the Job started ({detail})" if detail else "the Job has no pod"
    why = problem.message if problem is not None else silent
    reason = problem.reason if problem is not None else NOT_STARTED
    message = (
        f"the Spark job did not start within {timeout}s (spec.spark.startTimeoutSeconds): {why}; Job {job} deleted"
    )
    return StartVerdict((reason, message), None)


def waiting_text(problem: StartProblem, timeout: int) -> str:
    """The ``Degraded`` message (and Warning event) while the Job's pod cannot start: without a time in it, so it
    changes (and posts an event) only when the cause does."""
    return (
        f"the Spark job has not started: {problem.message}; the replay fails if it has not started "
        f"{timeout}s after its Job was created (spec.spark.startTimeoutSeconds)"
    )


def _text(value: Any) -> str:
    return " ".join(str(value or "").split())[:MAX_MESSAGE]
