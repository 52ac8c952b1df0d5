"""Expected skips, logged without flooding: at most one WARN per reason per interval, with a count.

A record the runtime skips by rule (a null key into a table, an invalid timestamp under ``onInvalid: skip``) is
counted by the task's dropped-records metric (``streamapp_dropped_records_total``, Kafka's ``dropped-records``);
its log line goes through a ``SkipLog``, so a topic full of such records gives one line per ``interval_s``
(default 10 s) and reason, not one per record: the first skip of a reason is logged at once, later ones within
the interval are counted, and the next line after it says how many there were (the next skip of the reason, or
``flush_due_skip_logs``, which the stream thread calls with its status report about once a second)::

    Skipped a record without a valid timestamp (field 'ts' as epoch_ms): KeyError: 'ts'
    Skipped a record without a valid timestamp (field 'ts' as epoch_ms): 4211 more in the last 10 s; the latest: ...

A module whose warnings are all such skips can use ``SkipWarnings`` as its ``log``: each distinct warning text is
a reason (``processors/io.py``: ``Skipping record due to null key (table store <store>)``).

Kafka Streams logs such skips at WARN once per record (``KTableSource``, ``LogAndSkipOnInvalidTimestamp``); the
count is in the metric there too.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["SKIP_LOG_INTERVAL_S", "SkipLog", "SkipWarnings", "flush_due_skip_logs", "skip_log"]

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

    def skipped(self, reason: str, detail: str = "") -> None:
        """One record skipped for ``reason`` (e.g. ``"Skipping record due to null key (table store users)"``);
        ``detail`` says what was wrong with this one. Logs now if the reason was not logged within the interval,
        else counts it."""
        now = self._clock()
        state = self._reasons.get(reason)
        if state is None:
            self._reasons[reason] = _Reason(now)
            if detail:
                self._logger.warning("%s: %s", reason, detail)
            else:
                self._logger.warning("%s", reason)
            return
        state.pending += 1
        state.latest = detail
        if now - state.last_logged >= self._interval_s:
            self.flush(reason, now)

    def flush_due(self) -> None:
        """Log the counted skips of every reason last logged ``interval_s`` ago or more: a burst of skips that
        stopped still gets its count logged (called periodically, e.g. with the stream thread's status report)."""
        now = self._clock()
        for name, state in self._reasons.items():
            if state.pending and now - state.last_logged >= self._interval_s:
                self.flush(name, now)

    def flush(self, reason: str | None = None, now: float | None = None) -> None:
        """Log the counted, not yet logged skips now (of ``reason``, else of every reason)."""
        at = self._clock() if now is None else now
        for name, state in self._reasons.items():
            if (reason is None or name == reason) and state.pending:
                latest = f"; the latest: {state.latest}" if state.latest else ""
                self._logger.warning(
                    "%s: %d more in the last %.0f s%s", name, state.pending, at - state.last_logged, latest
                )
                state.pending, state.last_logged = 0, at


class SkipWarnings:
    """A module's ``log`` whose ``warning`` calls are all expected skips: each distinct warning text (the
    message with its arguments) is a reason of a ``SkipLog`` (rate-limited, counted); ``debug``, ``info`` and
    ``error`` go to the logger unchanged."""

    def __init__(self, logger: logging.Logger, skips: SkipLog | None = None) -> None:
        self._logger = logger
        self._skips = skips if skips is not None else skip_log(logger)

    def warning(self, msg: str, *args: object) -> None:
        self._skips.skipped(msg % args if args else msg)

    def debug(self, msg: str, *args: object) -> None:
        self._logger.debug(msg, *args)

    def info(self, msg: str, *args: object) -> None:
        self._logger.info(msg, *args)

    def error(self, msg: str, *args: object) -> None:
        self._logger.error(msg, *args)


_LOGS: dict[str, SkipLog] = {}


def skip_log(logger: logging.Logger) -> SkipLog:
    """The process's ``SkipLog`` writing to ``logger`` (one per logger name, created on first use)."""
    found = _LOGS.get(logger.name)
    if found is None:
        found = _LOGS[logger.name] = SkipLog(logger)
    return found


def flush_due_skip_logs() -> None:
    """``SkipLog.flush_due`` of every process-wide skip log (``skip_log``)."""
    for found in _LOGS.values():
        found.flush_due()
