"""Liveness and readiness decisions from the supervisor's view of its stream threads."""

from __future__ import annotations

from streamapp.monitoring.health import (
    MISSING_TOPICS_LOG_EVERY_S,
    MissingTopics,
    WorkerView,
    find_missing,
    liveness,
    missing_topics_due,
    readiness,
)
from streamapp.processing.status import TaskStatus, WorkerStatus

NOW = 1_000_000.0


def status(
    ready: bool = True, joined: bool = True, tasks: list[TaskStatus] | None = None, age: float = 1.0
) -> WorkerStatus:
    return WorkerStatus(
        thread=0, pid=1, state="running", ready=ready, group_joined=joined, reported_at=NOW - age, tasks=tasks or []
    )


def view(s: WorkerStatus | None, alive: bool = True, thread: int = 0) -> WorkerView:
    return WorkerView(thread=thread, alive=alive, started_at=NOW - 100, restarts=0, status=s)


def test_ready_when_every_thread_has_all_tasks_running() -> None:
    assert readiness(NOW, "running", [view(status()), view(status(), thread=1)]) == (True, "ok")


def test_not_ready_while_a_task_restores() -> None:
    restoring = status(ready=False, tasks=[TaskStatus("1_0", "restoring", ["t-0"])])
    ok, reason = readiness(NOW, "running", [view(restoring)])
    assert not ok and "restores tasks 1_0" in reason


def test_not_ready_before_joining_the_group() -> None:
    ok, reason = readiness(NOW, "running", [view(status(ready=False, joined=False))])
    assert not ok and "not joined" in reason


def test_not_ready_while_a_thread_restarts_or_is_silent() -> None:
    assert not readiness(NOW, "running", [view(status(), alive=False)])[0]
    assert not readiness(NOW, "running", [view(status(age=60))])[0]
    assert not readiness(NOW, "running", [view(None)])[0]


def test_not_ready_while_preparing_or_stopping() -> None:
    assert readiness(NOW, "preparing", [view(status())]) == (False, "instance is preparing")
    assert not readiness(NOW, "stopping", [view(status())])[0]


def test_live_while_a_crashed_thread_is_being_restarted() -> None:
    assert liveness(NOW, NOW, [view(None, alive=False)])[0]


def test_not_live_when_a_running_thread_stopped_reporting() -> None:
    ok, reason = liveness(NOW, NOW, [view(status(age=600))])
    assert not ok and "has not reported" in reason


def test_not_live_when_the_supervisor_loop_stalls() -> None:
    assert not liveness(NOW, NOW - 120, [view(status())])[0]


def test_readiness_names_the_missing_source_and_sink_topics_while_preparing() -> None:
    missing = find_missing(["flights", "airports"], ["counts", "flights"], ["airports"], since=NOW - 12)

    ok, reason = readiness(NOW, "preparing", [], missing)

    assert not ok
    assert reason.startswith("INCOMPLETE_SOURCE_TOPIC_METADATA: source topics missing: flights; ")
    assert "sink topics missing: counts (waiting for 12s" in reason
    assert readiness(NOW, "preparing", [], find_missing(["flights"], [], ["flights"], NOW)) == (
        False,
        "instance is preparing",
    )


def test_the_missing_topics_warning_repeats_only_when_the_set_changes_or_after_the_interval() -> None:
    none, flights = MissingTopics(), MissingTopics(("flights",), (), NOW)
    both = MissingTopics(("flights", "airports"), (), NOW)

    assert missing_topics_due(none, flights, None, NOW)
    assert not missing_topics_due(flights, flights, NOW, NOW + 5)
    assert not missing_topics_due(flights, flights, NOW, NOW + MISSING_TOPICS_LOG_EVERY_S - 1)
    assert missing_topics_due(flights, flights, NOW, NOW + MISSING_TOPICS_LOG_EVERY_S)
    assert missing_topics_due(flights, both, NOW, NOW + 5)
    assert not missing_topics_due(flights, none, NOW, NOW + 5)
