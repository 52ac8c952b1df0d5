"""Exception handlers of a stream thread: what happens to a record that cannot be read, processed or written.

Three handlers, one per stage, configured by Kafka Streams' keys (``streamapp.config``):

========================================  ===============================================  ======================
stage                                     handler key                                      Kafka class followed
========================================  ===============================================  ======================
read: key/value deserialization fails     ``default.deserialization.exception.handler``    ``LogAndFail`` /
                                                                                           ``LogAndContinue``
                                                                                           ``ExceptionHandler``
process: a processor (user code) raises   ``processing.exception.handler`` (KIP-1033)      ``LogAndFail`` /
                                                                                           ``LogAndContinue``
                                                                                           ``ProcessingExcept...``
write: a sink cannot serialize or send    ``default.production.exception.handler``         ``DefaultProduction``
                                                                                           ``ExceptionHandler``
========================================  ===============================================  ======================

Responses: *fail* (``log_and_fail`` / ``fail``, the defaults) raises, so the task stops loudly with an error that
names the record (``topic-partition@offset``) and the worker restarts from its last commit; *continue*
(``log_and_continue`` / ``continue``) logs (at most one WARN per stage every 10 s with the count of the skips in
between, ``streamapp.skips``), counts the record as dropped (reason ``deserialization_error`` or
``processing_error``, ``streamapp.drop_reasons``) and goes on with the next record;
``dead_letter_queue`` continues after writing the record to ``errors.dead.letter.queue.topic.name``.

Dead letters (KIP-1034): whenever a DLQ topic is configured, every handled failure (whatever the response)
writes one record there: the original (source) record's key and value bytes, its headers, plus

- ``__streams.errors.exception``: the exception type; ``__streams.errors.message``: its message;
  ``__streams.errors.stacktrace``: the formatted traceback;
- ``__streams.errors.topic`` / ``__streams.errors.partition`` / ``__streams.errors.offset``: where the source
  record was read (for a record the broker rejected asynchronously: the rejected output record and its
  destination topic, partition -1, offset -1, since the source is no longer known).

The dead letter is sent with the stream thread's producer, so under ``exactly_once_v2`` it commits atomically
with the consumed offsets; the records after a poison record are never lost (the poison record's offset is
committed only once it was handled).
"""

from __future__ import annotations

import logging
import re
import traceback
from collections.abc import Callable
from typing import Literal

from streamapp.config import StreamsConfig
from streamapp.kafka.types import ConsumerRecord, Headers
from streamapp.processing.status import Failure, bounded_text
from streamapp.skips import SkipLog, skip_log

__all__ = [
    "DeadLetterSender",
    "DeserializationError",
    "ExceptionHandlers",
    "ProcessingError",
    "ProductionError",
    "dead_letter_headers",
    "failure_of",
]

log = logging.getLogger(__name__)

DeadLetterSender = Callable[[str, bytes | None, bytes | None, Headers, int], None]
"""``(topic, key, value, headers, timestamp_ms)``: sends one dead letter (the stream thread's producer; -1 = now)."""

Stage = Literal["deserialization", "processing", "production"]

HEADER_EXCEPTION = "__streams.errors.exception"
HEADER_MESSAGE = "__streams.errors.message"
HEADER_STACKTRACE = "__streams.errors.stacktrace"
HEADER_TOPIC = "__streams.errors.topic"
HEADER_PARTITION = "__streams.errors.partition"
HEADER_OFFSET = "__streams.errors.offset"


class ProcessingError(RuntimeError):
    """A record failed and its handler said *fail*; the message names the record and the cause.

    ``task`` and ``record`` (the source record) are set when known; ``failure_of`` reports them.
    """

    def __init__(self, message: str, *, task: str | None = None, record: ConsumerRecord | None = None) -> None:
        super().__init__(message)
        self.task = task
        self.record = record


class DeserializationError(ProcessingError):
    """A consumed record's key or value could not be deserialized (handler: fail)."""


class ProductionError(ProcessingError):
    """A record could not be serialized or sent (handler: fail)."""


def dead_letter_headers(
    exc: BaseException, topic: str, partition: int, offset: int, original: Headers | None = None
) -> Headers:
    """The headers of a dead letter (see the module docstring); the original headers come first."""
    stack = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return [
        *(original or []),
        (HEADER_EXCEPTION, type(exc).__name__.encode()),
        (HEADER_MESSAGE, str(exc).encode()),
        (HEADER_STACKTRACE, stack.encode()),
        (HEADER_TOPIC, topic.encode()),
        (HEADER_PARTITION, str(partition).encode()),
        (HEADER_OFFSET, str(offset).encode()),
    ]


class ExceptionHandlers:
    """The three handlers of one stream thread (see the module docstring).

    ``send_dead_letter`` is called only when ``errors.dead.letter.queue.topic.name`` is set. ``skips``: where
    skipped records are logged (default: this module's process-wide ``SkipLog``).
    """

    def __init__(self, config: StreamsConfig, send_dead_letter: DeadLetterSender, skips: SkipLog | None = None) -> None:
        self.dead_letter_topic = config.errors_dead_letter_queue_topic_name
        self._send = send_dead_letter
        self._continue: dict[Stage, bool] = {
            "deserialization": config.default_deserialization_exception_handler != "log_and_fail",
            "processing": config.processing_exception_handler != "log_and_fail",
            "production": config.default_production_exception_handler != "fail",
        }
        self.dead_letters = 0
        """Dead letters sent since the thread started (a metric)."""
        self._skips = skips if skips is not None else skip_log(log)

    def continues(self, stage: Stage) -> bool:
        """True when ``stage``'s handler goes on with the next record after a failure."""
        return self._continue[stage]

    def deserialization_failed(self, record: ConsumerRecord, exc: Exception, task: str) -> None:
        """A consumed record cannot be deserialized. Raises DeserializationError unless the handler continues."""
        self._handle("deserialization", DeserializationError, record, exc, task)

    def processing_failed(self, record: ConsumerRecord, exc: Exception, task: str) -> None:
        """A processor raised on ``record`` (the source record). Raises ProcessingError unless the
        handler continues."""
        self._handle("processing", ProcessingError, record, exc, task)

    def production_failed(self, record: ConsumerRecord, exc: Exception, task: str) -> None:
        """A sink could not serialize or queue a record produced from source ``record``. Raises ProductionError
        unless the handler continues."""
        self._handle("production", ProductionError, record, exc, task)

    def delivery_failed(self, topic: str, key: bytes | None, value: bytes | None, error: str) -> bool:
        """The broker rejected a record (at-least-once, reported asynchronously): True when the production
        handler tolerates it (the record is dropped, and dead-lettered when a DLQ topic is set)."""
        if not self._continue["production"]:
            return False
        log.warning("Dropped a record the broker rejected (production handler continues): %s", error)
        if self.dead_letter_topic is not None:
            exc = ProductionError(error)
            self._send(self.dead_letter_topic, key, value, dead_letter_headers(exc, topic, -1, -1), -1)
            self.dead_letters += 1
        return True

    def _handle(
        self,
        stage: Stage,
        error_type: type[ProcessingError],
        record: ConsumerRecord,
        exc: Exception,
        task: str,
    ) -> None:
        where = f"{record.topic}-{record.partition}@{record.offset}"
        if self.dead_letter_topic is not None:
            headers = dead_letter_headers(exc, record.topic, record.partition, record.offset, record.headers)
            self._send(self.dead_letter_topic, record.key, record.value, headers, record.timestamp)
            self.dead_letters += 1
        if not self._continue[stage]:
            message = f"task {task}: {stage} of record {where} failed: {type(exc).__name__}: {exc}"
            raise error_type(message, task=task, record=record) from exc
        place = f"task=[{task}] topic=[{record.topic}] partition=[{record.partition}] offset=[{record.offset}]"
        self._skips.skipped(
            f"Skipping record after a {stage} error ({stage} handler continues)",
            f"{place}: {type(exc).__name__}: {exc}",
        )


_TASK_IN_TEXT = re.compile(r"^task (\d+_\d+):")
_RECORD_IN_TEXT = re.compile(r"record (\S+)-(\d+)@(\d+)")


def failure_of(exc: BaseException, at: float) -> Failure:
    """The ``Failure`` a stream thread reports for ``exc`` at ``at`` (epoch seconds).

    The task and the source record come from a ``ProcessingError``'s attributes, else from its message when it
    names them (``task 0_1: ... record <topic>-<partition>@<offset>``); any other exception has neither.
    """
    task: str | None = None
    record: tuple[str, int, int] | None = None
    if isinstance(exc, ProcessingError):
        task = exc.task
        if exc.record is not None:
            record = (exc.record.topic, exc.record.partition, exc.record.offset)
        text = str(exc)
        if task is None and (match := _TASK_IN_TEXT.match(text)):
            task = match.group(1)
        if record is None and (found := _RECORD_IN_TEXT.search(text)):
            record = (found.group(1), int(found.group(2)), int(found.group(3)))
    error = bounded_text(f"{type(exc).__name__}: {exc}")
    if record is None:
        return Failure(error, at, task)
    return Failure(error, at, task, *record)
