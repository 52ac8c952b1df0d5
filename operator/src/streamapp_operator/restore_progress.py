"""Restore progress per store: records restored, remaining, rate and estimated time left (``status.restore``).

The pods that are not ready report, per restoring task, ``restored_records`` and ``restore_remaining``
(``conditions.restore_view`` reads them from ``/status``). A task of sub-topology ``N`` (task id ``N_P``) restores
the stores of that sub-topology from partition ``P`` of their changelogs, so each entry names those stores
(the topology says which). The rate is the records restored between two reconciles over the time between them
(the previous ``status.restore`` keeps ``observedAt``), and the time left is ``remaining / rate``, much as Kafka
Streams' ``StateRestoreListener`` lets an application compute it. Pure: the reconcile passes what it observed
and what it wrote last.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from streamapp_operator.conditions import RestoreView
from streamapp_operator.times import seconds_between


def restore_progress(
    view: RestoreView | None,
    stores_of: Mapping[int, Sequence[str]],
    previous: Sequence[Mapping[str, Any]] | None,
    now: str,
) -> list[dict[str, Any]] | None:
    """One entry per restoring task (``pod``, ``task``, ``stores``, ``restored``, ``remaining``,
    ``ratePerSecond``, ``secondsLeft``, ``observedAt``), or None when nothing restores (the field is removed).

    ``stores_of`` maps a sub-topology id to its store names; ``previous`` is the last ``status.restore``
    (None: no rate yet); ``now`` RFC 3339. Rate and time left are None until two observations of the same
    task on the same pod exist, or when nothing was restored in between.
    """
    if view is None or not view.tasks:
        return None
    before = {(str(e.get("pod")), str(e.get("task"))): e for e in previous or [] if isinstance(e, Mapping)}
    entries = []
    for task in view.tasks:
        subtopology = task.task_id.split("_", 1)[0]
        stores = list(stores_of.get(int(subtopology), [])) if subtopology.isdigit() else []
        rate = _rate(before.get((task.pod, task.task_id)), task.restored, now)
        entries.append(
            {
                "pod": task.pod,
                "task": task.task_id,
                "stores": stores,
                "restored": task.restored,
                "remaining": task.remaining,
                "ratePerSecond": round(rate, 1) if rate else None,
                "secondsLeft": round(task.remaining / rate) if rate else None,
                "observedAt": now,
            }
        )
    return entries


def summary(entries: Sequence[Mapping[str, Any]] | None) -> str | None:
    """The ``RESTORE`` printer column: e.g. ``2 tasks, 120400 left, 4100/s, ~29s`` (None: nothing restores)."""
    if not entries:
        return None
    left = sum(int(e.get("remaining") or 0) for e in entries)
    text = f"{len(entries)} task{'s' if len(entries) != 1 else ''}, {left} left"
    rates = [float(e["ratePerSecond"]) for e in entries if e.get("ratePerSecond")]
    if rates and len(rates) == len(entries):
        seconds = max(int(e.get("secondsLeft") or 0) for e in entries)
        text += f", {round(sum(rates))}/s, ~{seconds}s"
    return text


def _rate(previous: Mapping[str, Any] | None, restored: int, now: str) -> float | None:
    if previous is None:
        return None
    try:
        elapsed = seconds_between(str(previous.get("observedAt")), now)
    except ValueError:
        return None
    done = restored - int(previous.get("restored") or 0)
    return done / elapsed if elapsed > 0 and done > 0 else None
