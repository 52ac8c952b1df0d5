"""Test input and output topics of the TopologyTestDriver (Kafka's ``TestInputTopic`` / ``TestOutputTopic``).

A ``TestInputTopic`` serializes typed records with its serdes and pipes them into the driver, which
processes each one to completion before ``pipe_input`` returns. A ``TestOutputTopic`` reads, with its
serdes, the records the topology produced to a topic, in production order; reading consumes them (two
output topics of the same topic name share one read position, as in Kafka's driver).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from streamapp.kafka.types import ConsumerRecord, Headers
from streamapp.serdes import Serde

__all__ = ["EmptyTopicError", "TestInputTopic", "TestOutputTopic", "TestRecord"]


class EmptyTopicError(LookupError):
    """A read from a test output topic that has no unread record (Kafka's ``NoSuchElementException``)."""


@dataclass(frozen=True)
class TestRecord:
    """A typed record: key, value, timestamp (epoch ms) and headers (Kafka's ``test.TestRecord``).

    ``headers``: ``(name, bytes value)`` pairs in order, a name may repeat (Kafka's ``Headers``); a list or
    any sequence of pairs is accepted and kept as a tuple. ``record_time`` is the timestamp as an aware UTC
    ``datetime`` (Kafka's ``getRecordTime()``), ``None`` without one. Records read from an output topic also
    carry the ``partition`` and ``offset`` they were written to; those two do not take part in equality, so
    ``TestRecord("a", 1, 5)`` equals a record read back (key, value, timestamp and headers do, as in Kafka).
    """

    __test__ = False  # not a pytest test class

    key: Any
    value: Any
    timestamp_ms: int | None = None
    headers: Sequence[tuple[str, bytes]] = ()
    partition: int | None = field(default=None, compare=False)
    offset: int | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.headers, tuple) or any(not isinstance(h, tuple) for h in self.headers):
            object.__setattr__(self, "headers", _header_tuple(self.headers))

    @property
    def record_time(self) -> datetime | None:
        """The timestamp as a UTC ``datetime`` (Kafka's ``getRecordTime()``), ``None`` without one."""
        return None if self.timestamp_ms is None else datetime.fromtimestamp(self.timestamp_ms / 1000, UTC)

    def header(self, name: str) -> bytes | None:
        """The value of the last header called ``name`` (Kafka's ``Headers.lastHeader``), ``None`` if absent."""
        return next((value for key, value in reversed(self.headers) if key == name), None)


HeadersArg = Sequence[tuple[str, bytes]] | None
"""Record headers as ``(name, bytes value)`` pairs, or ``None`` for none."""


def _header_tuple(headers: HeadersArg) -> tuple[tuple[str, bytes], ...]:
    """The headers as a tuple of pairs; TypeError for a name that is not a string or a value not bytes."""
    out = []
    for name, value in headers or ():
        if not isinstance(name, str) or not isinstance(value, bytes | bytearray):
            raise TypeError(f"a header is a (str, bytes) pair, got ({name!r}, {value!r})")
        out.append((name, bytes(value)))
    return tuple(out)


def _epoch_ms(timestamp: int | datetime | None) -> int | None:
    """Epoch ms of a timestamp given as epoch ms or as an aware ``datetime`` (Kafka's ``Instant``)."""
    if isinstance(timestamp, datetime):
        if timestamp.tzinfo is None:
            raise ValueError(f"record time {timestamp} has no time zone (pass an aware datetime)")
        return int(timestamp.timestamp() * 1000)
    return timestamp


class _Piping(Protocol):
    def _pipe(
        self, topic: str, key: bytes | None, value: bytes | None, timestamp_ms: int, headers: Headers | None
    ) -> None: ...


class TestInputTopic:
    """Pipes typed records into one source topic of a driver (create with ``driver.create_input_topic``).

    A record without a timestamp gets the topic's current time, which then advances by ``auto_advance_ms``
    (Kafka's ``TestInputTopic``). Advancing a topic's time moves neither stream time nor wall-clock time.
    """

    __test__ = False

    def __init__(
        self,
        driver: _Piping,
        topic: str,
        key_serde: Serde,
        value_serde: Serde,
        start_timestamp_ms: int,
        auto_advance_ms: int,
    ) -> None:
        if auto_advance_ms < 0:
            raise ValueError(f"auto_advance_ms must not be negative, got {auto_advance_ms}")
        self.topic = topic
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.current_time_ms = start_timestamp_ms
        self._auto_advance_ms = auto_advance_ms
        self._driver = driver

    def __repr__(self) -> str:
        return f"TestInputTopic({self.topic!r}, key={self.key_serde.name}, value={self.value_serde.name})"

    def advance_time(self, ms: int) -> None:
        """Advance the topic's time used for records piped without a timestamp. Raises ValueError if < 0."""
        if ms < 0:
            raise ValueError(f"advance must not be negative, got {ms}")
        self.current_time_ms += ms

    def pipe_input(
        self,
        key: Any = None,
        value: Any = None,
        timestamp_ms: int | datetime | None = None,
        *,
        headers: HeadersArg = None,
    ) -> None:
        """Serialize one record, pipe it in and process it (and everything it causes) to completion.

        ``pipe_input(TestRecord(...))`` pipes a test record with its timestamp and headers (Kafka's
        ``pipeInput(TestRecord)``); ``timestamp_ms`` may be an aware ``datetime`` (Kafka's ``Instant``);
        ``headers`` are ``(name, bytes)`` pairs stored with the input record. Raises SerdeError when a serde
        rejects the key or value, TypeError for a malformed header, and the ``ProcessingError`` of the stream
        task when processing fails.
        """
        if isinstance(key, TestRecord) and value is None and timestamp_ms is None and headers is None:
            key, value, timestamp_ms, headers = key.key, key.value, key.timestamp_ms, key.headers
        header_pairs = list(_header_tuple(headers)) or None
        timestamp = _epoch_ms(timestamp_ms)
        if timestamp is None:
            timestamp = self.current_time_ms
            self.current_time_ms += self._auto_advance_ms
        raw_key = self.key_serde.serialize(key)
        raw_value = self.value_serde.serialize(value)
        self._driver._pipe(self.topic, raw_key, raw_value, timestamp, header_pairs)

    def pipe_records(self, records: Iterable[TestRecord | tuple[Any, Any] | tuple[Any, Any, int | None]]) -> None:
        """Pipe records one after the other: ``TestRecord``s or ``(key, value[, timestamp_ms])`` tuples."""
        for record in records:
            if isinstance(record, TestRecord):
                self.pipe_input(record)
            elif len(record) == 2:
                self.pipe_input(record[0], record[1])
            else:
                self.pipe_input(record[0], record[1], record[2])

    def pipe_values(self, values: Iterable[Any]) -> None:
        """Pipe records with a null key and these values."""
        for value in values:
            self.pipe_input(None, value)


class _Reading(Protocol):
    def _read(self, topic: str) -> ConsumerRecord | None: ...

    def _unread(self, topic: str) -> int: ...


class TestOutputTopic:
    """Reads what the topology produced to one topic (create with ``driver.create_output_topic``)."""

    __test__ = False

    def __init__(self, driver: _Reading, topic: str, key_serde: Serde, value_serde: Serde) -> None:
        self.topic = topic
        self.key_serde = key_serde
        self.value_serde = value_serde
        self._driver = driver

    def __repr__(self) -> str:
        return (
            f"TestOutputTopic({self.topic!r}, key={self.key_serde.name}, value={self.value_serde.name}, "
            f"unread={self.get_queue_size()})"
        )

    def read_record(self) -> TestRecord:
        """The next unread record, with its timestamp and headers. Raises EmptyTopicError when there is none,
        SerdeError on bad bytes."""
        record = self._driver._read(self.topic)
        if record is None:
            raise EmptyTopicError(f"no unread record in output topic '{self.topic}'")
        return TestRecord(
            key=self.key_serde.deserialize(record.key),
            value=self.value_serde.deserialize(record.value),
            timestamp_ms=record.timestamp,
            headers=tuple(record.headers or ()),
            partition=record.partition,
            offset=record.offset,
        )

    def read_value(self) -> Any:
        return self.read_record().value

    def read_key_value(self) -> tuple[Any, Any]:
        record = self.read_record()
        return record.key, record.value

    def read_records_to_list(self) -> list[TestRecord]:
        """Every unread record, in production order (a table's output lists every update)."""
        out: list[TestRecord] = []
        while not self.is_empty():
            out.append(self.read_record())
        return out

    def read_key_values_to_list(self) -> list[tuple[Any, Any]]:
        return [(record.key, record.value) for record in self.read_records_to_list()]

    def read_values_to_list(self) -> list[Any]:
        return [record.value for record in self.read_records_to_list()]

    def read_key_values_to_map(self) -> dict[Any, Any]:
        """The last value per key of every unread record (a tombstone leaves the key mapped to None, as in
        Kafka's ``readKeyValuesToMap``). Raises ValueError on a record with a null key."""
        out: dict[Any, Any] = {}
        for record in self.read_records_to_list():
            if record.key is None:
                raise ValueError(f"output topic '{self.topic}': null keys cannot be read into a map")
            out[record.key] = record.value
        return out

    def get_queue_size(self) -> int:
        """How many records are unread."""
        return self._driver._unread(self.topic)

    def is_empty(self) -> bool:
        return self.get_queue_size() == 0
