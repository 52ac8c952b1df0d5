"""The grace buffer of a stream-table join (KIP-923, Kafka's ``RocksDBTimeOrderedKeyValueBuffer`` as
``KStreamKTableJoinProcessor`` uses it): stream records held until the join's stream time passes their timestamp
plus the grace period, then handed back in timestamp order.

Rules (Kafka's): the buffer's stream time is the largest timestamp put into it. ``put`` refuses (returns False) a
record older than ``stream time - grace`` (the caller joins it at once); otherwise it is stored. ``evict`` hands
back and deletes every record with ``timestamp <= stream time - grace``, ordered by the store key.

Store and changelog records are Kafka's (``<app>-<store>-changelog``, compacted):

- key: ``timestamp (8-byte BE) + serialized key + sequence number (4-byte BE)`` (``TimeFirstWindowKeySchema``: by
  timestamp, then key bytes, then arrival);
- value: Kafka's ``BufferValue`` with the 8-byte buffer time (0) after it: the record context
  (``ProcessorRecordContext.serialize``: timestamp and offset, 8-byte BE each; topic as a 4-byte BE length and
  UTF-8; partition, 4-byte BE; the headers as a 4-byte BE count and per header a length-prefixed UTF-8 name and a
  length-prefixed value, -1 for null), then the prior and old values (null: -1) and the serialized stream value,
  each length-prefixed;
- an evicted record is deleted: a tombstone.

The stream time is kept in the persistent store's metadata (``GraceBufferStore``, never logged); a restore sets it
to the largest timestamp of the restored keys, tombstones included, as Kafka's segmented store does when it
replays the changelog. The whole buffer is mirrored in memory (it holds at most a grace period of records) and
rebuilt from the store on first use; an evicted record is joined with its own headers (the record context is
restored while it is joined, as Kafka's ``emit`` does).
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from streamapp.kafka.types import Headers
from streamapp.serdes import Serde
from streamapp.state.changelogging import StreamTimeChangeLoggingStore
from streamapp.state.suppression_buffer import SizedReader, append_sized

__all__ = ["NO_ORIGIN", "BufferedRecord", "GraceBuffer", "GraceBufferStore", "RecordOrigin"]

_TIME = struct.Struct(">q")
_SEQ = struct.Struct(">i")
_CONTEXT = struct.Struct(">qq")
_INT = struct.Struct(">i")
_KEY_OVERHEAD = _TIME.size + _SEQ.size


class RecordOrigin(NamedTuple):
    """Where a buffered record came from (Kafka's ``ProcessorRecordContext`` without the timestamp): its topic,
    partition, offset and headers (``None``: none). A record with no source (a punctuation) has topic ``""`` and
    partition and offset -1."""

    topic: str = ""
    partition: int = -1
    offset: int = -1
    headers: Headers | None = None


NO_ORIGIN = RecordOrigin()
"""The origin of a record that has none (a test's, a punctuation's)."""


class BufferedRecord(NamedTuple):
    """A record handed back by ``GraceBuffer.evict``: key, value, timestamp (ms) and origin."""

    key: Any
    value: Any
    timestamp: int
    origin: RecordOrigin


class GraceBufferStore(StreamTimeChangeLoggingStore):
    """The changelogging store under a ``GraceBuffer``: its stream time is kept beside the records (module
    docstring)."""

    STREAM_TIME_KEY = b"grace.observed.stream.time"

    def restore(self, batch: Mapping[bytes, tuple[bytes | None, int]], last_offset: int) -> None:
        """Apply changelog records ``{key: (value, record timestamp)}``; the stream time becomes the largest
        timestamp of their keys (tombstones included)."""
        times = [int(_TIME.unpack_from(key)[0]) for key in batch if len(key) >= _KEY_OVERHEAD]
        self.stream_time = max([self.stream_time, *times])
        self._write({key: value for key, (value, _) in batch.items()}, last_offset)


class GraceBuffer:
    """Stream records waiting out a grace period (module docstring). ``grace_ms``: the grace period (ms)."""

    def __init__(self, store: GraceBufferStore, key_serde: Serde, value_serde: Serde, grace_ms: int) -> None:
        self.name = store.name
        self._store = store
        self._key_serde = key_serde
        self._value_serde = value_serde
        self.grace_ms = grace_ms
        self._keys: list[bytes] | None = None  # sorted store keys, loaded on first use
        self._seq = 0

    def _loaded(self) -> list[bytes]:
        if self._keys is None:
            self._keys = sorted(key for key, _ in self._store.inner.items())
            seqs = (int(_SEQ.unpack_from(key, len(key) - _SEQ.size)[0]) for key in self._keys)
            self._seq = (1 + max(seqs, default=-1)) & 0x7FFFFFFF
        return self._keys

    @property
    def stream_time(self) -> int:
        """The largest timestamp put (ms), -1 before the first put."""
        return self._store.stream_time

    def __len__(self) -> int:
        return len(self._loaded())

    def put(self, key: Any, value: Any, timestamp: int, origin: RecordOrigin = NO_ORIGIN) -> bool:
        """Buffer record ``(key, value)`` at ``timestamp`` (ms) from ``origin``; False (nothing stored) when it is
        older than ``stream time - grace``. ValueError for a null key."""
        keys = self._loaded()
        if self._store.stream_time - self.grace_ms > timestamp:
            return False
        raw_key = self._key_serde.serialize(key)
        if raw_key is None:
            raise ValueError(f"grace buffer '{self.name}': keys must not be null")
        store_key = _TIME.pack(timestamp) + raw_key + _SEQ.pack(self._seq)
        self._seq = (self._seq + 1) & 0x7FFFFFFF
        self._store.put(store_key, encode_buffer_value(self._value_serde.serialize(value), timestamp, origin))
        bisect.insort(keys, store_key)
        self._store.stream_time = max(self._store.stream_time, timestamp)
        return True

    def evict(self, emit: Callable[[BufferedRecord], None]) -> None:
        """Delete and pass to ``emit`` every record with ``timestamp <= stream time - grace``, in store-key order."""
        keys = self._loaded()
        horizon = self._store.stream_time - self.grace_ms
        while keys and _TIME.unpack_from(keys[0])[0] <= horizon:
            store_key = keys.pop(0)
            raw = self._store.get(store_key)
            self._store.put(store_key, None)
            if raw is None:
                continue
            value, timestamp, origin = decode_buffer_value(raw)
            key = self._key_serde.deserialize(store_key[_TIME.size : -_SEQ.size])
            emit(BufferedRecord(key, self._value_serde.deserialize(value), timestamp, origin))


def encode_buffer_value(value: bytes | None, timestamp: int, origin: RecordOrigin) -> bytes:
    """Kafka's ``BufferValue.serialize(8)`` with buffer time 0 after it (module docstring)."""
    parts = [_CONTEXT.pack(timestamp, origin.offset)]
    append_sized(parts, origin.topic.encode())
    parts.append(_INT.pack(origin.partition))
    headers = origin.headers or []
    parts.append(_INT.pack(len(headers)))
    for name, header_value in headers:
        append_sized(parts, name.encode())
        append_sized(parts, header_value)
    for part in (None, None, value):  # prior, old, new
        append_sized(parts, part)
    parts.append(_TIME.pack(0))
    return b"".join(parts)


def decode_buffer_value(raw: bytes) -> tuple[bytes | None, int, RecordOrigin]:
    """``(value bytes, timestamp, origin)`` of ``encode_buffer_value``'s bytes; ValueError when malformed."""
    reader = SizedReader(raw)
    timestamp, offset = reader.unpack(_CONTEXT)
    topic = (reader.sized() or b"").decode()
    (partition,) = reader.unpack(_INT)
    (count,) = reader.unpack(_INT)
    headers: Headers = []
    for _ in range(count):
        name = reader.sized()
        if name is None:
            raise ValueError("a header without a name")
        headers.append((name.decode(), reader.sized()))  # type: ignore[arg-type]  # a null value stays null
    reader.sized()  # prior value
    reader.sized()  # old value
    value = reader.sized()
    reader.unpack(_TIME)  # buffer time
    if not reader.at_end():
        raise ValueError(f"{len(raw) - reader.offset} trailing bytes in a grace buffer value")
    return value, timestamp, RecordOrigin(topic, partition, offset, headers or None)
