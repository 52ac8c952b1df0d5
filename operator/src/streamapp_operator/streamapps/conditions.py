"""Status of a StreamApp: conditions, replica counts and Kafka figures, computed from plain data.

Conditions follow the Kubernetes API conventions: every condition is written on every visit (``Unknown``
when it cannot be decided), ``lastTransitionTime`` changes only when ``status`` changes, and each carries
the ``observedGeneration`` it was computed for.

- ``Ready``: the StatefulSet runs the current spec and every desired pod passes its readiness probe
  (the runtime's ``/readyz``: all assigned tasks restored and running).
- ``Progressing``: pods are being created, updated or scaled towards the current spec.
- ``Degraded``: something blocks the spec (invalid spec or topology, missing topics, Kafka unreachable,
  an object the API server rejects, an object or id someone else owns), or pods fail in a way that does
  not heal by itself (crash loop, image not pullable), or a stream thread inside a pod keeps failing (read
  from the pods' ``/status``: ``pod_status.failing_threads``); the message says what.
- ``TopologyValid``: the topology parses and fits the Kafka topics; ``Unknown`` while it cannot be checked.
- ``Restoring``: some pod's tasks are restoring their state stores from the changelogs (read from the
  ``/status`` of the pods that are not ready, see ``pod_status.restore_view``); the message names the pods, tasks
  and records left. ``Unknown`` when a pod that is not ready cannot be asked.
- ``ScalingLimited`` (as the HorizontalPodAutoscaler's condition of that name): ``True`` with reason
  ``IdleThreads`` when ``replicas x threads`` exceeds the topology's task count, so that some stream threads get
  no task and scaling further out adds nothing (Kafka Streams assigns at most one thread per task);
  ``Unknown`` while the task count is not known.
- ``RecordsDropped``: ``True`` when the records the pods dropped (late, null key or value, invalid timestamp,
  deserialization or processing errors skipped by a handler) grew since the previous observation; the message
  names the reasons with their growth and totals (``streamapp_operator.streamapps.dropped_records``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from streamapp_operator.outcomes import Condition, Event, Problem, set_condition, transition
from streamapp_operator.streamapps.pod_status import RestoreView, RestoringTask, failing_pod_names

READY = "Ready"
PROGRESSING = "Progressing"
DEGRADED = "Degraded"
TOPOLOGY_VALID = "TopologyValid"
RESTORING = "Restoring"
SCALING_LIMITED = "ScalingLimited"
RECORDS_DROPPED = "RecordsDropped"
IDLE_THREADS = "IdleThreads"
CONDITION_TYPES = (READY, PROGRESSING, DEGRADED, TOPOLOGY_VALID, RESTORING, SCALING_LIMITED, RECORDS_DROPPED)
DROPS_NOT_OBSERVED = ("Unknown", "NotObserved", "no pod's /status was read")


@dataclass(frozen=True)
class Rollout:
    """The StatefulSet's progress towards ``desired`` pods of the current template."""

    desired: int
    replicas: int
    ready: int
    updated: int
    current: bool
    """The StatefulSet controller has seen the latest StatefulSet spec and finished the revision update."""

    @property
    def complete(self) -> bool:
        return self.current and self.updated == self.desired and self.replicas == self.desired

    @property
    def all_ready(self) -> bool:
        return self.complete and self.ready == self.desired


def rollout(stateful_set: dict[str, Any] | None, desired: int) -> Rollout | None:
    """Progress of a StatefulSet as served by the API server; None when it does not exist."""
    if stateful_set is None:
        return None
    status = stateful_set.get("status") or {}
    generation = stateful_set.get("metadata", {}).get("generation", 0)
    update_revision = status.get("updateRevision")
    current = status.get("observedGeneration", 0) >= generation and (
        update_revision is None or status.get("currentRevision") == update_revision or desired == 0
    )
    return Rollout(
        desired=desired,
        replicas=status.get("replicas", 0),
        ready=status.get("readyReplicas", 0),
        updated=status.get("updatedReplicas", 0) if desired else 0,
        current=current,
    )


@dataclass(frozen=True)
class Health:
    """What the conditions are decided from: the StreamApp's ``generation``, the ``problems`` that block the
    spec, the StatefulSet's ``progress`` (None: none), whether the topology's topics were checked, the pods
    failing (``pod_status.failing_pods``, creation failures, ``unscheduled``: the pods no node can take, which
    are failing too, ``pod_status.unschedulable_pods``) and the stream threads failing in them
    (``pod_status.failing_threads``), which degrade the app without blocking, what the pods report about restoration
    (``pod_status.restore_view``; None: the pods were not asked), the stream threads against the tasks (``capacity``;
    None: the task count is not known) and ``RecordsDropped`` as ``dropped_records.dropped_records`` decided it."""

    generation: int
    problems: Sequence[Problem]
    progress: Rollout | None
    topology_checked: bool
    failing: Sequence[str] = ()
    unscheduled: Sequence[str] = ()
    restore: RestoreView | None = None
    threads: Sequence[str] = ()
    capacity: Capacity | None = None
    drops: tuple[str, str, str] = DROPS_NOT_OBSERVED


def conditions(health: Health, previous: Sequence[dict[str, Any]], now: str) -> list[dict[str, Any]]:
    """The conditions, in ``CONDITION_TYPES`` order, of ``health`` against the ``previous`` ones; ``now`` is an
    RFC 3339 timestamp (``lastTransitionTime`` of a condition whose status changed)."""
    generation, problems, progress = health.generation, health.problems, health.progress
    failing, restore, threads = health.failing, health.restore, health.threads
    before = {c.get("type"): c for c in previous}

    def make(kind: str, status: str, reason: str, message: str) -> dict[str, Any]:
        return transition(before.get(kind), Condition(kind, status, reason, message, generation), now)

    return [
        make(READY, *_ready(problems, progress, [*failing, *threads])),
        make(PROGRESSING, *_progressing(problems, progress, health.unscheduled)),
        make(DEGRADED, *_degraded(problems, failing, threads)),
        make(TOPOLOGY_VALID, *_topology_valid(problems, health.topology_checked)),
        make(RESTORING, *_unobserved_restore(_restoring(restore), before.get(RESTORING))),
        make(SCALING_LIMITED, *_scaling_limited(health.capacity)),
        make(RECORDS_DROPPED, *health.drops),
    ]


@dataclass(frozen=True)
class Capacity:
    """Stream threads the spec runs (``replicas`` x ``threads``) against the topology's ``tasks``."""

    replicas: int
    threads: int
    tasks: int

    @property
    def idle(self) -> int:
        """Stream threads that can get no task."""
        return max(0, self.replicas * self.threads - self.tasks)


def _scaling_limited(capacity: Capacity | None) -> tuple[str, str, str]:
    if capacity is None:
        return "Unknown", "TasksUnknown", "the topology's task count is not known"
    threads = capacity.replicas * capacity.threads
    counts = f"{capacity.replicas} replicas x {capacity.threads} threads = {threads} stream threads"
    counts += f" for {capacity.tasks} tasks"
    if capacity.idle:
        return "True", IDLE_THREADS, f"{counts}: {capacity.idle} stream threads idle; scale in or add partitions"
    return "False", "WithinTaskCount", counts


def announce_rollout(
    previous: Sequence[dict[str, Any]], generation: int, message: str, now: str
) -> list[dict[str, Any]]:
    """``previous`` conditions with Progressing set to True (reason ``RollingOut``): the intent written to
    status before pods are replaced, so that a crash in between leaves a truthful status behind."""
    return set_condition(
        previous, Condition(PROGRESSING, "True", "RollingOut", message, generation), now, condition_order
    )


def condition_order(kind: str) -> int:
    """Position of a condition type in ``CONDITION_TYPES`` (unknown types last)."""
    return CONDITION_TYPES.index(kind) if kind in CONDITION_TYPES else len(CONDITION_TYPES)


def _ready(problems: Sequence[Problem], progress: Rollout | None, failing: Sequence[str]) -> tuple[str, str, str]:
    if problems:
        return "False", problems[0].reason, _joined(problems)
    if progress is None:
        return "False", "StatefulSetMissing", "the StatefulSet does not exist yet"
    counts = f"{progress.ready}/{progress.desired} pods ready"
    if progress.all_ready:
        return "True", "AllReplicasReady", counts
    return "False", "ReplicasNotReady", "; ".join([counts, *failing])


def _progressing(
    problems: Sequence[Problem], progress: Rollout | None, unscheduled: Sequence[str]
) -> tuple[str, str, str]:
    if problems:
        return "False", "ReconcileBlocked", "the spec cannot be applied until the Degraded condition is resolved"
    if progress is None:
        return "True", "Creating", "creating the StatefulSet"
    if not progress.complete:
        message = (
            f"{progress.updated}/{progress.desired} pods updated, {progress.replicas} pods exist, "
            f"{progress.ready} ready"
        )
        return "True", "RollingOut", message
    if unscheduled:  # created with the current spec, but not running it: the rollout is stuck, not complete
        pods = ", ".join(sorted(failing_pod_names(unscheduled)))
        return "False", "PodsUnschedulable", f"no node can take pod {pods} (Degraded says why)"
    return "False", "RolloutComplete", f"every pod runs the current spec ({progress.desired} desired)"


def _degraded(problems: Sequence[Problem], failing: Sequence[str], threads: Sequence[str]) -> tuple[str, str, str]:
    if problems:
        return "True", problems[0].reason, _joined(problems)
    if failing:
        return "True", "PodsFailing", "; ".join([*failing, *threads])
    if threads:
        return "True", "StreamThreadsFailing", "; ".join(threads)
    return "False", "AsExpected", ""


def _topology_valid(problems: Sequence[Problem], checked: bool) -> tuple[str, str, str]:
    invalid = [p for p in problems if p.topology]
    if invalid:
        return "False", invalid[0].reason, _joined(invalid)
    if checked:
        return "True", "Valid", "the topology is valid and its source topics exist"
    return "Unknown", "NotChecked", "the topology could not be checked against Kafka"


RESTORE_UNOBSERVED = "RestoreUnobserved"


def _unobserved_restore(restoring: tuple[str, str, str], old: dict[str, Any] | None) -> tuple[str, str, str]:
    """An Unknown that follows a restore in progress (True, or an Unknown that did) says so by its reason, so that
    the restore seen again is not announced a second time (``condition_events``)."""
    status, _, message = restoring
    if (
        status == "Unknown"
        and old is not None
        and (old.get("status") == "True" or old.get("reason") == RESTORE_UNOBSERVED)
    ):
        return status, RESTORE_UNOBSERVED, message
    return restoring


def _restoring(restore: RestoreView | None) -> tuple[str, str, str]:
    if restore is None:
        return "Unknown", "NotObserved", "the pods' /status was not read"
    if restore.tasks:
        by_pod: dict[str, list[RestoringTask]] = {}
        for task in restore.tasks:
            by_pod.setdefault(task.pod, []).append(task)
        parts = []
        for pod, tasks in by_pod.items():
            left = sum(t.remaining for t in tasks)
            parts.append(f"pod {pod} restores tasks {', '.join(t.task_id for t in tasks)} ({left} records left)")
        if restore.unreadable:
            parts.append(f"/status unreadable: pods {', '.join(restore.unreadable)}")
        return "True", "RestoringState", "; ".join(parts)
    if restore.unreadable:
        detail = "; ".join(f"pod {pod}: {why}" for pod, why in restore.unreadable.items())
        return "Unknown", "InstanceStatusUnavailable", f"cannot read /status of pods that are not ready: {detail}"
    return "False", "NoRestore", "no pod is restoring state"


def _joined(problems: Sequence[Problem]) -> str:
    return "; ".join(p.message for p in problems)


def ready_text(ready: int, desired: int) -> str:
    """The READY printer column: ``"<ready pods>/<desired pods>"``."""
    return f"{ready}/{desired}"


def condition_events(previous: Sequence[dict[str, Any]], current: Sequence[dict[str, Any]]) -> list[Event]:
    """Events for condition changes worth a human's attention (not one per timer tick)."""
    before = {c.get("type"): c for c in previous}
    after = {c["type"]: c for c in current}
    events = []
    old, new = before.get(DEGRADED, {}), after[DEGRADED]
    if new["status"] == "True" and (old.get("status") != "True" or old.get("message") != new["message"]):
        events.append(Event("Warning", new["reason"], new["message"]))
    elif new["status"] == "False" and old.get("status") == "True":
        events.append(Event("Normal", "Recovered", "the StreamApp is no longer degraded"))
    old, new = before.get(READY, {}), after[READY]
    if new["status"] == "True" and old.get("status") != "True":
        events.append(Event("Normal", "Ready", new["message"]))
    old, new = before.get(SCALING_LIMITED, {}), after[SCALING_LIMITED]
    if new["status"] == "True" and (old.get("status") != "True" or old.get("message") != new["message"]):
        events.append(Event("Warning", new["reason"], new["message"]))
    old, new = before.get(RECORDS_DROPPED, {}), after.get(RECORDS_DROPPED, {})
    if new.get("status") == "True" and old.get("status") != "True":
        events.append(Event("Warning", RECORDS_DROPPED, new["message"]))
    old, new = before.get(RESTORING, {}), after[RESTORING]
    # not again after an Unknown during the same restore (a /status that could not be read for a while)
    if new["status"] == "True" and old.get("status") != "True" and old.get("reason") != RESTORE_UNOBSERVED:
        events.append(Event("Normal", "RestoreStarted", new["message"]))
    elif new["status"] == "False" and old.get("status") == "True":
        events.append(Event("Normal", "RestoreFinished", "every task has restored its state"))
    return events
