"""Dropped records of a StreamApp: summed by reason from its pods' ``/status``, and the ``RecordsDropped`` condition.

Each stream thread of a pod reports ``metrics.dropped_records_by_reason`` in the pod's ``/status`` (counts since the
thread started, reasons of ``streamapp.drop_reasons``; the runtime's supervisor restarts a failed thread, which
counts from zero again, and says so in ``workers[].restarts``). The operator reads the ``/status`` of the started
pods on every reconcile (``observe.observe_instances``, as it does for restore progress and failing threads) and
writes:

- ``status.droppedRecords``: per reason, the sum over the app's pods (the last counts read of a pod that could not
  be read this time stand in for it), e.g. ``{late: 12, nullKeyOrValue: 0, ...}``;
- ``status.droppedRecordsByPod``: the same per pod: what the next observation compares with;
- the condition ``RecordsDropped``: ``True`` (reason ``RecordsDropped``) when the counts grew since the previous
  observation (one reconcile ago, about 10 s), the message naming the reasons with their growth and totals,
  ``False`` (``NoNewDrops``) when they did not, ``Unknown`` (``NotObserved``) when no pod's ``/status`` was read.

Growth per pod and reason is ``max(0, now - before)``: exact while the pod's threads keep running; a lower bound
when a thread or the pod restarted in between (its count started again from zero), so that a restart never raises
a false ``RecordsDropped``. A pod seen for the first time counts all it reports (its threads started at zero).

Pure: plain documents in, plain status out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from streamapp.drop_reasons import DROP_REASONS, STATUS_KEYS

from streamapp_operator.streamapps.conditions import DROPS_NOT_OBSERVED, RECORDS_DROPPED

__all__ = [
    "MAX_PODS_KEPT",
    "RECORDS_DROPPED",
    "DroppedRecords",
    "PodDrops",
    "dropped_records",
    "pod_drops",
]

MAX_PODS_KEPT = 100
"""At most this many pods are kept in ``status.droppedRecordsByPod`` (the first by name)."""


@dataclass(frozen=True)
class PodDrops:
    """What one pod reports: records dropped per reason (runtime reason names) over its stream threads."""

    counts: Mapping[str, int]


def pod_drops(documents: Mapping[str, dict[str, Any] | str]) -> dict[str, PodDrops]:
    """The pods that answered ``/status`` (pod -> document, or pod -> why not) with their drops; a worker without
    ``metrics.dropped_records_by_reason`` (an older runtime) counts nothing, a malformed field is skipped."""
    found: dict[str, PodDrops] = {}
    for pod, document in documents.items():
        if not isinstance(document, dict) or not isinstance(workers := document.get("workers"), list):
            continue
        counts: dict[str, int] = {}
        for worker in workers:
            if not isinstance(worker, dict):
                continue
            metrics = worker.get("metrics")
            reported = metrics.get("dropped_records_by_reason") if isinstance(metrics, dict) else None
            if isinstance(reported, dict):
                for reason in DROP_REASONS:
                    counts[reason] = counts.get(reason, 0) + _count(reported.get(reason))
        found[pod] = PodDrops(counts)
    return found


@dataclass(frozen=True)
class DroppedRecords:
    """The status fields and the condition (status, reason, message) of one observation."""

    totals: dict[str, int]
    """``status.droppedRecords``: status key -> records."""
    by_pod: list[dict[str, Any]]
    """``status.droppedRecordsByPod``: ``{pod, <status key>: records, ...}`` per pod, by name."""
    condition: tuple[str, str, str]
    grown: dict[str, int] = field(default_factory=dict)
    """Growth since the previous observation per status key (only the reasons that grew)."""


def dropped_records(
    observed: Mapping[str, PodDrops] | None, pods: Sequence[str], previous_status: Mapping[str, Any]
) -> DroppedRecords:
    """The dropped-records status of an app whose pods are ``pods`` (names), given what the pods that answered
    reported (``observed``; None: the pods were not asked) and the previous status (its ``droppedRecordsByPod``)."""
    before = _previous(previous_status.get("droppedRecordsByPod"))
    current: dict[str, PodDrops] = {}
    grown = dict.fromkeys(DROP_REASONS, 0)
    for pod in sorted(set(pods))[:MAX_PODS_KEPT]:
        now = (observed or {}).get(pod)
        if now is None:
            if pod in before:
                current[pod] = before[pod]  # not read this time: its last counts stand in
            continue
        current[pod] = now
        for reason, records in _growth(before.get(pod), now).items():
            grown[reason] += records
    totals = {STATUS_KEYS[r]: sum(p.counts.get(r, 0) for p in current.values()) for r in DROP_REASONS}
    by_pod = [
        {"pod": pod, **{STATUS_KEYS[r]: drops.counts.get(r, 0) for r in DROP_REASONS}} for pod, drops in current.items()
    ]
    grew = {STATUS_KEYS[r]: n for r, n in grown.items() if n > 0}
    return DroppedRecords(totals, by_pod, _condition(observed, grew, totals), grew)


def _growth(before: PodDrops | None, now: PodDrops) -> dict[str, int]:
    """Records dropped per reason between two observations of a pod (see the module docstring)."""
    if before is None:
        return {reason: now.counts.get(reason, 0) for reason in DROP_REASONS}
    return {reason: max(0, now.counts.get(reason, 0) - before.counts.get(reason, 0)) for reason in DROP_REASONS}


def _condition(
    observed: Mapping[str, PodDrops] | None, grew: Mapping[str, int], totals: Mapping[str, int]
) -> tuple[str, str, str]:
    if not observed:
        return DROPS_NOT_OBSERVED
    total = ", ".join(f"{key} {n}" for key, n in totals.items() if n) or "none"
    if grew:
        growth = ", ".join(f"{key} +{n}" for key, n in grew.items())
        return "True", RECORDS_DROPPED, f"records dropped since the last observation: {growth} (totals: {total})"
    return "False", "NoNewDrops", f"no records dropped since the last observation (totals: {total})"


def _previous(entries: Any) -> dict[str, PodDrops]:
    """``status.droppedRecordsByPod`` as ``PodDrops`` per pod (malformed entries skipped)."""
    found: dict[str, PodDrops] = {}
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and isinstance(pod := entry.get("pod"), str):
            counts = {reason: _count(entry.get(STATUS_KEYS[reason])) for reason in DROP_REASONS}
            found[pod] = PodDrops(counts)
    return found


def _count(value: Any) -> int:
    return value if type(value) is int and value > 0 else 0
