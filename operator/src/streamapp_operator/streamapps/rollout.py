"""Rollouts that do not storm: the operator hands the StatefulSet's pods to the new template one at a time.

The StatefulSet uses a *partitioned* rolling update (docs/adr/0009-operator-driven-rollouts.md): the StatefulSet
controller replaces only the pods whose ordinal is at or above ``spec.updateStrategy.rollingUpdate.partition``.
A change of the pod template is applied with the partition at ``replicas`` (no pod is replaced), then
:func:`plan_rollout` lowers the partition by one, highest ordinal first as the StatefulSet controller would, and
only when the app is calm again after the previous pod:

- every desired pod exists, none is terminating, and every pod at or above the partition runs the StatefulSet's
  ``status.updateRevision`` (label ``controller-revision-hash``);
- every pod is Ready: the runtime's ``/readyz`` is green only when every stream thread is in the consumer group
  and every task it owns is restored and running, so the replaced pod's tasks are restored and running;
- no pod reports a restoring task in its ``/status`` (the ``Restoring`` view) and the consumer group is
  ``Stable`` (read from Kafka).

A broken app is not protected from its fix (the StatefulSet documentation's *forced rollback* case): pods that are
not Ready because they crash (a container in CrashLoopBackOff and the like, or stream threads that keep failing,
``pod_status.failing_pods`` / ``failing_threads``) hold nothing back, so the gate above waits only on the healthy
pods (and not on the consumer group, which a crash-looping member keeps unsettled); when no pod is Ready at all,
the partition goes to 0 at once and the StatefulSet controller replaces every pod (highest ordinal first, each
after the one before is healthy: ``podManagementPolicy: Parallel`` keeps a broken pod from blocking it).

The partition lives in the StatefulSet, so the API server keeps the rollout's progress: an operator killed
mid-rollout reads it back and goes on, and because a pod is handed over only when every pod is Ready and at
the revision its ordinal calls for, it can never hand over a second pod while the first is still down.
Static membership (``group.instance.id`` = pod name) keeps the replaced pod's partitions assigned to it while
it restarts, for the broker's ``group.consumer.session.timeout.ms`` (45 s by default), so the other pods do not
rebalance. A pod removed by a scale-down, on the other hand, must leave at once: :func:`departed_members` names
the static members whose pods a scale-down removed, which ``reconcile.release_departed_members`` removes from
the group. Everything here is pure; the steps do the side effects.

Pace: the reconcile runs on changes and on a 10 s timer, which would make each pod of a rollout wait up to 10 s
after the previous one is back. While :func:`in_progress` (``status.rollout`` is set) a second timer reconciles
every ``ROLLOUT_INTERVAL`` seconds (``main.advance_rollout``), so the next pod goes within that time of the app
being calm again; it stops with the rollout.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: The label the StatefulSet controller puts on each pod: the ControllerRevision the pod was created from.
REVISION_LABEL = "controller-revision-hash"
#: The consumer group's state (Kafka's spelling) in which no assignment is moving.
STABLE = "Stable"
#: Seconds between two reconciles while a rollout is in progress (the readiness checks are re-read this often).
ROLLOUT_INTERVAL = 2.0


@dataclass(frozen=True)
class PodState:
    """One pod of the app as the API server serves it: its ordinal, revision, readiness."""

    name: str
    ordinal: int
    revision: str | None
    ready: bool
    terminating: bool


@dataclass(frozen=True)
class RolloutPlan:
    """What this reconcile does to the rollout.

    ``hold``: the partition the StatefulSet is applied with first (no pod replaced by it); ``partition``: the
    partition after this reconcile (``hold - 1`` when a pod is handed over, else ``hold``); ``replacing``: the
    pod handed to the StatefulSet controller now (None: none); ``waiting``: why the rollout does not move ("" when
    it moves or nothing rolls); ``status``: ``status.rollout`` (None: no rollout in progress, the field is
    deleted).
    """

    hold: int
    partition: int
    replacing: str | None = None
    waiting: str = ""
    status: dict[str, Any] | None = None
    forced: str = ""
    """Why the gate was passed although pods are not Ready (the forced rollback of a broken app; "" when not)."""


def in_progress(status: Mapping[str, Any] | None) -> bool:
    """Whether the StreamApp's ``status`` records a rollout in progress (``status.rollout`` set; it is removed
    when the rollout is done)."""
    return bool((status or {}).get("rollout"))


def with_partition(stateful_set: Mapping[str, Any], partition: int) -> dict[str, Any]:
    """A copy of a StatefulSet manifest with its rolling update's ``partition`` set."""
    manifest = copy.deepcopy(dict(stateful_set))
    manifest["spec"]["updateStrategy"] = {"type": "RollingUpdate", "rollingUpdate": {"partition": partition}}
    return manifest


def pod_states(pods: Sequence[Mapping[str, Any]]) -> list[PodState]:
    """The StatefulSet pods among ``pods`` (name ``<app>-<ordinal>``), by ordinal."""
    states = []
    for pod in pods:
        metadata, status = pod.get("metadata") or {}, pod.get("status") or {}
        name = str(metadata.get("name", ""))
        head, _, tail = name.rpartition("-")
        if not head or not tail.isdigit():
            continue
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
        revision = (metadata.get("labels") or {}).get(REVISION_LABEL)
        states.append(PodState(name, int(tail), revision, ready, bool(metadata.get("deletionTimestamp"))))
    return sorted(states, key=lambda p: p.ordinal)


def partition_of(stateful_set: Mapping[str, Any] | None) -> int:
    """The StatefulSet's ``spec.updateStrategy.rollingUpdate.partition`` (0 when unset or absent)."""
    strategy = ((stateful_set or {}).get("spec") or {}).get("updateStrategy") or {}
    partition = (strategy.get("rollingUpdate") or {}).get("partition")
    return partition if type(partition) is int and partition > 0 else 0


@dataclass(frozen=True)
class RolloutInputs:
    """What a rollout step is decided from, for StatefulSet ``name`` of ``replicas`` pods towards pod template
    digest ``target``.

    ``template_changes``: the desired pod template differs from the applied one (``desired.rolls_pods``);
    ``stateful_set`` as served (None: not created yet); ``pods`` from :func:`pod_states`; ``group_state`` the
    consumer group's state (None: Kafka not read); ``restoring`` the pods that report restoring tasks;
    ``failing`` the pods that crash (see the module docstring: they are replaced without waiting for them, all
    at once when no pod is Ready).
    """

    name: str
    replicas: int
    target: str
    template_changes: bool
    stateful_set: Mapping[str, Any] | None
    pods: Sequence[PodState]
    group_state: str | None
    restoring: Sequence[str]
    failing: Collection[str] = ()


@dataclass(frozen=True)
class _Position:
    """Where a rollout stands: the partition, the pods updated, the pod being replaced, since when, and what it
    waits for."""

    partition: int
    updated: int
    replacing: Any
    since: str
    waiting: str

    def status(self, inputs: RolloutInputs) -> dict[str, Any]:
        """``status.rollout``."""
        return {
            "targetRevision": inputs.target,
            "partition": self.partition,
            "updated": self.updated,
            "total": inputs.replicas,
            "replacing": self.replacing,
            "since": self.since,
            "waitingFor": self.waiting,
        }


def plan_rollout(inputs: RolloutInputs, previous: Mapping[str, Any] | None, now: str) -> RolloutPlan:
    """The next step of the rollout ``inputs`` describe; ``previous`` the last ``status.rollout``; ``now`` RFC 3339
    (``since`` of a replacement)."""
    name, replicas, stateful_set, pods = inputs.name, inputs.replicas, inputs.stateful_set, inputs.pods
    failing = inputs.failing
    if stateful_set is None or replicas == 0:
        return RolloutPlan(0, 0)
    if inputs.template_changes:
        if not pods:  # nothing runs the old template: the StatefulSet controller creates the pods anew
            return RolloutPlan(0, 0)
        status = _Position(replicas, 0, None, now, "the new pod template is applied; no pod replaced yet").status(
            inputs
        )
        return RolloutPlan(replicas, replicas, None, status["waitingFor"], status)
    hold = min(partition_of(stateful_set), replicas)
    if hold == 0:
        return RolloutPlan(0, 0)
    sts_status = stateful_set.get("status") or {}
    revision = sts_status.get("updateRevision")
    current = [p for p in pods if p.ordinal < replicas]
    updated = sum(1 for p in current if revision is not None and p.revision == revision)
    if current and not any(p.ready for p in current) and _settled(stateful_set):
        pods_named = ", ".join(p.name for p in current)
        why = f"no pod is ready ({', '.join(sorted(failing)) or 'none crashes'}): every pod is replaced at once"
        status = _Position(0, updated, pods_named, now, "").status(inputs)
        return RolloutPlan(hold, 0, pods_named, "", status, forced=why)
    healthy = [p for p in current if p.name not in failing]
    waiting = _waiting(inputs, hold, current, healthy)
    last = previous or {}
    if waiting:
        since = str(last.get("since") or now)
        status = _Position(hold, updated, last.get("replacing"), since, waiting).status(inputs)
        return RolloutPlan(hold, hold, None, waiting, status)
    pod = f"{name}-{hold - 1}"
    status = _Position(hold - 1, updated, pod, now, f"pod {pod} is being replaced").status(inputs)
    forced = f"not waiting for crashing pods {', '.join(sorted(failing))}" if failing else ""
    return RolloutPlan(hold, hold - 1, pod, "", status, forced=forced)


def _settled(stateful_set: Mapping[str, Any]) -> bool:
    """Whether the StatefulSet controller observed the applied template (its update revision is known)."""
    sts_status = stateful_set.get("status") or {}
    generation = (stateful_set.get("metadata") or {}).get("generation", 0)
    return sts_status.get("observedGeneration", 0) >= generation and bool(sts_status.get("updateRevision"))


def _waiting(inputs: RolloutInputs, partition: int, pods: Sequence[PodState], healthy: Sequence[PodState]) -> str:
    """Why the next pod may not be handed over yet ("" when it may), ``pods`` the StatefulSet's below ``replicas``.
    Readiness and restoration are asked of the ``healthy`` pods only; the consumer group is not asked while a pod
    in ``inputs.failing`` crashes (it cannot settle)."""
    name, replicas, group_state, failing = inputs.name, inputs.replicas, inputs.group_state, inputs.failing
    stateful_set = inputs.stateful_set
    assert stateful_set is not None
    if not _settled(stateful_set):
        return "the StatefulSet controller has not observed the new pod template yet"
    revision = (stateful_set.get("status") or {})["updateRevision"]
    by_ordinal = {p.ordinal: p for p in pods}
    for ordinal in range(replicas):
        pod = by_ordinal.get(ordinal)
        if pod is None or pod.terminating:
            return f"pod {name}-{ordinal} is being replaced"
        if ordinal >= partition and pod.revision != revision:
            return f"pod {pod.name} does not run revision {revision} yet"
    for pod in healthy:
        if not pod.ready:
            return f"pod {pod.name} is not ready (its tasks are not all restored and running)"
    restoring = [pod for pod in inputs.restoring if pod not in failing]
    if restoring:
        return f"pods {', '.join(restoring)} restore state"
    if failing:
        return ""
    if group_state is None:
        return "the consumer group's state is unknown (Kafka not read)"
    if group_state != STABLE:
        return f"the consumer group is {group_state}, not {STABLE}"
    return ""


def departed_members(
    instance_ids: Sequence[str | None], name: str, replicas: int, pods: Sequence[PodState]
) -> list[str]:
    """The ``group.instance.id``\\ s (``<pod>-<thread index>``, the runtime's static membership) of pods a scale-down
    removed for good: their ordinal is at or above ``replicas`` and the pod no longer exists (it has closed its
    clients). Their partitions must move now, not after the session timeout (``remove_static_members``). A pod
    below ``replicas`` that is away (a rollout or a crash restarts it) keeps its membership: its partitions wait
    for it."""
    pattern = re.compile(rf"{re.escape(name)}-(\d+)-\d+")
    present = {pod.name for pod in pods}
    departed = []
    for instance in instance_ids:
        match = pattern.fullmatch(instance or "")
        if match is None or int(match.group(1)) < replicas:
            continue
        if f"{name}-{match.group(1)}" not in present:
            departed.append(str(instance))
    return sorted(departed)
