"""The changelogging store: a task's writes, buffered between commits and backed by a changelog topic.

Every write goes into an in-memory buffer (reads see it first). At commit the buffer is sent to the
store's changelog partition (``<applicationId>-<store>-changelog``, partition = the task's partition); the
buffer is applied to the persistent store, together with the offset of the last changelog record, only
after the commit succeeded (DESIGN.md §3). Sending the buffer rather than every write deduplicates the
changelog the way Kafka Streams' record cache does; the compacted changelog ends in the same state.

The commit protocol (``streamapp.processing.commit``) drives the three steps:
``send_changelog`` → (producer flush, offsets commit) → ``apply``; ``discard`` drops the buffer of a
task that lost its partitions.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping

from streamapp.kafka.types import ProducerClient, TopicPartition
from streamapp.state.stores import PersistentKeyValueStore

__all__ = ["ENTRY_OVERHEAD_BYTES", "ChangeLoggingKeyValueStore", "StreamTimeChangeLoggingStore"]

ENTRY_OVERHEAD_BYTES = 176
"""Python's memory per buffered key beyond the key and value lengths (CPython 3.11, 64-bit, measured with
tracemalloc): the dict slot (~40 B with the table's spare room), the ``(value, timestamp)`` tuple (56 B), the
timestamp int (32 B) and the two bytes objects' headers (2 x 33 B, rounded up by pymalloc). Counting it makes
``statestore.cache.max.bytes`` bound real memory: with 8-byte keys and values an entry is ~190 B, not 32 B."""


class ChangeLoggingKeyValueStore:
    """A bytes store whose writes are buffered, logged to ``changelog`` at commit and applied after it.

    ``timestamp`` returns the timestamp (epoch ms) of the record being processed; a changelog record
    carries the timestamp of the write it logs. Values are stored as given (``timestamped`` False); the
    timestamped variant is ``streamapp.state.timestamped.TimestampedChangeLoggingKeyValueStore``.
    """

    timestamped = False
    """Whether values are ``streamapp.state.timestamped.encode(value, timestamp)`` bytes (KIP-258)."""

    def __init__(
        self,
        inner: PersistentKeyValueStore,
        changelog: TopicPartition,
        timestamp: Callable[[], int],
    ) -> None:
        self.name = inner.name
        self.inner = inner
        self.changelog = changelog
        self._timestamp = timestamp
        self._pending: dict[bytes, tuple[bytes | None, int]] = {}
        self._pending_bytes = 0
        self._sent_offset: int | None = None

    def get(self, key: bytes) -> bytes | None:
        pending = self._pending.get(key)
        if pending is not None:
            return pending[0]
        return self.inner.get(key)

    def put(self, key: bytes, value: bytes | None) -> None:
        self.put_at(key, value, self._timestamp())

    def record_timestamp(self) -> int:
        """The timestamp (epoch ms) of the record being processed: what ``put`` logs a write at."""
        return self._timestamp()

    def bind_record_timestamp(self, timestamp: Callable[[], int]) -> None:
        """Log later writes at ``timestamp()`` (the store changes owner: a standby's store becomes an active
        task's, ``streamapp.processing.state_manager``)."""
        self._timestamp = timestamp

    def put_at(self, key: bytes, value: bytes | None, timestamp: int) -> None:
        """Buffer a write whose changelog record gets ``timestamp`` (epoch ms; a timestamped store logs a value
        at its own timestamp). ``put`` uses the timestamp of the record being processed; the record cache
        passes the one of the record that made the flushed entry."""
        pending = self._pending
        size = len(pending)
        pending[key] = (value, self._log_timestamp(value, timestamp))
        if len(pending) != size:  # a new key; an overwrite keeps the entry (its value size is not re-counted)
            self._pending_bytes += len(key) + (len(value) if value is not None else 0) + ENTRY_OVERHEAD_BYTES

    @staticmethod
    def _logged_value(value: bytes | None) -> bytes | None:
        """The changelog record's value for a stored ``value``: the same bytes."""
        return value

    def _log_timestamp(self, value: bytes | None, timestamp: int) -> int:
        """The timestamp of the changelog record that will log ``value`` written at ``timestamp``."""
        return timestamp

    @property
    def pending_bytes(self) -> int:
        """Approximate Python memory of the write buffer in bytes: per distinct key its key and first value
        lengths plus ``ENTRY_OVERHEAD_BYTES``."""
        return self._pending_bytes

    @property
    def has_pending(self) -> bool:
        return bool(self._pending)

    def pending_keys(self) -> list[bytes]:
        """The keys of the buffered writes (not yet applied to the persistent store)."""
        return list(self._pending)

    def send_changelog(self, producer: ProducerClient) -> None:
        """Queue one changelog record per buffered key (latest value; ``None`` = tombstone).

        Only the last record asks for its offset: the producer is idempotent, so the records of one partition are
        acknowledged in the order they were sent and the last one's offset is the batch's largest (a failure of
        any record fails the flush that ``apply`` must follow)."""
        pending = self._pending
        if not pending:
            return
        logged_value, send = self._logged_value, producer.send
        topic, partition = self.changelog.topic, self.changelog.partition
        last = next(reversed(pending))
        for key, (value, timestamp) in pending.items():
            send(
                topic,
                key,
                logged_value(value),
                timestamp,
                partition,
                self._delivered if key is last else None,
            )

    def apply(self) -> None:
        """Write the buffer and the last acknowledged changelog offset to the persistent store atomically.

        Call only after the producer flushed the records ``send_changelog`` queued.
        """
        if not self._pending:
            return
        if self._sent_offset is None:
            raise RuntimeError(f"store '{self.name}': apply() before the changelog records were acknowledged")
        self.inner.write({key: value for key, (value, _) in self._pending.items()}, self._sent_offset)
        self.discard()

    def discard(self) -> None:
        """Drop the buffered writes (the task is closed without a commit)."""
        self._pending.clear()
        self._pending_bytes = 0
        self._sent_offset = None

    def changelog_offset(self) -> int | None:
        """Offset of the last changelog record applied to the persistent store."""
        return self.inner.changelog_offset()

    def restore(self, batch: Mapping[bytes, tuple[bytes | None, int]], last_offset: int) -> None:
        """Apply changelog records ``{key: (value, record timestamp)}`` read during restore, with the offset of
        the last one (the timestamps are dropped: this store keeps values only)."""
        self.inner.write({key: value for key, (value, _) in batch.items()}, last_offset)

    def close(self) -> None:
        self.discard()
        self.inner.close()

    def _delivered(self, partition: TopicPartition, offset: int) -> None:
        if self._sent_offset is None or offset > self._sent_offset:
            self._sent_offset = offset


_STREAM_TIME = struct.Struct(">q")


class StreamTimeChangeLoggingStore(ChangeLoggingKeyValueStore):
    """A ``ChangeLoggingKeyValueStore`` that keeps an observed stream time (epoch ms, -1: none) beside its data: in
    the persistent store's metadata (``STREAM_TIME_KEY``, never logged), written with each applied batch, so a
    reopened store resumes it; ``discard`` rolls it back to the applied one. Subclasses advance ``stream_time``
    (the versioned store, ``streamapp.state.versioned``; the grace buffer, ``streamapp.state.grace_buffer``)."""

    STREAM_TIME_KEY = b"observed.stream.time"

    def __init__(self, inner: PersistentKeyValueStore, changelog: TopicPartition, timestamp: Callable[[], int]) -> None:
        super().__init__(inner, changelog, timestamp)
        stored = inner.get_metadata(self.STREAM_TIME_KEY)
        self._applied_stream_time = -1 if stored is None else int(_STREAM_TIME.unpack(stored)[0])
        self.stream_time = self._applied_stream_time
        """The observed stream time (ms), applied or not."""

    def apply(self) -> None:
        """Write the buffer, the stream time and the last acknowledged changelog offset atomically."""
        if not self._pending:
            self.discard()
            return
        if self._sent_offset is None:
            raise RuntimeError(f"store '{self.name}': apply() before the changelog records were acknowledged")
        self._write({key: value for key, (value, _) in self._pending.items()}, self._sent_offset)

    def _write(self, batch: Mapping[bytes, bytes | None], offset: int) -> None:
        """Write ``batch`` with changelog offset ``offset`` and the stream time, then clear the buffer."""
        self.inner.write(batch, offset, {self.STREAM_TIME_KEY: _STREAM_TIME.pack(self.stream_time)})
        self._applied_stream_time = self.stream_time
        self.discard()

    def discard(self) -> None:
        super().discard()
        self.stream_time = self._applied_stream_time
