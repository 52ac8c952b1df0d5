"""The Processor API: custom processors with state stores and punctuation (Kafka Streams'
``org.apache.kafka.streams.processor.api``).

A processor is a class referenced by import path in a ``process`` node (DSL: ``stream.process(MyProcessor,
stores=["my-store"])``); the runtime creates one instance per task and calls

- ``init(context)`` once, when the task starts running (its stores are restored by then);
- ``process(record)`` for every record that reaches the node, in order;
- ``close()`` when the task closes (rebalance, shutdown).

``stream.process_values(MyFixedKeyProcessor, ...)`` (Kafka's ``processValues``, KIP-820) takes a
``FixedKeyProcessor`` instead: it sees ``FixedKeyRecord`` objects, which have no ``with_key``, and its context
forwards only those, so every record it forwards keeps an input record's key (no repartition follows it).

Inside those calls (and inside punctuators) ``context.forward`` sends records to the node's children,
``context.get_state_store(name)`` returns a store named in the node's ``stores``, and
``context.schedule(interval_ms, PunctuationType.STREAM_TIME | WALL_CLOCK_TIME, punctuator)`` registers a
callback ``punctuator(timestamp_ms)``:

- ``STREAM_TIME``: aligned to 0, fires when the task's stream time (largest record timestamp processed)
  reaches the next multiple of the interval, once per advance however many intervals it skipped, with the
  stream time as argument (Kafka's ``PunctuationQueue`` / ``PunctuationSchedule.next``);
- ``WALL_CLOCK_TIME``: first at ``now + interval``, then every interval of the stream thread's clock, with
  the clock's time as argument (missed intervals are skipped, not caught up).

Example::

    class Dedupe(Processor):
        def init(self, context):
            super().init(context)
            self.seen = context.get_state_store("seen")

        def process(self, record):
            if self.seen.get(record.key) is None:
                self.seen.put(record.key, record.timestamp)
                self.context.forward(record)
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Generic, Protocol, Self, TypeVar

__all__ = [
    "Cancellable",
    "FixedKeyProcessor",
    "FixedKeyProcessorContext",
    "FixedKeyRecord",
    "KeyValueStore",
    "ProcessingContext",
    "Processor",
    "ProcessorContext",
    "PunctuationType",
    "Punctuator",
    "Record",
]

Headers = tuple[tuple[str, bytes | None], ...]
"""Record headers as ``(name, value)`` pairs."""

_ContextT = TypeVar("_ContextT")
_RecordT = TypeVar("_RecordT")

Punctuator = Callable[[int], None]
"""``fn(timestamp_ms)``: called by a punctuation schedule (Kafka's ``Punctuator.punctuate``)."""


class PunctuationType(enum.Enum):
    """Which time drives a punctuation schedule (Kafka's ``PunctuationType``)."""

    STREAM_TIME = "stream_time"
    WALL_CLOCK_TIME = "wall_clock_time"


@dataclass(frozen=True, slots=True)
class _RecordFields:
    """Key, value, timestamp (epoch ms) and headers of a record, and the copies every record kind makes."""

    key: Any
    value: Any
    timestamp: int
    headers: Headers = ()

    def with_value(self, value: Any) -> Self:
        return replace(self, value=value)

    def with_timestamp(self, timestamp: int) -> Self:
        """A copy with ``timestamp``; ValueError when it is negative (Kafka's rule)."""
        if timestamp < 0:
            raise ValueError(f"timestamp must not be negative, got {timestamp}")
        return replace(self, timestamp=timestamp)

    def with_headers(self, headers: Sequence[tuple[str, bytes | None]]) -> Self:
        return replace(self, headers=tuple(headers))


@dataclass(frozen=True, slots=True)
class Record(_RecordFields):
    """A record as a processor sees it (Kafka's ``api.Record``): key, value, timestamp (epoch ms), headers.

    Immutable; ``with_key`` / ``with_value`` / ``with_timestamp`` / ``with_headers`` return modified copies.
    """

    def with_key(self, key: Any) -> Record:
        return replace(self, key=key)


@dataclass(frozen=True, slots=True)
class FixedKeyRecord(_RecordFields):
    """A record as a ``FixedKeyProcessor`` sees it (Kafka's ``api.FixedKeyRecord``, KIP-820): like ``Record`` but
    without ``with_key``, so what the processor forwards keeps the key of the record it came from. The runtime
    makes one per input record; ``with_value`` / ``with_timestamp`` / ``with_headers`` return modified copies.
    """


class Cancellable(Protocol):
    """Handle of a punctuation schedule (Kafka's ``Cancellable``)."""

    def cancel(self) -> None:
        """Stop the schedule; a punctuator may cancel its own schedule while it runs."""
        ...


class KeyValueStore(Protocol):
    """A task's key-value store as a processor uses it (keys and values typed by the store's serdes).

    Writes are buffered until the task commits and logged to the store's changelog, so they survive a
    crash exactly as far as the consumed offsets do. Keys must not be ``None`` (ValueError).
    """

    name: str

    def get(self, key: Any) -> Any:
        """The value of ``key``, or ``None``."""
        ...

    def put(self, key: Any, value: Any) -> None:
        """Store ``value`` for ``key``; ``None`` deletes it."""
        ...

    def put_if_absent(self, key: Any, value: Any) -> Any:
        """Store ``value`` only when ``key`` has none; returns the previous value (``None`` if it was stored)."""
        ...

    def delete(self, key: Any) -> Any:
        """Delete ``key``; returns its previous value or ``None``."""
        ...


class ProcessingContext(ABC):
    """What every processor may do but forward (Kafka's ``api.ProcessingContext``); the runtime provides the
    implementation."""

    @property
    @abstractmethod
    def application_id(self) -> str:
        """The ``application.id``."""

    @property
    @abstractmethod
    def task_id(self) -> str:
        """The task running this processor instance: ``<subtopology>_<partition>``."""

    @abstractmethod
    def get_state_store(self, name: str) -> KeyValueStore:
        """The store ``name``; KeyError (naming the node's stores) if the node does not declare it."""

    @abstractmethod
    def schedule(self, interval_ms: int, punctuation_type: PunctuationType, punctuator: Punctuator) -> Cancellable:
        """Call ``punctuator(timestamp_ms)`` every ``interval_ms`` of stream or wall-clock time (see the module
        docstring). Raises ValueError when ``interval_ms < 1``."""

    @abstractmethod
    def current_stream_time_ms(self) -> int:
        """The task's stream time: the largest timestamp of a record it processed (-1 before the first)."""

    @abstractmethod
    def current_system_time_ms(self) -> int:
        """The stream thread's wall-clock time (epoch ms; the test driver's controlled clock)."""


class ProcessorContext(ProcessingContext):
    """What a processor may do (Kafka's ``api.ProcessorContext``): a ``ProcessingContext`` that forwards any key."""

    @abstractmethod
    def forward(self, record: Record | Any, value: Any = ..., *, timestamp: int | None = None) -> None:
        """Send a record to every child of this node: ``forward(record)`` or ``forward(key, value)``.

        The ``key, value`` form uses ``timestamp`` if given, else the current record's timestamp (inside a
        punctuator: the punctuation's time). Raises RuntimeError outside ``process`` / ``init`` / punctuators.
        """


class FixedKeyProcessorContext(ProcessingContext):
    """What a ``FixedKeyProcessor`` may do (Kafka's ``api.FixedKeyProcessorContext``): forward only
    ``FixedKeyRecord`` objects, so every forwarded record keeps an input record's key."""

    @abstractmethod
    def forward(self, record: FixedKeyRecord) -> None:
        """Send ``record`` to every child of this node. Raises TypeError for anything but a ``FixedKeyRecord``."""


class _UserProcessor(ABC, Generic[_ContextT, _RecordT]):
    """What both processor kinds share: ``init`` keeps the context as ``self.context``, ``close`` does nothing by
    default, ``process`` is the user's."""

    context: _ContextT

    def init(self, context: _ContextT) -> None:
        self.context = context

    @abstractmethod
    def process(self, record: _RecordT) -> None:
        """Handle one record; forward results with ``self.context.forward``."""

    def close(self) -> None:
        """Release what ``init`` acquired (stores are closed by the runtime)."""


class Processor(_UserProcessor[ProcessorContext, Record]):
    """Base class of user processors (Kafka's ``api.Processor`` / ``ContextualProcessor``).

    ``init`` stores the context as ``self.context``; override it (calling ``super().init(context)``) to look
    up stores or schedule punctuations. ``close`` does nothing by default. ``process(record)`` handles a
    ``Record``; ``self.context.forward`` sends records with any key.
    """


class FixedKeyProcessor(_UserProcessor[FixedKeyProcessorContext, FixedKeyRecord]):
    """Base class of the processors of ``KStream.process_values`` (Kafka's ``api.FixedKeyProcessor``, KIP-820): a
    processor that may change values, timestamps and headers but never keys, so no repartition follows it.

    As ``Processor``, but ``process(record)`` handles a ``FixedKeyRecord`` and ``self.context.forward`` takes only
    ``FixedKeyRecord`` objects (``record.with_value(...)``).
    """
