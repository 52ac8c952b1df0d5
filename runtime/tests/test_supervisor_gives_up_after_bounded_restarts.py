"""The supervisor replaces a failed stream thread at most 5 times within 10 minutes, then gives up (phase
``failed``, exit 1) with the failure in ``/status``: Kafka Streams' REPLACE_THREAD with a budget, then
SHUTDOWN_CLIENT (issue 9: a crash loop inside a pod was invisible).

Worker processes are replaced by a hand-written fake; the clock is a fake too, so no test waits for a backoff.
"""

from __future__ import annotations

import json
import multiprocessing
import queue
from pathlib import Path
from typing import Any

import pytest
import streamapp.app
from streamapp.app import KafkaStreams
from streamapp.config import StreamsConfig
from streamapp.monitoring.health import restart_allowed
from streamapp.processing.status import Failure, ThreadFailed, WorkerStatus
from streamapp.processing.worker import EXIT_WAITING
from streamapp.topology import TopologyDescription

TOPOLOGY = {
    "nodes": [
        {"name": "in", "type": "source", "topics": ["in"]},
        {"name": "out", "type": "sink", "input": "in", "topic": "out"},
    ]
}
POISON = Failure("DeserializationError: task 0_1: ...", 0.0, "0_1", "in", 1, 7)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now


class FakeProcess:
    """A worker process: alive until ``exit``."""

    pids = iter(range(100, 10_000))

    def __init__(self, **_: Any) -> None:
        self.pid = next(FakeProcess.pids)
        self.exitcode: int | None = None

    def start(self) -> None: ...

    def is_alive(self) -> bool:
        return self.exitcode is None

    def exit(self, code: int) -> None:
        self.exitcode = code

    def join(self, timeout: float | None = None) -> None: ...

    def kill(self) -> None:
        self.exitcode = -9


class FakeContext:
    Process = FakeProcess
    Pipe = staticmethod(multiprocessing.Pipe)  # the worker's query pipe (a real one, unused here)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(streamapp.app, "time", fake)
    return fake


@pytest.fixture
def app(tmp_path: Path, clock: FakeClock) -> KafkaStreams:
    config = StreamsConfig.from_mapping(
        {"application.id": "app", "bootstrap.servers": "127.0.0.1:1", "http.port": 0, "state.dir": str(tmp_path)}
    )
    instance = KafkaStreams(TopologyDescription.from_dict(TOPOLOGY), config, failed_exit_delay_s=0.0)
    instance._mp = FakeContext()  # type: ignore[assignment]
    instance._status_queue = queue.Queue()
    instance._phase = "running"
    instance._start_worker(instance._workers[0])
    return instance


def process(app: KafkaStreams) -> FakeProcess:
    current = app._workers[0].process
    assert isinstance(current, FakeProcess)
    return current


def fail(app: KafkaStreams, clock: FakeClock, code: int = 1, report: Failure | None = POISON) -> None:
    """The worker reports ``report`` (if any), exits with ``code``; the supervisor notices, then restarts it."""
    worker = process(app)
    if report is not None:
        app._status_queue.put(ThreadFailed(0, worker.pid, report))
    worker.exit(code)
    app._supervise()
    clock.now += 60  # past any backoff: the next pass restarts the worker
    app._supervise()


def test_restart_budget_is_five_restarts_within_ten_minutes() -> None:
    now = 10_000.0
    assert restart_allowed([now - 500, now - 400, now - 300, now - 200, now], now)
    assert not restart_allowed([now - 500, now - 400, now - 300, now - 200, now - 100, now], now)
    assert restart_allowed([now - 900, now - 400, now - 300, now - 200, now - 100, now], now)  # one is outside
    assert restart_allowed([now] * 100, now, max_restarts=-1)


def test_a_thread_failing_on_a_poison_record_is_replaced_five_times_then_the_instance_fails(
    app: KafkaStreams, clock: FakeClock
) -> None:
    for restarts in range(1, 6):
        fail(app, clock)
        assert app._failure is None and app._workers[0].restarts == restarts and process(app).is_alive()
    process_before = process(app)
    fail(app, clock)
    assert app._failure == POISON
    assert process(app) is process_before  # not replaced a sixth time
    assert app._give_up(app._failure) == 1

    status = app.status()
    assert status["phase"] == "failed" and status["last_failure"] == POISON.to_dict()
    (worker,) = status["workers"]
    assert {k: worker[k] for k in ("thread", "alive", "restarts", "exit_code")} == {
        "thread": 0,
        "alive": False,
        "restarts": 5,
        "exit_code": 1,
    }
    assert worker["error"] == POISON.error
    assert worker["last_failure"] == {
        "task": "0_1",
        "topic": "in",
        "partition": 1,
        "offset": 7,
        "error": POISON.error,
        "at": 0.0,
    }


def test_failures_spread_over_more_than_the_window_never_give_up(app: KafkaStreams, clock: FakeClock) -> None:
    for _ in range(12):
        fail(app, clock)
        clock.now += 120  # 6 failures span 900 s > 600 s
    assert app._failure is None and app._workers[0].restarts == 12


def test_waiting_for_the_group_is_not_a_failure(app: KafkaStreams, clock: FakeClock) -> None:
    for _ in range(10):
        fail(app, clock, code=EXIT_WAITING, report=None)
    assert app._failure is None
    assert app.status()["workers"][0]["last_failure"] is None


def test_a_worker_killed_without_a_report_fails_with_its_exit_signal(app: KafkaStreams, clock: FakeClock) -> None:
    fail(app, clock, code=-9, report=None)
    worker = app.status()["workers"][0]
    assert worker["last_failure"]["error"] == "WorkerExit: stream thread process was killed by SIGKILL"
    assert worker["last_failure"]["task"] is None and worker["error"] == worker["last_failure"]["error"]


def test_the_error_text_of_a_worker_report_is_bounded(app: KafkaStreams, clock: FakeClock) -> None:
    status = WorkerStatus(0, process(app).pid, "failed", False, False, clock.now, error="x" * 100_000)
    app._status_queue.put(status)
    app._supervise()
    assert len(app.status()["workers"][0]["error"].encode()) <= 1024


def test_an_instance_that_cannot_start_fails_with_the_cause_in_every_worker_and_the_termination_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    termination_log = tmp_path / "termination-log"
    termination_log.write_text("")  # Kubernetes creates the file; the runtime only writes into an existing one
    monkeypatch.setenv("STREAMAPP_TERMINATION_MESSAGE_PATH", str(termination_log))
    topology = {
        "nodes": [
            {"name": "in", "type": "source", "topics": ["in"]},
            {"name": "f", "type": "filter", "input": "in", "predicate": "no_such_module_here:keep"},
            {"name": "out", "type": "sink", "input": "f", "topic": "out"},
        ]
    }
    config = StreamsConfig.from_mapping(
        {"application.id": "app", "bootstrap.servers": "127.0.0.1:1", "http.port": 0, "state.dir": str(tmp_path)}
    )
    app = KafkaStreams(TopologyDescription.from_dict(topology), config, http_host="127.0.0.1", failed_exit_delay_s=0)
    assert app.run() == 1
    status = app.status()
    assert status["last_failure"]["error"].startswith("TopologyError: the topology cannot run")
    assert status["workers"][0]["last_failure"] == status["last_failure"]
    assert json.loads(termination_log.read_text()) == status["last_failure"]
