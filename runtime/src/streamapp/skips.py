"""Expected skips, logged without flooding: at most one WARN per reason per interval, with a count.

A record the runtime skips by rule (a null key into a table, an invalid timestamp under ``onInvalid: skip``) is
counted by the task's dropped-records metric (``streamapp_dropped_records_total``, Kafka's ``dropped-records``);
its log line goes through a ``SkipLog``, so a topic full of such records gives one line per ``interval_s``
(default 10 s) and reason, not one per record: the first skip of a reason is logged at once, later ones within
the interval are counted, and the next line after it says how many there were::

    Skipped 1 record: invalid timestamp (field 'ts' as epoch_ms): KeyError: 'ts'
    Skipped 4211 records in the last 10 s: invalid timestamp (field 'ts' as epoch_ms); the latest: KeyError: 'ts'

Kafka Streams logs such skips at WARN once per record (``KTableSource``, ``LogAndSkipOnInvalidTimestamp``); the
count is in the metric there too.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["SKIP_LOG_INTERVAL_S", "SkipLog", "skip_log"]

SKIP_LOG_INTERVAL_S = 10.0
"""At most one line per reason in this many seconds."""


@dataclass
class _Reason:
    last_logged: float
    pending: int = 0
    latest: str = ""


class SkipLog:
    """Rate-limited WARN lines for skipped records, per reason (see the module docstring).

    ``clock``: monotonic seconds (``time.monotonic``; tests pass their own). Not thread-safe: one per stream
    thread process, as each worker process is one stream thread.
    """

    def __init__(
        self,
        logger: logging.Logger,
        interval_s: float = SKIP_LOG_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self._interval_s = interval_s
        self._clock = clock
        self._reasons: dict[str, _Reason] = {}

    def skipped(self, reason: str, detail: str) -> None:
        """One record skipped for ``reason`` (e.g. ``"null key into table store users"``); ``detail`` says what
        was wrong with this one. Logs now if the reason was not logged within the interval, else counts it."""
        now = self._clock()
        state = self._reasons.get(reason)
        if state is None:
            self._reasons[reason] = _Reason(now)
            self._logger.warning("Skipped 1 record: %s: %s", reason, detail)
            return
        state.pending += 1
        state.latest = detail
        if now - state.last_logged >= self._interval_s:
            self.flush(reason, now)

    def flush(self, reason: str | None = None, now: float | None = None) -> None:
        """Log the counted, not yet logged skips now (of ``reason``, else of every reason)."""
        at = self._clock() if now is None else now
        for name, state in self._reasons.items():
            if (reason is None or name == reason) and state.pending:
                self._logger.warning(
                    "Skipped %d record%s in the last %.0f s: %s; the latest: %s",
                    state.pending,
                    "" if state.pending == 1 else "s",
                    at - state.last_logged,
                    name,
                    state.latest,
                )
                state.pending, state.last_logged = 0, at


_LOGS: dict[str, SkipLog] = {}


def skip_log(logger: logging.Logger) -> SkipLog:
    """The process's ``SkipLog`` writing to ``logger`` (one per logger name, created on first use)."""
    found = _LOGS.get(logger.name)
    if found is None:
        found = _LOGS[logger.name] = SkipLog(logger)
    return found
