"""The query pipe between the supervisor and one stream-thread worker process.

Stores live in the worker processes (``streamapp.processing.worker``), so the supervisor's HTTP threads ask a
worker over a ``multiprocessing`` pipe: ``QueryChannel.ask`` (supervisor side, any thread) sends
``(request id, LocalQuery)`` and waits for ``(request id, results | error text)``; ``serve_queries`` (worker side)
answers every waiting request between two iterations of the stream thread's loop (``StreamThread.run``'s
``between_iterations``), so a reply comes within one iteration (at most ``poll.ms`` when idle).

One request at a time per worker (a lock); a reply that comes after its asker gave up is dropped by id.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["QueryChannel", "QueryTimeoutError", "WorkerQueryError", "serve_queries"]

log = logging.getLogger(__name__)


class QueryTimeoutError(TimeoutError):
    """The worker did not answer in time (busy, restarting or gone)."""


class WorkerQueryError(RuntimeError):
    """The worker failed to run the query (its error text)."""


class QueryChannel:
    """The supervisor's end of one worker's query pipe (``connection``: a ``multiprocessing`` ``Connection``)."""

    def __init__(self, connection: Any) -> None:
        self._connection = connection
        self._lock = threading.Lock()
        self._ids = itertools.count(1)

    def ask(self, request: Any, timeout_s: float) -> Any:
        """Send ``request`` and return the worker's answer. Raises QueryTimeoutError after ``timeout_s`` seconds
        without one (or when the pipe is closed), WorkerQueryError when the worker failed to answer."""
        deadline = time.monotonic() + timeout_s
        if not self._lock.acquire(timeout=timeout_s):
            raise QueryTimeoutError("the stream thread is busy with another query")
        try:
            request_id = next(self._ids)
            try:
                self._connection.send((request_id, request))
                while True:
                    left = deadline - time.monotonic()
                    if left <= 0 or not self._connection.poll(left):
                        raise QueryTimeoutError(f"the stream thread did not answer within {timeout_s:.1f}s")
                    reply_id, ok, payload = self._connection.recv()
                    if reply_id != request_id:
                        continue  # the late reply of a request that timed out
                    if not ok:
                        raise WorkerQueryError(str(payload))
                    return payload
            except (OSError, EOFError) as exc:
                raise QueryTimeoutError(f"the stream thread's query pipe is closed: {exc}") from exc
        finally:
            self._lock.release()

    def close(self) -> None:
        self._connection.close()


def serve_queries(connection: Any, handle: Callable[[Any], Any]) -> int:
    """Worker side: answer every request waiting on ``connection`` with ``handle(request)`` (an exception is sent
    back as its text); returns how many were answered. A closed pipe is ignored (the supervisor is stopping)."""
    served = 0
    try:
        while connection.poll(0):
            request_id, request = connection.recv()
            try:
                reply = (request_id, True, handle(request))
            except Exception as exc:
                log.warning("Interactive query failed: %s: %s", type(exc).__name__, exc)
                reply = (request_id, False, f"{type(exc).__name__}: {exc}")
            connection.send(reply)
            served += 1
    except (OSError, EOFError):
        pass
    return served
