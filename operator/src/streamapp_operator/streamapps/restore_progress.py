"""Restore progress per store: records restored, remaining, rate and estimated time left (``status.restore``).

The pods that are not ready report, per restoring task, ``restored_records`` and ``restore_remaining``, and
(newer runtimes) per store of the task its changelog partition, records restored and left, its restore rate
over the last seconds and the time left (``pod_status.restore_view`` reads them from ``/status``), much as
Kafka Streams' ``StateRestoreListener`` sees a restore per store. ``status.restore`` has one entry per store.
A pod of an older runtime reports per task only: its entry is the task's, naming the stores of the task's
sub-topology (task id ``N_P`` restores the stores of sub-topology ``N`` from partition ``P`` of their
changelogs; the topology says which).

Where the pod gives no rate, the rate is the records restored between two reconciles over the time between
them (the previous ``status.restore`` keeps ``observedAt``), and the time left is ``remaining / rate``.

At most ``MAX_RESTORE_ENTRIES`` entries are listed (many pods x tasks x stores would make the object large):
those with the most records left; the last entry then has ``pod`` and ``task`` ``*``, ``omitted`` (how many
entries it stands for) and their sums, so the totals and the ``RESTORE`` column count everything. Pure: the
reconcile passes what it observed and what it wrote last.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from streamapp_operator.streamapps.pod_status import RestoreView, RestoringStore, RestoringTask
from streamapp_operator.streamapps.resources import MAX_RESTORE_ENTRIES
from streamapp_operator.times import seconds_between

#: ``pod`` and ``task`` of the entry summing up those not listed (required fields, also in older CRDs).
OMITTED = "*"


def restore_progress(
    view: RestoreView | None,
    stores_of: Mapping[int, Sequence[str]],
    previous: Sequence[Mapping[str, Any]] | None,
    now: str,
) -> list[dict[str, Any]] | None:
    """One entry per restoring store (``pod``, ``task``, ``store``, ``changelog``, ``restored``, ``remaining``,
    ``ratePerSecond``, ``secondsLeft``, ``observedAt``, and ``stores``: ``[store]``, so that readers of the
    per-task entries of earlier releases still find the store), or per restoring task of a pod that reports per
    task only (``stores`` without ``store`` and ``changelog``); None when nothing restores (the field is removed).

    ``stores_of`` maps a sub-topology id to its store names; ``previous`` is the last ``status.restore``
    (None: no rate yet); ``now`` RFC 3339. Rate (records/s, to 0.1) and time left (s) are None until the pod
    reports a rate or two observations of the same store (task) on the same pod exist, or when nothing was
    restored in between; a store with nothing left has 0 seconds left. Entries are ordered by pod, task and
    store, at most ``MAX_RESTORE_ENTRIES`` of them (see the module).
    """
    if view is None or not view.tasks:
        return None
    before = {_key(e): e for e in previous or [] if isinstance(e, Mapping) and e.get("omitted") is None}
    entries: list[dict[str, Any]] = []
    for task in view.tasks:
        if task.stores:
            entries.extend(_store_entry(task, store, before, now) for store in task.stores)
        else:
            entries.append(_task_entry(task, stores_of, before, now))
    entries.sort(key=_key)
    return _bounded(entries, now)


def summary(entries: Sequence[Mapping[str, Any]] | None) -> str | None:
    """The ``RESTORE`` printer column: records left over every entry and, when each entry with records left
    has an estimate, the longest time left (the stores restore side by side): e.g. ``12,000 left ~8s``
    (None: nothing restores)."""
    if not entries:
        return None
    left = sum(int(e.get("remaining") or 0) for e in entries)
    text = f"{left:,} left"
    estimates = [e.get("secondsLeft") for e in entries if int(e.get("remaining") or 0) > 0]
    if estimates and all(isinstance(seconds, int | float) for seconds in estimates):
        text += f" ~{max(int(seconds) for seconds in estimates if seconds is not None)}s"
    return text


def _store_entry(
    task: RestoringTask, store: RestoringStore, before: Mapping[tuple[str, str, str], Mapping[str, Any]], now: str
) -> dict[str, Any]:
    rate = store.records_per_second
    if rate is None:
        rate = _rate(before.get((task.pod, task.task_id, store.store)), store.restored, now)
    entry: dict[str, Any] = {"pod": task.pod, "task": task.task_id, "store": store.store, "stores": [store.store]}
    if store.changelog:
        entry["changelog"] = store.changelog
    return entry | _figures(store.restored, store.remaining, rate, now)


def _task_entry(
    task: RestoringTask,
    stores_of: Mapping[int, Sequence[str]],
    before: Mapping[tuple[str, str, str], Mapping[str, Any]],
    now: str,
) -> dict[str, Any]:
    subtopology = task.task_id.split("_", 1)[0]
    stores = list(stores_of.get(int(subtopology), [])) if subtopology.isdigit() else []
    rate = _rate(before.get((task.pod, task.task_id, "")), task.restored, now)
    return {"pod": task.pod, "task": task.task_id, "stores": stores} | _figures(
        task.restored, task.remaining, rate, now
    )


def _figures(restored: int, remaining: int, rate: float | None, now: str) -> dict[str, Any]:
    seconds_left = 0 if remaining == 0 else round(remaining / rate) if rate else None
    return {
        "restored": restored,
        "remaining": remaining,
        "ratePerSecond": round(rate, 1) if rate else None,
        "secondsLeft": seconds_left,
        "observedAt": now,
    }


def _bounded(entries: list[dict[str, Any]], now: str) -> list[dict[str, Any]]:
    """At most ``MAX_RESTORE_ENTRIES``: those with the most left, then one entry summing up the others."""
    if len(entries) <= MAX_RESTORE_ENTRIES:
        return entries
    ranked = sorted(entries, key=lambda e: -int(e["remaining"]))
    listed, rest = ranked[: MAX_RESTORE_ENTRIES - 1], ranked[MAX_RESTORE_ENTRIES - 1 :]
    listed.sort(key=_key)
    rates = [e["ratePerSecond"] for e in rest if e["ratePerSecond"]]
    left = [e["secondsLeft"] for e in rest if e["remaining"] > 0]
    more = {
        "pod": OMITTED,
        "task": OMITTED,
        "omitted": len(rest),
        "restored": sum(int(e["restored"]) for e in rest),
        "remaining": sum(int(e["remaining"]) for e in rest),
        "ratePerSecond": round(sum(rates), 1) if rates else None,
        "secondsLeft": max(left, default=0) if all(s is not None for s in left) else None,
        "observedAt": now,
    }
    return [*listed, more]


def _key(entry: Mapping[str, Any]) -> tuple[str, str, str]:
    """An entry's ``(pod, task, store)``: what matches it with the previous look, and the order of the list."""
    return str(entry.get("pod")), str(entry.get("task")), str(entry.get("store") or "")


def _rate(previous: Mapping[str, Any] | None, restored: int, now: str) -> float | None:
    if previous is None:
        return None
    try:
        elapsed = seconds_between(str(previous.get("observedAt")), now)
    except ValueError:
        return None
    done = restored - int(previous.get("restored") or 0)
    return done / elapsed if elapsed > 0 and done > 0 else None
