"""Shared mechanics of the operator's per-Kind controllers: named steps, their outcomes, and failures
turned into problems once.

A controller (``reconcile.py`` for StreamApp; a ``StreamReplay`` controller reuses the same shape) decides
everything first (observe, validate, build every desired object), then runs a ``STEPS`` tuple. A step is a
plain function ``(context) -> StepOutcome``: a pure decision on the context plus at most one kind of action
through a seam (``k8s.Cluster``, ``kafka.KafkaAdmin``), returning the events it caused and the status
fields it owns. :func:`run_steps` runs them in order and stops at the first one that fails, reporting the
failure as a :class:`~streamapp_operator.outcomes.Problem` (``Degraded``), never raising: an API-server
rejection (4xx, or a 500 that does not heal), an API server that fails, Kafka unreachable, or Kafka refusing
a topic. The timer reconciles again later, so a failure is retried at the timer's pace and always visible.

A step may also stop the run on purpose, for either Kind, with a :class:`Halt` (returned in its
:class:`StepOutcome` or raised from a helper): :class:`Waiting` for something outside (a Job, a new
version), :class:`Blocked` by something it must not touch (a child someone else made), or :class:`Failed`
(the object cannot succeed). The run records the halt (:attr:`StepsRun.halt`); the Kind's report decides what
each means for its status.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from streamapp_operator.k8s import ApplyRejected, Cluster, KubernetesUnavailable
from streamapp_operator.kafka import KafkaUnavailable, TopicCreationFailed
from streamapp_operator.outcomes import Event, Problem

KAFKA_UNAVAILABLE = "KafkaUnavailable"
TOPIC_CREATION_FAILED = "TopicCreationFailed"
APPLY_REJECTED = "ApplyRejected"
API_SERVER_FAILED = "ApiServerFailed"

ContextT = TypeVar("ContextT")
#: The reason of a :class:`Waiting` halt's problem.
WAITING = "Waiting"


class Halt(Exception):
    """A step's deliberate stop of the run; :attr:`problem` says why (reason and message)."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem.message)
        self.problem = problem


class Waiting(Halt):
    """A step waits for something outside (the Job, the new version): later steps do not run yet."""

    def __init__(self, message: str) -> None:
        super().__init__(Problem(WAITING, message))


class Blocked(Halt):
    """Something in the way that must not be touched (a child someone else made): the object waits, retried at
    every reconcile, until it is gone (``Degraded`` names it)."""


class Failed(Halt):
    """The object cannot succeed (an invalid range, a failed Job): ``reason`` is the condition's reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(Problem(reason, message))
        self.reason = reason


@dataclass
class StepOutcome:
    """What one step did: ``events`` to post, ``status`` fields it owns (None deletes one), and the
    ``stored`` objects it wrote as the API server returned them (by kind), for later steps and status, and
    the ``halt`` that stops the run after it (None: the next step runs)."""

    events: list[Event] = field(default_factory=list)
    status: dict[str, Any] = field(default_factory=dict)
    stored: dict[str, dict[str, Any]] = field(default_factory=dict)
    halt: Halt | None = None


@dataclass
class StepsRun:
    """The outcomes of the steps that ran, and what stopped the run: a seam's failure (``problem``) or a step's
    ``halt`` (both None: all ran)."""

    outcomes: list[tuple[str, StepOutcome]] = field(default_factory=list)
    problem: Problem | None = None
    halt: Halt | None = None

    @property
    def events(self) -> list[Event]:
        return [event for _, outcome in self.outcomes for event in outcome.events]

    @property
    def status(self) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        for _, outcome in self.outcomes:
            merged.update(outcome.status)
        return merged

    def stored(self, kind: str) -> dict[str, Any] | None:
        found = [outcome.stored[kind] for _, outcome in self.outcomes if kind in outcome.stored]
        return found[-1] if found else None


Step = Callable[[ContextT], StepOutcome]


def run_steps(steps: Sequence[Step[ContextT]], context: ContextT) -> StepsRun:
    """Run ``steps`` in order on ``context``; the first seam failure ends the run as a problem, the first halt
    (returned or raised) as :attr:`StepsRun.halt`."""
    run = StepsRun()
    for step in steps:
        try:
            outcome = step(context)
            run.outcomes.append((step.__name__, outcome))
            run.halt = outcome.halt
        except Halt as exc:
            run.halt = exc
        except ApplyRejected as exc:
            run.problem = Problem(APPLY_REJECTED, str(exc))
        except KubernetesUnavailable as exc:
            run.problem = Problem(API_SERVER_FAILED, f"{exc} (retried at the next reconcile)")
        except TopicCreationFailed as exc:
            run.problem = Problem(TOPIC_CREATION_FAILED, str(exc))
        except KafkaUnavailable as exc:
            run.problem = Problem(KAFKA_UNAVAILABLE, str(exc))
        if run.problem is not None or run.halt is not None:
            break
    return run


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
