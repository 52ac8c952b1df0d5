"""Replays in each other's way: two unfinished StreamReplays of one app, or writing one topic, would write the
same history twice; the older goes on and the newer is refused by name (:func:`replay_conflicts`), as an
``application.id`` collision is (``streamapp_operator.identity``). Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from streamapp_operator.outcomes import Problem
from streamapp_operator.streamreplays.resources import (
    Phase,
)


def shared_outputs(replay_sinks: Sequence[str], app_topology: Mapping[str, Any]) -> list[str]:
    """Topics the replay's topology writes that the running app's topology writes too (its sink nodes')."""
    app_sinks = {str(node.get("topic")) for node in app_topology.get("nodes") or [] if node.get("type") == "sink"}
    return sorted(set(replay_sinks) & app_sinks)


@dataclass(frozen=True)
class ReplayClaim:
    """A StreamReplay that has not finished, as kopf's ``replay_claims`` index knows it: the app it replays
    (``<namespace>/<appRef.name>``) and the output topics its topology writes."""

    namespace: str
    name: str
    uid: str
    created: str
    """``metadata.creationTimestamp`` (RFC 3339): the older replay goes on, the newer one is refused."""
    app: str
    sinks: frozenset[str]
    phase: str


def sink_topics_of(topology: Mapping[str, Any] | None) -> frozenset[str]:
    """The ``topic`` of every sink node of a topology document (``spec.topology``); malformed nodes are ignored."""
    nodes = (topology or {}).get("nodes") if isinstance(topology, Mapping) else None
    return frozenset(
        str(node["topic"])
        for node in nodes or []
        if isinstance(node, Mapping) and node.get("type") == "sink" and node.get("topic")
    )


def replay_conflicts(me: ReplayClaim, others: Iterable[ReplayClaim]) -> list[Problem]:
    """Two replays at once must never write the same history twice: an unfinished replay created before ``me``
    (ties: namespace/name) that replays the same app or writes one of ``me``'s output topics refuses ``me``
    (reason ``ReplayInProgress``), naming it. Both would succeed with every record twice in a shared topic, or two
    handovers would each claim to be the app's new version."""
    problems = []
    for other in sorted(others, key=lambda o: (o.created, o.namespace, o.name)):
        if other.uid == me.uid or (other.created, other.namespace, other.name) >= (me.created, me.namespace, me.name):
            continue
        if other.phase in (Phase.SUCCEEDED.value, Phase.FAILED.value):
            continue
        shared = sorted(me.sinks & other.sinks)
        if other.app == me.app:
            why = f"replays StreamApp {me.app} already"
        elif shared:
            why = f"writes {', '.join(shared)} already"
        else:
            continue
        problems.append(
            Problem(
                "ReplayInProgress",
                f"StreamReplay {other.namespace}/{other.name} ({other.phase or 'Pending'}) {why}: one replay of an "
                "app, and one writer of an output topic, at a time; delete it or wait until it has finished",
            )
        )
    return problems
