"""Pure liveness and readiness decisions from the supervisor's view of its workers.

- Live (``/healthz``): the supervisor loop is turning and no worker process is hung (alive but silent
  for longer than ``HUNG_AFTER_S``). A crashed worker being restarted is still live: restarting is the
  supervisor's job, a pod restart would not help.
- Ready (``/readyz``): not shutting down, the application's topics are prepared, and every worker is
  alive, reported recently and is ready (in the group, all its assigned tasks restored and running). While
  source or sink topics do not exist the reason names them (``MISSING_TOPICS_REASON``; Kafka Streams' assignor
  reports ``INCOMPLETE_SOURCE_TOPIC_METADATA`` and its threads throw ``MissingSourceTopicException``).
- Give up (``restart_allowed``): a stream thread that failed is replaced at most ``MAX_THREAD_RESTARTS`` (5) times
  within ``RESTART_WINDOW_S`` (10 minutes); its next failure in that window shuts the whole instance down, which
  exits non-zero, so that Kubernetes sees the crash loop (restart count, ``CrashLoopBackOff``) instead of a pod
  that restarts threads for ever behind a green liveness probe. Kafka Streams' ``StreamsUncaughtExceptionHandler``
  answers ``REPLACE_THREAD`` or ``SHUTDOWN_CLIENT``; this is ``REPLACE_THREAD`` with a budget, then
  ``SHUTDOWN_CLIENT``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from streamapp.processing.status import Failure, WorkerStatus

__all__ = [
    "HUNG_AFTER_S",
    "MAX_THREAD_RESTARTS",
    "MISSING_TOPICS_LOG_EVERY_S",
    "MISSING_TOPICS_REASON",
    "RESTART_WINDOW_S",
    "STALE_AFTER_S",
    "MissingTopics",
    "WorkerView",
    "find_missing",
    "liveness",
    "missing_topics_due",
    "readiness",
    "restart_allowed",
]

HUNG_AFTER_S = 120.0
"""A live worker process that has not reported for this long is considered hung."""
STALE_AFTER_S = 10.0
"""A worker whose last report is older than this is not counted as ready."""
SUPERVISOR_STALL_S = 30.0
MAX_THREAD_RESTARTS = 5
"""Replacements of one failed stream thread allowed within ``RESTART_WINDOW_S``."""
RESTART_WINDOW_S = 600.0
"""The window (seconds) over which a stream thread's failures count against ``MAX_THREAD_RESTARTS``."""
MISSING_TOPICS_REASON = "INCOMPLETE_SOURCE_TOPIC_METADATA"
"""The readiness reason's prefix while topics the topology reads or writes do not exist (Kafka's assignor error)."""
MISSING_TOPICS_LOG_EVERY_S = 300.0
"""While the same topics stay missing, the WARN naming them is repeated at most this often (seconds)."""


@dataclass(frozen=True)
class MissingTopics:
    """External topics of the topology that do not exist yet: ``sources`` it reads, ``sinks`` it writes, and
    since when (epoch seconds) the instance has waited for them."""

    sources: tuple[str, ...] = ()
    sinks: tuple[str, ...] = ()
    since: float = 0.0

    def __bool__(self) -> bool:
        return bool(self.sources or self.sinks)

    def reason(self, now: float) -> str:
        """The readiness reason, e.g. ``INCOMPLETE_SOURCE_TOPIC_METADATA: source topics missing: a, b (waiting
        for 12s; an application never creates its source and sink topics)``."""
        parts = []
        if self.sources:
            parts.append(f"source topics missing: {', '.join(self.sources)}")
        if self.sinks:
            parts.append(f"sink topics missing: {', '.join(self.sinks)}")
        waited = max(0.0, now - self.since)
        return (
            f"{MISSING_TOPICS_REASON}: {'; '.join(parts)} (waiting for {waited:.0f}s; an application never "
            "creates its source and sink topics)"
        )

    def to_dict(self) -> dict[str, object]:
        return {"sources": list(self.sources), "sinks": list(self.sinks), "since": self.since}


def missing_topics_due(previous: MissingTopics, current: MissingTopics, last_logged: float | None, now: float) -> bool:
    """Whether the WARN about missing topics is due: the set changed (or is new), or the same set was last
    logged ``MISSING_TOPICS_LOG_EVERY_S`` ago or more. Never when nothing is missing."""
    if not current:
        return False
    changed = (previous.sources, previous.sinks) != (current.sources, current.sinks)
    return changed or last_logged is None or now - last_logged >= MISSING_TOPICS_LOG_EVERY_S


def find_missing(sources: Sequence[str], sinks: Sequence[str], existing: Iterable[str], since: float) -> MissingTopics:
    """The ``MissingTopics`` among ``sources`` and ``sinks`` (a topic both read and written counts as a source)."""
    present = set(existing)
    missing_sources = tuple(t for t in sources if t not in present)
    missing_sinks = tuple(t for t in sinks if t not in present and t not in sources)
    return MissingTopics(missing_sources, missing_sinks, since)


@dataclass(frozen=True)
class WorkerView:
    """The supervisor's knowledge of one worker: process liveness, restarts and its latest report."""

    thread: int
    alive: bool
    started_at: float
    restarts: int
    status: WorkerStatus | None
    exit_code: int | None = None
    last_failure: Failure | None = None


def liveness(now: float, supervisor_heartbeat: float, workers: list[WorkerView]) -> tuple[bool, str]:
    """(live, reason). ``now`` and all times are epoch seconds."""
    if now - supervisor_heartbeat > SUPERVISOR_STALL_S:
        return False, f"supervisor loop stalled for {now - supervisor_heartbeat:.0f}s"
    for worker in workers:
        last = worker.status.reported_at if worker.status else worker.started_at
        if worker.alive and now - last > HUNG_AFTER_S:
            return False, f"stream thread {worker.thread} has not reported for {now - last:.0f}s"
    return True, "ok"


def readiness(
    now: float, phase: str, workers: list[WorkerView], missing: MissingTopics | None = None
) -> tuple[bool, str]:
    """(ready, reason). ``phase`` is the supervisor's phase: preparing | running | stopping | failed | stopped.
    ``missing``: the external topics the instance waits for while preparing (the reason names them)."""
    if phase == "preparing" and missing:
        return False, missing.reason(now)
    if phase != "running":
        return False, f"instance is {phase}"
    if not workers:
        return False, "no stream threads"
    for worker in workers:
        if not worker.alive:
            return False, f"stream thread {worker.thread} is not running (restarting)"
        status = worker.status
        if status is None or now - status.reported_at > STALE_AFTER_S:
            return False, f"stream thread {worker.thread} has not reported recently"
        if not status.ready:
            waiting = [t.task_id for t in status.tasks if t.state != "running"]
            if not status.group_joined:
                return False, f"stream thread {worker.thread} has not joined the consumer group"
            if waiting:
                return False, f"stream thread {worker.thread} restores tasks {', '.join(waiting)}"
            return False, f"stream thread {worker.thread} is {status.state}"
    return True, "ok"


def restart_allowed(
    failures: Iterable[float],
    now: float,
    max_restarts: int = MAX_THREAD_RESTARTS,
    window_s: float = RESTART_WINDOW_S,
) -> bool:
    """True when a stream thread whose failures (epoch seconds, the one at ``now`` included) are ``failures``
    may be replaced once more: at most ``max_restarts`` of them lie within the last ``window_s`` seconds.
    A negative ``max_restarts`` never gives up."""
    if max_restarts < 0:
        return True
    return sum(1 for at in failures if now - at < window_s) <= max_restarts
