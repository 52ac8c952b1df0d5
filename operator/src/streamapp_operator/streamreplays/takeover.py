"""``handover.outputs: TakeOver``: the new version writes the old version's output topics, from the switch on, so
consumers downstream need not move (pure decisions).

The switch is a stop: before the replay's range is resolved, the old version is scaled to 0 replicas
(``/scale``, as ``kubectl scale``) and awaited until it has no pod and its consumer group no member. Its
committed offsets are then where it stopped: every input record before them has its output records in the
taken-over topics, none after (its pods closed cleanly: Kafka Streams commits on close; under
``exactly_once_v2`` a record's output and its offset commit are one transaction). So:

- the replay's range ends there (:func:`switch_offsets`), whatever ``spec.to`` says (the CRD requires ``now``);
- the replay's Job runs the new topology without the sinks into taken-over topics (:func:`without_sinks`): it
  fills the new version's stores (changelogs) and its new outputs, and writes nothing where the old version's
  records already are;
- the new version's consumer group starts at the switch offsets (``setGroupOffsets``), so its first output record
  per key follows the old version's last: none lost, none twice (per key, in input order);
- until the new version exists a failure (or deleting the StreamReplay) scales the old version back to its
  replicas, recorded in ``status.takeOver`` before it was stopped: it goes on from where it stopped.

The price is the stop: the taken-over topics get no new record while the replay runs (input records wait in
their topics, as lag). A switch without a stop would need the new version to process from the replay's end to
the old version's stop without writing the taken-over topics, a runtime feature this does not assume.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

Offsets = dict[str, dict[int, int]]

TAKE_OVER_UNSUPPORTED = "TakeOverUnsupported"


def without_sinks(topology: Mapping[str, Any], topics: Iterable[str]) -> dict[str, Any]:
    """The topology document without its sink nodes into ``topics``. A sink is a leaf: no other node, no store and
    no internal topic name depends on it, so the stores and their changelogs are the full topology's."""
    doomed = set(topics)
    nodes = [
        dict(node)
        for node in topology.get("nodes") or []
        if not (node.get("type") == "sink" and node.get("topic") in doomed)
    ]
    return {**topology, "nodes": nodes}


def switch_offsets(committed: Mapping[str, Mapping[int, int]], earliest: Mapping[str, Mapping[int, int]]) -> Offsets:
    """Per input partition, the offset the old version stopped at: its committed offset, or the partition's
    earliest offset where it committed none (Kafka Streams' ``auto.offset.reset: earliest``: it read nothing
    there)."""
    return {
        topic: {p: int(committed.get(topic, {}).get(p, start)) for p, start in sorted(parts.items())}
        for topic, parts in sorted(earliest.items())
    }


def stopped(app: Mapping[str, Any] | None, members: Iterable[str]) -> tuple[bool, str]:
    """Whether the old version is stopped (the StreamApp reports no pod and its group has no member), and what it
    waits for otherwise."""
    if app is None:
        return True, "the old version is gone"
    status = app.get("status") or {}
    pods = status.get("replicas")
    if pods is None or pods > 0:
        return False, f"the old version is stopping: {pods if pods is not None else '?'} pod(s) left"
    left = sorted(members)
    if left:
        return False, f"the old version is stopping: its consumer group still has members {', '.join(left)}"
    return True, "the old version is stopped"


def refusal(app_spec: Mapping[str, Any]) -> str | None:
    """Why the old version cannot be stopped by scaling it to 0 replicas, or None: an autoscaled app's replicas are
    the autoscaler's, not ``spec.replicas``."""
    if app_spec.get("autoscaling"):
        return (
            "handover.outputs TakeOver stops the old version by scaling it to 0 replicas, which spec.autoscaling "
            "would undo: remove spec.autoscaling from the app first, or write new output topics (outputs: New)"
        )
    return None


def replicas_to_restore(status: Mapping[str, Any]) -> int | None:
    """The old version's replicas to scale it back to when its StreamReplay is deleted (or fails) in the middle of
    a TakeOver handover, or None: nothing was stopped, it is restored already, or the new version was created (it
    writes the taken-over topics now: scaling the old one back would make two writers)."""
    recorded = status.get("takeOver") or {}
    if not recorded or recorded.get("state") == "Restored":
        return None
    steps = {step.get("name"): step.get("state") for step in status.get("handover") or []}
    if steps.get("createNewVersion") is not None or status.get("newVersionUid"):
        return None
    return int(recorded["replicas"])
