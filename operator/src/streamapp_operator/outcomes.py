"""What a reconcile of either Kind produces besides its children: events, problems and status conditions.

Plain data for both Kinds (``streamapps``, ``streamreplays``); nothing here does I/O. A condition follows the
Kubernetes API conventions (``metav1.Condition``; ``meta.SetStatusCondition`` in apimachinery):
``lastTransitionTime`` changes only when ``status`` changes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


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
