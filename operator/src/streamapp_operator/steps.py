"""Shared mechanics of the operator's per-Kind controllers: named steps, their outcomes, and failures
turned into problems once.

A controller (``reconcile.py`` for StreamApp; a ``StreamReplay`` controller reuses the same shape) decides
everything first (observe, validate, build every desired object), then runs a ``STEPS`` tuple. A step is a
plain function ``(context) -> StepOutcome``: a pure decision on the context plus at most one kind of action
through a seam (``k8s.Cluster``, ``kafka.KafkaAdmin``), returning the events it caused and the status
fields it owns. :func:`run_steps` runs them in order and stops at the first one that fails, reporting the
failure as a :class:`~streamapp_operator.outcomes.Problem` (``Degraded``), never raising: an API-server
rejection (4xx, or a 500 that does not heal), an API server that fails, Kafka unreachable, or Kafka refusing
a topic. The timer reconciles again later, so a failure is retried at the timer's pace and always visible. A
step that fails at a seam after recording its intent returns the problem in its outcome (:func:`seam_problem`),
so that what it recorded is kept.

A step may also stop the run on purpose, for either Kind, with a :class:`Halt` (returned in its
:class:`StepOutcome` or raised from a helper): :class:`Waiting` for something outside (a Job, a new
version), :class:`Blocked` by something it must not touch (a child someone else made), or :class:`Failed`
(the object cannot succeed). The run records the halt (:attr:`StepsRun.halt`); the Kind's report decides what
each means for its status.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from streamapp_operator.k8s import ApplyRejected, Cluster, KubernetesUnavailable
from streamapp_operator.kafka import KafkaUnavailable, TopicCreationFailed
from streamapp_operator.outcomes import (
    WAITING,
    Blocked,
    Event,
    Failed,
    Halt,
    Problem,
    StepOutcome,
    StepsRun,
    Waiting,
)

#: The step protocol's data (:class:`StepOutcome`, :class:`StepsRun`, the halts) lives in ``outcomes`` (plain data,
#: importable by pure decisions); it is named here too, beside the mechanics that use it.
__all__ = [
    "API_SERVER_FAILED",
    "APPLY_REJECTED",
    "KAFKA_UNAVAILABLE",
    "SEAM_FAILURES",
    "TOPIC_CREATION_FAILED",
    "WAITING",
    "Blocked",
    "Failed",
    "Halt",
    "Step",
    "StepOutcome",
    "StepsRun",
    "Waiting",
    "apply_child",
    "dry_run",
    "run_steps",
    "seam_problem",
]

KAFKA_UNAVAILABLE = "KafkaUnavailable"
TOPIC_CREATION_FAILED = "TopicCreationFailed"
APPLY_REJECTED = "ApplyRejected"
API_SERVER_FAILED = "ApiServerFailed"

ContextT = TypeVar("ContextT")


Step = Callable[[ContextT], StepOutcome]


def run_steps(
    steps: Sequence[Step[ContextT]],
    context: ContextT,
    advance: Callable[[ContextT, StepOutcome], ContextT] | None = None,
) -> StepsRun:
    """Run ``steps`` in order on ``context``; the first seam failure ends the run as a problem, the first halt
    (returned or raised) as :attr:`StepsRun.halt`. ``advance`` (None: every step reads ``context``) gives the next
    step's context from the one before and that step's outcome, for a Kind whose steps build on what the steps
    before them recorded (a StreamReplay resolves its range, then launches the Job over it)."""
    run = StepsRun()
    for step in steps:
        try:
            outcome = step(context)
            run.outcomes.append((step.__name__, outcome))
            run.halt = outcome.halt
            context = context if advance is None else advance(context, outcome)
            run.problem = outcome.problem
        except Halt as exc:
            run.halt = exc
        except SEAM_FAILURES as exc:
            run.problem = seam_problem(exc)
        if run.problem is not None or run.halt is not None:
            break
    return run


#: The seams' failures a run reports as a problem (:func:`seam_problem`) instead of raising.
SEAM_FAILURES = (ApplyRejected, KubernetesUnavailable, TopicCreationFailed, KafkaUnavailable)


def seam_problem(exc: Exception) -> Problem:
    """The problem (``Degraded``) of a seam's failure, one of :data:`SEAM_FAILURES`: the API server refused an object
    or failed, Kafka refused a topic or cannot be reached."""
    if isinstance(exc, ApplyRejected):
        return Problem(APPLY_REJECTED, str(exc))
    if isinstance(exc, KubernetesUnavailable):
        return Problem(API_SERVER_FAILED, f"{exc} (retried at the next reconcile)")
    if isinstance(exc, TopicCreationFailed):
        return Problem(TOPIC_CREATION_FAILED, str(exc))
    return Problem(KAFKA_UNAVAILABLE, str(exc))


def apply_child(cluster: Cluster, manifest: dict[str, Any], before: dict[str, Any] | None) -> StepOutcome:
    """Server-side apply one child; an event when it was created or changed; the child as stored."""
    after = cluster.apply(manifest)
    kind, name = manifest["kind"], manifest["metadata"]["name"]
    if before is None:
        events = [Event("Normal", "Created", f"Created {kind} {name}")]
    elif _version(before) != _version(after):
        events = [Event("Normal", "Updated", f"Updated {kind} {name}")]
    else:
        events = []
    return StepOutcome(events=events, stored={kind: after})


def dry_run(cluster: Cluster, manifests: Sequence[dict[str, Any]]) -> StepOutcome:
    """Let the API server validate and admit every manifest without storing any (server-side dry run):
    a child it would refuse stops the reconcile before anything is written."""
    for manifest in manifests:
        cluster.apply(manifest, dry_run=True)
    return StepOutcome()


def _version(obj: dict[str, Any]) -> Any:
    """What changes when an object's spec changes: its generation if it has one, else its resourceVersion."""
    metadata = obj.get("metadata", {})
    return metadata.get("generation") or metadata.get("resourceVersion")
