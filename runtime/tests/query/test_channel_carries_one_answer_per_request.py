"""The supervisor-worker query pipe (``streamapp.query.channel``) on a real ``multiprocessing`` pipe: an answer
reaches its asker, a worker's failure comes back as its text, a late reply never answers the next request."""

from __future__ import annotations

import multiprocessing
import threading
import time

import pytest
from streamapp.query.channel import QueryChannel, QueryTimeoutError, WorkerQueryError, serve_queries


def test_the_worker_answers_waiting_requests_between_iterations() -> None:
    supervisor_end, worker_end = multiprocessing.Pipe()
    channel = QueryChannel(supervisor_end)
    stop = threading.Event()

    def worker_loop() -> None:
        while not stop.is_set():
            serve_queries(worker_end, lambda request: {"ok": request} if request != "boom" else 1 / 0)
            time.sleep(0.01)

    thread = threading.Thread(target=worker_loop, daemon=True)
    thread.start()
    try:
        assert channel.ask("a", 2.0) == {"ok": "a"}
        with pytest.raises(WorkerQueryError, match="ZeroDivisionError"):
            channel.ask("boom", 2.0)
        assert channel.ask("b", 2.0) == {"ok": "b"}
    finally:
        stop.set()
        thread.join()


def test_a_silent_worker_times_out_and_its_late_reply_is_dropped() -> None:
    supervisor_end, worker_end = multiprocessing.Pipe()
    channel = QueryChannel(supervisor_end)
    with pytest.raises(QueryTimeoutError):
        channel.ask("first", 0.05)
    assert serve_queries(worker_end, lambda request: f"re {request}") == 1  # answers "first", too late
    answered = threading.Thread(target=lambda: serve_queries(worker_end, lambda request: f"re {request}"))
    threading.Timer(0.1, answered.start).start()
    assert channel.ask("second", 2.0) == "re second"


def test_a_closed_pipe_is_a_timeout_not_a_crash() -> None:
    supervisor_end, worker_end = multiprocessing.Pipe()
    worker_end.close()
    with pytest.raises(QueryTimeoutError):
        QueryChannel(supervisor_end).ask("x", 0.5)
