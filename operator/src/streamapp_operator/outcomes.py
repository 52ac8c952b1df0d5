"""What a reconcile of either Kind produces besides its children: events, problems and status conditions, and the
step protocol's data (what one step did, :class:`StepOutcome`; why a run stopped, :class:`Halt`; the run,
:class:`StepsRun`), which ``streamapp_operator.steps`` runs.

Plain data for both Kinds (``streamapps``, ``streamreplays``); nothing here does I/O. A condition follows the
Kubernetes API conventions (``metav1.Condition``; ``meta.SetStatusCondition`` in apimachinery):
``lastTransitionTime`` changes only when ``status`` changes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: The reason of a :class:`Waiting` halt's problem.
WAITING = "Waiting"


@dataclass(frozen=True)
class Event:
    """A Kubernetes event to post on the reconciled object (``type`` is Normal or Warning)."""

    type: str
    reason: str
    message: str


@dataclass(frozen=True)
class Problem:
    """Why a StreamApp or StreamReplay cannot be (fully) reconciled.

    ``reason`` is a CamelCase condition reason; ``topology`` marks problems that make ``TopologyValid``
    false (as opposed to problems of the spec, the cluster or Kafka).
    """

    reason: str
    message: str
    topology: bool = False


@dataclass(frozen=True)
class Condition:
    """One status condition as decided (``status`` is True, False or Unknown; ``reason`` CamelCase), for the
    object's ``metadata.generation`` (written as ``observedGeneration``)."""

    type: str
    status: str
    reason: str
    message: str
    generation: int


def transition(old: Mapping[str, Any] | None, condition: Condition, now: str) -> dict[str, Any]:
    """``condition`` as written to status: its ``lastTransitionTime`` is ``old``'s while ``old`` (the same type's
    condition in the previous status; None: none) has the same ``status``, else ``now`` (RFC 3339)."""
    since = old.get("lastTransitionTime") if old is not None and old.get("status") == condition.status else None
    return {
        "type": condition.type,
        "status": condition.status,
        "reason": condition.reason,
        "message": condition.message,
        "lastTransitionTime": since or now,
        "observedGeneration": condition.generation,
    }


def set_condition(
    conditions: Sequence[Mapping[str, Any]],
    condition: Condition,
    now: str,
    order: Callable[[str], int],
) -> list[dict[str, Any]]:
    """``conditions`` with the one of ``condition.type`` replaced by :func:`transition` of it (or added), sorted
    by ``order`` (a condition type -> its position)."""
    old = next((c for c in conditions if c.get("type") == condition.type), None)
    others = [dict(c) for c in conditions if c.get("type") != condition.type]
    return sorted([*others, transition(old, condition, now)], key=lambda c: order(str(c.get("type"))))


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
    the ``halt`` that stops the run after it (None: the next step runs), or the ``problem`` of a seam that failed
    after the step recorded its intent (the run ends there, what the step recorded kept)."""

    events: list[Event] = field(default_factory=list)
    status: dict[str, Any] = field(default_factory=dict)
    stored: dict[str, dict[str, Any]] = field(default_factory=dict)
    halt: Halt | None = None
    problem: Problem | None = None


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
