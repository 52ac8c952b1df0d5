"""State volumes of scaled-away pods: kept warm for a while, then deleted, never orphaned for ever.

The StatefulSet keeps the PersistentVolumeClaim of a pod removed by a scale-down
(``persistentVolumeClaimRetentionPolicy.whenScaled: Retain``), so that a quick scale-up finds its state store
warm and restores only the changelog tail. :func:`plan_claims` decides, from the claims as served, which ones to
mark with the time of the scale-down (annotation ``streamapp.io/scaled-down-at``), which to unmark (the ordinal
is wanted again: a scale-up reuses the claim), and which to delete (marked longer than
``spec.state.retainAfterScaleDown`` ago). Only claims of this app are ever touched: named
``state-<app>-<ordinal>``, labelled with the app's selector labels, and with no owner other than the app's
StatefulSet. Everything here is pure; ``reconcile.retain_state_volumes`` acts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from streamapp_operator.times import seconds_between

SCALED_DOWN_ANNOTATION = "streamapp.io/scaled-down-at"
CLAIM_TEMPLATE = "state"
_DURATION = re.compile(r"(\d+)(h|m|s)")


def claim_name(app: str, ordinal: int) -> str:
    """The state claim the StatefulSet of StreamApp ``app`` mounts into pod ``ordinal`` (its volumeClaimTemplate)."""
    return f"{CLAIM_TEMPLATE}-{app}-{ordinal}"


def claim_ordinals(replicas: int, max_replicas: int | None, stateful_set: Mapping[str, Any] | None) -> int:
    """How many ordinals' state claims the StatefulSet may mount: ``spec.replicas``, the autoscaler's
    ``maxReplicas`` and the replicas of the StatefulSet as it is (whichever is most)."""
    current = int(((stateful_set or {}).get("spec") or {}).get("replicas") or 0)
    return max(replicas, max_replicas or 0, current)


def parse_duration(text: str) -> float:
    """Seconds of a Go-style duration made of hours, minutes and seconds (``1h``, ``90m``, ``1h30m``, ``45s``);
    raises ValueError otherwise."""
    parts = _DURATION.findall(text)
    if not text or "".join(f"{n}{u}" for n, u in parts) != text:
        raise ValueError(f"{text!r} is not a duration such as 1h, 30m, 1h30m or 45s")
    return float(sum(int(n) * {"h": 3600, "m": 60, "s": 1}[u] for n, u in parts))


@dataclass(frozen=True)
class ClaimAction:
    """One change to a claim: ``mark`` (annotate with ``at``), ``unmark`` or ``delete``; ``uid`` is a precondition."""

    action: str
    name: str
    uid: str
    at: str = ""


@dataclass(frozen=True)
class ClaimPlan:
    """The actions, and the claims kept for a scale-up (name -> when they were marked) for ``status``."""

    actions: list[ClaimAction] = field(default_factory=list)
    retained: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ClaimRules:
    """Whose state claims are planned: StreamApp ``app`` running ``replicas`` pods, its StatefulSet's uid
    (``stateful_set_uid``; None: none yet), and how long a scaled-away pod's claim is kept (``retain_seconds``)."""

    app: str
    replicas: int
    stateful_set_uid: str | None
    retain_seconds: float


def plan_claims(claims: Sequence[Mapping[str, Any]], rules: ClaimRules, now: str) -> ClaimPlan:
    """What to do with the app's state claims under ``rules``; ``now`` is RFC 3339.

    A claim of an ordinal at or above ``replicas`` is marked with ``now`` (once), and deleted when it was marked
    more than ``retain_seconds`` before ``now``; a marked claim of an ordinal below ``replicas`` is unmarked (a
    scale-up reuses it). Claims that are not this app's (name, or an owner other than the StatefulSet with
    ``stateful_set_uid``) are left alone.
    """
    app, replicas, stateful_set_uid = rules.app, rules.replicas, rules.stateful_set_uid
    pattern = re.compile(rf"{CLAIM_TEMPLATE}-{re.escape(app)}-(\d+)")
    plan = ClaimPlan()
    for claim in sorted(claims, key=lambda c: str((c.get("metadata") or {}).get("name"))):
        metadata = claim.get("metadata") or {}
        match = pattern.fullmatch(str(metadata.get("name", "")))
        owners = [ref.get("uid") for ref in metadata.get("ownerReferences") or []]
        if match is None or metadata.get("deletionTimestamp") or any(uid != stateful_set_uid for uid in owners):
            continue
        name, uid, ordinal = str(metadata["name"]), str(metadata.get("uid", "")), int(match.group(1))
        marked = (metadata.get("annotations") or {}).get(SCALED_DOWN_ANNOTATION)
        if ordinal < replicas:
            if marked is not None:
                plan.actions.append(ClaimAction("unmark", name, uid))
        elif marked is None:
            plan.actions.append(ClaimAction("mark", name, uid, now))
            plan.retained[name] = now
        elif _seconds_between(marked, now) > rules.retain_seconds:
            plan.actions.append(ClaimAction("delete", name, uid))
        else:
            plan.retained[name] = marked
    return plan


def _seconds_between(earlier: str, later: str) -> float:
    """Seconds from ``earlier`` to ``later`` (RFC 3339); an unreadable mark counts as just made (kept)."""
    try:
        return seconds_between(earlier, later)
    except ValueError:
        return 0.0
