"""What a reconcile of either Kind produces besides its children: events and problems.

Plain data for both Kinds (``streamapps``, ``streamreplays``); nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass


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
