"""What one StreamReplay reconcile writes back: its status with the conditions (``Complete``, ``Progressing``,
``Failed``, ``Degraded``) decided from its phase and from how the steps' run ended, and its events. Pure.

A run ends in one of the floor's outcomes (``streamapp_operator.steps``): all steps ran, a seam failed (``Degraded``,
retried), or a step halted: ``Waiting`` (``Progressing`` says for what), ``Blocked`` (``Degraded`` names what is in
the way, a Warning event when that changes) or ``Failed`` (``phase: Failed``, a Warning event).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from streamapp_operator.outcomes import (
    Blocked,
    Condition,
    Event,
    Failed,
    Problem,
    StepOutcome,
    StepsRun,
    Waiting,
    transition,
)
from streamapp_operator.streamreplays.resources import Phase, Replay


@dataclass
class ReplayResult:
    """What to write back: the new ``status`` (None values delete a field; {}: nothing, the replay has finished) and
    the events to post."""

    status: dict[str, Any]
    events: list[Event] = field(default_factory=list)


@dataclass(frozen=True)
class Given:
    """What one reconcile reports against: the replay, its status before the reconcile and the instant (RFC 3339)
    that stamps condition transitions."""

    replay: Replay
    previous: dict[str, Any]
    now: str


def report(given: Given, status: Mapping[str, Any], run: StepsRun, after: StepOutcome | None = None) -> ReplayResult:
    """The result of a reconcile: ``status`` as it stood when the run began, with what its steps recorded and
    ``after`` (what a failed replay undid), its events, and the conditions of how the run ended."""
    after = after or StepOutcome()
    recorded = {key: value for key, value in {**status, **run.status, **after.status}.items() if key != "waiting"}
    events = [*run.events, *after.events]
    halt = run.halt
    if isinstance(halt, Failed):
        return _failed(given, recorded, halt, events)
    if isinstance(halt, Blocked):
        return _blocked(given, recorded, halt, events)
    waiting = str(halt) if isinstance(halt, Waiting) else None
    return ReplayResult(status=_finished(given, recorded, run.problem, waiting), events=events)


def _failed(given: Given, status: dict[str, Any], exc: Failed, events: list[Event]) -> ReplayResult:
    now = given.now
    status = {**status, "phase": Phase.FAILED.value, "completionTime": now, "progress": f"failed: {exc.reason}"}
    events = [*events, Event("Warning", exc.reason, str(exc))]
    return ReplayResult(status=_finished(given, status, Problem(exc.reason, str(exc))), events=events)


def _blocked(given: Given, status: dict[str, Any], exc: Blocked, events: list[Event]) -> ReplayResult:
    """The replay waits, ``Degraded`` naming what is in the way; a Warning event when that changes, not every tick."""
    before: dict[str, Any] = next(
        (c for c in given.previous.get("conditions") or [] if c.get("type") == "Degraded"), {}
    )
    said = before.get("status") == "True" and before.get("message") == str(exc)
    events = events if said else [*events, Event("Warning", exc.problem.reason, str(exc))]
    return ReplayResult(status=_finished(given, status, exc.problem, f"blocked: {exc}"), events=events)


def _finished(
    given: Given, status: dict[str, Any], problem: Problem | None = None, waiting: str | None = None
) -> dict[str, Any]:
    """The status to write: conditions from the phase (Failed, Complete, Progressing; ``waiting`` says for what),
    and from ``problem`` (Failed when the phase is, else Degraded), observedGeneration."""
    replay, previous, now = given.replay, given.previous, given.now
    phase = status.get("phase", Phase.PENDING.value)
    failed = ("True", problem.reason, problem.message) if phase == Phase.FAILED.value and problem else ("False", "", "")
    if phase != Phase.FAILED.value and problem is not None:  # a retried problem (Kafka down, API refusal)
        degraded = ("True", problem.reason, problem.message)
    else:
        degraded = ("False", "", "")
    complete = phase == Phase.SUCCEEDED.value
    progressing = phase in (Phase.PENDING.value, Phase.RUNNING.value, Phase.HANDING_OVER.value)
    wanted = {
        "Complete": ("True", "Succeeded", status.get("progress") or "") if complete else ("False", phase, ""),
        "Progressing": ("True", phase, waiting or status.get("progress") or "")
        if progressing
        else ("False", phase, ""),
        "Failed": failed,
        "Degraded": degraded,
    }
    old = {c.get("type"): c for c in previous.get("conditions") or []}
    conditions = []
    for kind, (value, reason, message) in wanted.items():
        decided = Condition(kind, value, reason or ("None" if value == "False" else kind), message, replay.generation)
        conditions.append(transition(old.get(kind), decided, now))
    progress = status.get("progress")
    return {
        **status,
        "progress": progress if progress is not None else waiting or phase.lower(),
        "conditions": conditions,
        "observedGeneration": replay.generation,
    }
