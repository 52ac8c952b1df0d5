"""What the app's pods say about themselves, parsed from plain data: their Kubernetes status (crash loops, images
that cannot be pulled, pods the StatefulSet cannot create) and the runtime's ``/status`` documents (restoration per
task and store, stream threads that keep failing). Observation parsing for ``observe`` and ``conditions``; pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

#: Container waiting reasons that need a change (of image, spec or code) to go away.
FAILING_WAIT_REASONS = frozenset(
    {
        "CrashLoopBackOff",
        "ImagePullBackOff",
        "ErrImagePull",
        "ErrImageNeverPull",
        "InvalidImageName",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
    }
)


def failing_pods(pods: Sequence[dict[str, Any]]) -> list[str]:
    """One line per pod whose container is stuck in a failing state, e.g.
    ``pod app-0: CrashLoopBackOff (last exit code 1)``, with the last line of the container's termination
    message when it left one (``lastState.terminated.message``, bounded); pods being deleted are ignored.

    Restart counts are left out on purpose: the line must stay the same while the failure does, so that
    it does not change the Degraded message (and post an event) on every restart.
    """
    lines = []
    for pod in sorted(pods, key=lambda p: str(p.get("metadata", {}).get("name"))):
        metadata, status = pod.get("metadata", {}), pod.get("status") or {}
        if metadata.get("deletionTimestamp"):
            continue
        for container in status.get("containerStatuses") or []:
            waiting = (container.get("state") or {}).get("waiting") or {}
            reason = waiting.get("reason")
            if reason not in FAILING_WAIT_REASONS:
                continue
            terminated = (container.get("lastState") or {}).get("terminated") or {}
            detail = f"last exit code {terminated['exitCode']}" if "exitCode" in terminated else waiting.get("message")
            said = str(terminated.get("message") or "").strip().splitlines()
            if said:  # the container's termination message (/dev/termination-log): why it gave up
                detail = f"{detail}: {_bounded(said[-1], MAX_FAILURE_BYTES_PER_POD // 2)}"
            lines.append(f"pod {metadata.get('name')}: {reason}" + (f" ({detail})" if detail else ""))
    return lines


#: Seconds a pod stays ``PodScheduled=False`` (reason ``Unschedulable``) before it counts as failing: the scheduler
#: tries a pod again after a while (the local stack's scheduler after 15 s), and resources freed meanwhile fit it.
UNSCHEDULABLE_AFTER_SECONDS = 20.0
#: The same while the scheduler's reason is a claim not bound yet (``pod has unbound immediate
#: PersistentVolumeClaims``): a new state volume is being provisioned; one that never binds is said after this.
UNBOUND_CLAIM_AFTER_SECONDS = 120.0
UNBOUND_CLAIM = "unbound immediate PersistentVolumeClaims"


def unschedulable_pods(pods: Sequence[dict[str, Any]], now: float) -> list[str]:
    """One line per pod the scheduler has found no node for since at least ``UNSCHEDULABLE_AFTER_SECONDS`` before
    ``now`` (epoch seconds; ``UNBOUND_CLAIM_AFTER_SECONDS`` while it waits for its volume), with the scheduler's
    message, e.g. ``pod app-0: Unschedulable (0/1 nodes are available: 1 Insufficient memory. ...)``; pods being
    deleted are ignored. Its ``PodScheduled`` condition is ``False`` with reason ``Unschedulable`` (Kubernetes' pod
    conditions): the pod never starts until a node fits its requests, so it fails the app as a crash loop does (the
    audit's D-M4: it was a finished rollout)."""
    lines = []
    for pod in sorted(pods, key=lambda p: str(p.get("metadata", {}).get("name"))):
        metadata, status = pod.get("metadata", {}), pod.get("status") or {}
        if metadata.get("deletionTimestamp"):
            continue
        scheduled: dict[str, Any] = next(
            (c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), {}
        )
        if scheduled.get("status") != "False" or scheduled.get("reason") != "Unschedulable":
            continue
        said = " ".join(str(scheduled.get("message") or "").split())
        grace = UNBOUND_CLAIM_AFTER_SECONDS if UNBOUND_CLAIM in said else UNSCHEDULABLE_AFTER_SECONDS
        if now - _epoch({"lastTimestamp": scheduled.get("lastTransitionTime")}) < grace:
            continue
        detail = f" ({_bounded(said, MAX_FAILURE_BYTES_PER_POD // 2)})" if said else ""
        lines.append(f"pod {metadata.get('name')}: Unschedulable{detail}")
    return lines


#: A StatefulSet's ``FailedCreate`` event counts while at most this old (seconds): the controller retries
#: with backoff and posts it again while the cause lasts.
RECENT_EVENT_SECONDS = 300.0


def pod_creation_failures(
    stateful_set: Mapping[str, Any] | None, events: Sequence[Mapping[str, Any]], now: float
) -> list[str]:
    """One line when the StatefulSet cannot create its pods (admission refused them: Pod Security, a
    ResourceQuota, a LimitRange, a policy engine), from its recent ``FailedCreate`` events, e.g.
    ``StatefulSet app cannot create pods: ... exceeded quota ...``: otherwise the app would only look
    ``Progressing`` for ever. Nothing while every desired pod exists."""
    if not pods_missing(stateful_set):
        return []
    assert stateful_set is not None
    recent = [e for e in events if now - _epoch(e) <= RECENT_EVENT_SECONDS]
    if not recent:
        return []
    latest = max(recent, key=_epoch)
    name = stateful_set.get("metadata", {}).get("name")
    message = " ".join(str(latest.get("message", "")).split())
    return [_bounded(f"StatefulSet {name} cannot create pods: {message}", MAX_FAILURE_BYTES_PER_POD)]


def pods_missing(stateful_set: Mapping[str, Any] | None) -> bool:
    """Whether the StatefulSet has fewer pods than it wants."""
    if stateful_set is None:
        return False
    wanted = (stateful_set.get("spec") or {}).get("replicas", 0)
    return bool((stateful_set.get("status") or {}).get("replicas", 0) < wanted)


def _epoch(event: Mapping[str, Any]) -> float:
    stamp = event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp") or ""
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


@dataclass(frozen=True)
class RestoringStore:
    """One store of a restoring task, as the pod reports it (``tasks[].stores[]`` of its ``/status``)."""

    store: str
    changelog: str
    """Its changelog partition, ``topic-partition``."""
    restored: int
    remaining: int
    records_per_second: float | None = None
    """The pod's restore rate of the store over its last seconds (None: not known yet); the time left is
    ``remaining`` over it."""


@dataclass(frozen=True)
class RestoringTask:
    """A task of a pod that is not running yet: restoring (or about to restore) its stores."""

    pod: str
    task_id: str
    remaining: int
    """Changelog records left to restore (0 when not known yet)."""
    restored: int = 0
    """Changelog records restored so far."""
    stores: tuple[RestoringStore, ...] = ()
    """Progress per store; empty when the pod reports per task only (a runtime before per-store progress)."""


@dataclass(frozen=True)
class RestoreView:
    """What the pods that are not ready say about restoration; ``unreadable`` maps pod -> why not."""

    tasks: tuple[RestoringTask, ...] = ()
    unreadable: Mapping[str, str] | None = None

    @property
    def remaining(self) -> int:
        return sum(task.remaining for task in self.tasks)

    @property
    def known_remaining(self) -> int | None:
        """``remaining``, or None when it is not known (``Restoring=Unknown``: no restoring task seen and a
        pod that is not ready could not be read)."""
        return None if not self.tasks and self.unreadable else self.remaining


def unready_pods(pods: Sequence[dict[str, Any]]) -> list[tuple[str, str]]:
    """``(name, pod IP)`` of the running pods whose Ready condition is not True: the only ones that can be
    restoring (the runtime's readiness requires every task restored)."""
    return [(name, ip) for name, ip, ready in started_pods(pods) if not ready]


def started_pods(pods: Sequence[dict[str, Any]]) -> list[tuple[str, str, bool]]:
    """``(name, pod IP, ready)`` of the running pods whose containers have all started: the ones that can
    answer ``/status``. Pods whose containers have not all started (``containerStatuses[].started``:
    waiting to be restarted after a crash, still in the startup probe) cannot answer and are not asked.
    Pods that are not ready come first (they may be restoring), then the ready ones (a ready pod's stream
    thread may still be failing and restarting)."""
    found = []
    for pod in sorted(pods, key=lambda p: str(p.get("metadata", {}).get("name"))):
        metadata, status = pod.get("metadata", {}), pod.get("status") or {}
        if metadata.get("deletionTimestamp") or status.get("phase") != "Running" or not status.get("podIP"):
            continue
        containers = status.get("containerStatuses") or []
        if not containers or not all(c.get("started") is True for c in containers):
            continue
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
        found.append((str(metadata.get("name")), str(status["podIP"]), ready))
    return sorted(found, key=lambda pod: pod[2])


#: At most this many bytes of one pod's failure text go into the Degraded message.
MAX_FAILURE_BYTES_PER_POD = 1024

#: At most this many pods are named with their failures (the others are counted).
MAX_FAILING_PODS_NAMED = 5

#: A stream thread that failed and was restarted counts as failing while its last failure is at most this old
#: (seconds; the runtime's supervisor gives up after 5 restarts within 10 minutes): one transient failure
#: long ago does not degrade the app for ever.
RECENT_FAILURE_SECONDS = 600.0


def failing_threads(documents: Mapping[str, dict[str, Any] | str], now: float | None = None) -> list[str]:
    """One line per pod whose stream threads keep failing, from the pods' ``/status`` documents.

    The runtime's supervisor restarts a failed stream thread itself and its liveness stays 200, so a crash
    loop inside the pod (a poison record under ``log_and_fail``, a bad client setting, an authentication
    failure) shows only here: ``workers[]`` with ``thread``, ``alive``, ``restarts``, ``error`` (last error
    text) and ``last_failure`` (``task``, ``topic``, ``partition``, ``offset``, ``error``), and a top-level
    ``phase`` of ``failed`` once the supervisor gave up. A thread with ``restarts >= 1`` and an error is
    failing, unless it is alive and its last failure (``last_failure.at``, epoch seconds) is older than
    ``RECENT_FAILURE_SECONDS`` before ``now`` (None: every failure counts). Each line is at most
    ``MAX_FAILURE_BYTES_PER_POD`` bytes and at most ``MAX_FAILING_PODS_NAMED`` pods are named; restart counts
    are left out so that the message (and its event) does not change on every restart.
    """
    lines: list[str] = []
    failing = 0
    for pod in sorted(documents):
        document = documents[pod]
        if not isinstance(document, dict):
            continue
        parts = [_thread_failure(worker, now) for worker in _workers(document)]
        parts = [part for part in parts if part]
        gave_up = document.get("phase") == "failed"
        if not parts and not gave_up:
            continue
        failing += 1
        if len(lines) >= MAX_FAILING_PODS_NAMED:
            continue
        if gave_up:
            parts.insert(0, "the runtime gave up after repeated stream thread failures")
        lines.append(_bounded(f"pod {pod}: " + "; ".join(parts), MAX_FAILURE_BYTES_PER_POD))
    if failing > len(lines):
        lines.append(f"and {failing - len(lines)} more pods")
    return lines


def _workers(document: dict[str, Any]) -> list[dict[str, Any]]:
    workers = document.get("workers")
    return [w for w in workers if isinstance(w, dict)] if isinstance(workers, list) else []


def _thread_failure(worker: dict[str, Any], now: float | None) -> str:
    """``thread 1, task 0_1, topic flights[2] offset 17: ValueError: ...`` or "" when the thread is fine."""
    restarts = worker.get("restarts")
    last = worker.get("last_failure")
    failure: dict[str, Any] = last if isinstance(last, dict) else {}
    error = failure.get("error") or worker.get("error")
    if not (type(restarts) is int and restarts >= 1 and isinstance(error, str) and error):
        return ""
    at = failure.get("at")
    long_ago = isinstance(at, int | float) and now is not None and now - at > RECENT_FAILURE_SECONDS
    if long_ago and worker.get("alive") is True:
        return ""
    where = [f"thread {worker.get('thread')}"]
    if failure.get("task") is not None:
        where.append(f"task {failure['task']}")
    if failure.get("topic") is not None:
        place = f"topic {failure['topic']}"
        if failure.get("partition") is not None:
            place += f"[{failure['partition']}]"
        if failure.get("offset") is not None:
            place += f" offset {failure['offset']}"
        where.append(place)
    return f"{', '.join(where)}: {' '.join(error.split())}"


def _bounded(text: str, limit: int) -> str:
    data = text.encode()
    if len(data) <= limit:
        return text
    return data[: limit - 3].decode("utf-8", "ignore") + "..."


def restore_view(documents: Mapping[str, dict[str, Any] | str]) -> RestoreView:
    """Restoring tasks from the pods' ``/status`` documents (pod -> document, or pod -> error text).

    A document has ``workers[].tasks[]`` with ``task_id``, ``state``, ``restored_records``,
    ``restore_remaining`` and (newer runtimes) ``stores[]`` with ``store``, ``changelog``, ``restored_records``,
    ``restore_remaining`` and ``records_per_second`` (``asdict`` of the runtime's
    ``streamapp.processing.status.TaskStatus``); tasks not ``running`` are restoring, as the runtime's
    ``/readyz`` says ("restores tasks ..."). A field missing or of another type counts as not reported.
    """
    tasks: list[RestoringTask] = []
    unreadable: dict[str, str] = {}
    for pod in sorted(documents):
        document = documents[pod]
        if isinstance(document, str):
            unreadable[pod] = document
            continue
        for task in _tasks(document):
            if task.get("state") != "running":
                remaining, restored = _count(task.get("restore_remaining")), _count(task.get("restored_records"))
                stores = _restoring_stores(task.get("stores"))
                tasks.append(RestoringTask(pod, str(task.get("task_id")), remaining, restored, stores))
    return RestoreView(tuple(tasks), unreadable)


def _restoring_stores(reported: Any) -> tuple[RestoringStore, ...]:
    """The well-formed entries of a task's ``stores`` (those without a store name are skipped)."""
    if not isinstance(reported, list):
        return ()
    found = []
    for entry in reported:
        if isinstance(entry, dict) and isinstance(name := entry.get("store"), str) and name:
            found.append(
                RestoringStore(
                    store=name,
                    changelog=str(entry.get("changelog") or ""),
                    restored=_count(entry.get("restored_records")),
                    remaining=_count(entry.get("restore_remaining")),
                    records_per_second=_figure(entry.get("records_per_second")),
                )
            )
    return tuple(found)


def _count(value: Any) -> int:
    return value if type(value) is int and value > 0 else 0


def _figure(value: Any) -> float | None:
    """A non-negative finite number, else None."""
    if type(value) not in (int, float) or not 0 <= value < float("inf"):
        return None
    return float(value)


def _tasks(document: Any) -> list[dict[str, Any]]:
    """The task objects of a ``/status`` document; whatever does not have the runtime's shape (the pod
    runs the user's code) is skipped, never raised."""
    if not isinstance(document, dict) or not isinstance(workers := document.get("workers"), list):
        return []
    found: list[dict[str, Any]] = []
    for worker in workers:
        if isinstance(worker, dict) and isinstance(tasks := worker.get("tasks"), list):
            found.extend(task for task in tasks if isinstance(task, dict))
    return found


def failing_pod_names(lines: Sequence[str]) -> set[str]:
    """The pods named by ``failing_pods`` and ``failing_threads`` lines (``pod <name>: ...``)."""
    return {line[len("pod ") :].split(":", 1)[0] for line in lines if line.startswith("pod ") and ":" in line}
