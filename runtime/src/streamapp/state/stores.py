"""Key-value store interfaces shared by every backend and wrapper.

Layers, innermost first (Kafka Streams' store builder stacks them the same way):

- a ``PersistentKeyValueStore`` of bytes (``RocksDBStore``, ``InMemoryKeyValueStore``) that applies a batch
  of writes atomically *together with* the changelog offset the batch corresponds to;
- ``ChangeLoggingKeyValueStore`` (``streamapp.state.changelogging``): buffers a task's writes between
  commits, sends them to the changelog at commit and applies them to the persistent store after it;
- ``TimestampedChangeLoggingKeyValueStore`` (``streamapp.state.timestamped``) in place of the former for the DSL's
  key-value stores (KIP-258): values kept with their timestamps;
- ``TypedKeyValueStore``: serdes on top, the view processors use.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

from streamapp.serdes import Serde

__all__ = [
    "NO_TIMESTAMP",
    "VALUE_TIMESTAMP",
    "BytesKeyValueStore",
    "PersistentKeyValueStore",
    "StoreLockedError",
    "StoreSerializationError",
    "TypedKeyValueStore",
    "decode_timestamped",
    "encode_timestamped",
    "store_mismatch",
]


class StoreLockedError(RuntimeError):
    """A persistent store's folder is locked by another open instance (another process or stream thread still
    owns the task; ``streamapp.state.rocksdb`` raises it); opening may succeed once it has closed the store."""


VALUE_TIMESTAMP = struct.Struct(">q")
"""The 8-byte big-endian timestamp (epoch ms) in front of a timestamped store's value (Kafka's
``ValueAndTimestampSerializer``; ``streamapp.state.timestamped``)."""

NO_TIMESTAMP = -1
"""The timestamp of an entry that has none (Kafka's ``ConsumerRecord.NO_TIMESTAMP``)."""


def encode_timestamped(value: bytes, timestamp: int) -> bytes:
    """A timestamped store's value: ``timestamp`` (epoch ms, 8 bytes big-endian) followed by ``value``."""
    return VALUE_TIMESTAMP.pack(timestamp) + value


def decode_timestamped(raw: bytes) -> tuple[bytes, int]:
    """``(value bytes, timestamp)`` of a timestamped store's value. ValueError for fewer than 8 bytes (not this
    format)."""
    if len(raw) < VALUE_TIMESTAMP.size:
        raise ValueError(f"a timestamped store value has at least {VALUE_TIMESTAMP.size} bytes, got {len(raw)}")
    timestamp: int = VALUE_TIMESTAMP.unpack_from(raw)[0]
    return raw[VALUE_TIMESTAMP.size :], timestamp


class BytesKeyValueStore(Protocol):
    """A key-value store of raw bytes. ``put(key, None)`` deletes the key (a tombstone)."""

    name: str

    def get(self, key: bytes) -> bytes | None: ...

    def put(self, key: bytes, value: bytes | None) -> None: ...


class PersistentKeyValueStore(Protocol):
    """The storage engine under a store: batched atomic writes that carry their changelog offset.

    ``changelog_offset()`` is the offset of the last changelog record reflected in the store, or ``None``
    for a store that never applied one; restore resumes at that offset + 1.
    """

    name: str

    def get(self, key: bytes) -> bytes | None: ...

    def write(
        self,
        batch: Mapping[bytes, bytes | None],
        changelog_offset: int | None,
        metadata: Mapping[bytes, bytes] | None = None,
    ) -> None:
        """Apply every put/delete in ``batch``, record ``changelog_offset`` and set the ``metadata`` entries
        (outside the data's key space, e.g. the value format) in one atomic step."""
        ...

    def changelog_offset(self) -> int | None: ...

    def get_metadata(self, key: bytes) -> bytes | None:
        """A metadata entry written by ``write(..., metadata=...)``, or ``None``."""
        ...

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        """Every key and value, in key order."""
        ...

    def close(self) -> None: ...


class StoreSerializationError(ValueError):
    """A processor's store could not serialize what the processor wrote, with the store's serdes: a processing
    error (processing.exception.handler), as in Kafka, where ``StateSerdes`` raises a ``StreamsException`` out of
    the processor's ``put``. Behind the record cache a value may be serialized only when its entry is flushed
    (``streamapp.state.record_cache``): the cached store raises it there, at commit or on an eviction."""


def store_mismatch(
    node: str, store: str, key: Any, value: Any, exc: Exception, *, flushed: bool = False
) -> StoreSerializationError:
    """The error for a value ``store``'s value serde rejected when processor ``node`` wrote it (Kafka's
    ``StateSerdes.rawValue`` message, plus the node and the store; ``flushed``: the record cache serialized it when
    it flushed the entry). Built only once the write failed: the processors and the cached stores' flushes catch
    the serde's error and re-raise this, so a write that fits costs nothing more."""
    where = f"node '{node}' " if node else ""
    when = " (when the record cache flushed it)" if flushed else ""
    return StoreSerializationError(
        f"{where}cannot write the value of key {key!r} to its store '{store}'{when}: the store's value serde is not "
        f"compatible with the value's type ({type(value).__name__}): {exc}. Give the step that writes the store the "
        "serde of its values (count / reduce / aggregate(..., value_serde=...), Kafka's Materialized; a reduce's "
        "store takes the grouped stream's or table's value serde, group_by(..., value_serde=...): docs/serdes.md)"
    )


class TypedKeyValueStore:
    """A bytes store seen through key and value serdes: what processors read and write.

    Over a timestamped bytes store (``inner.timestamped``, ``streamapp.state.timestamped``) it is Kafka's
    ``TimestampedKeyValueStore``: ``get_with_timestamp`` returns ``(value, timestamp)`` and ``put`` stores the
    given timestamp (epoch ms) next to the value; ``get`` still returns the value alone. Over a plain store
    timestamps are not kept: ``get_with_timestamp`` reports ``NO_TIMESTAMP`` (-1), like Kafka's adapter of a
    plain store.
    """

    def __init__(self, inner: BytesKeyValueStore, key_serde: Serde, value_serde: Serde) -> None:
        self.name = inner.name
        self._inner = inner
        self._key_serde = key_serde
        self._value_serde = value_serde
        self.timestamped: bool = getattr(inner, "timestamped", False)
        self._put_at: Callable[[bytes, bytes | None, int], None] | None = getattr(inner, "put_at", None)
        """The changelogging store's write at a given changelog timestamp, when ``inner`` has one."""
        self.cached = False
        """Whether writes wait in the record cache (``streamapp.state.record_cache.CachingKeyValueStore``): the
        processor then forwards through ``set_flush_listener`` instead of after each write."""

    def get(self, key: Any) -> Any:
        """The value stored for ``key``, or ``None``."""
        found = self.get_with_timestamp(key)
        return None if found is None else found[0]

    def get_with_timestamp(self, key: Any) -> tuple[Any, int] | None:
        """``(value, timestamp)`` stored for ``key`` (timestamp -1 when the store keeps none), or ``None``."""
        return self.get_raw_key(self.raw_key(key))

    def raw_key(self, key: Any) -> bytes:
        """``key`` serialized, for ``get_raw_key`` / ``put_raw_key`` (a read-modify-write serializes it once).
        ValueError for a null key."""
        raw_key = self._key_serde.serialize(key)
        if raw_key is None:
            raise ValueError(f"store '{self.name}': keys must not be null")
        return raw_key

    def key_of(self, raw_key: bytes) -> Any:
        """The key a serialized ``raw_key`` stands for (the key serde's ``deserialize``)."""
        return self._key_serde.deserialize(raw_key)

    def get_raw_key(self, raw_key: bytes) -> tuple[Any, int] | None:
        """``get_with_timestamp`` of a key serialized by ``raw_key``."""
        raw = self._inner.get(raw_key)
        if raw is None:
            return None
        if self.timestamped:
            value, timestamp = decode_timestamped(raw)
            return self._value_serde.deserialize(value), timestamp
        return self._value_serde.deserialize(raw), NO_TIMESTAMP

    def set_flush_listener(self, listener: Callable[[Any, Any, Any, int], None], *, node: str = "") -> None:
        """Call ``listener(key, new value, old value, timestamp)`` for each entry the record cache flushes
        (Kafka's ``TimestampedCacheFlushListener``); ``node``: the processor that writes the store, named by the
        ``StoreSerializationError`` of a value the flush cannot serialize. Only a ``cached`` store
        (``streamapp.state.record_cache``) flushes; this one raises TypeError."""
        raise TypeError(f"store '{self.name}' is not cached: it has no flushes to listen to")

    def put(self, key: Any, value: Any, timestamp: int = NO_TIMESTAMP) -> None:
        """Store ``value`` for ``key`` (with ``timestamp``, epoch ms, in a timestamped store); ``None`` deletes it.
        Over a changelogging store, the changelog record gets ``timestamp`` (a tombstone too: Kafka logs a delete
        at the deleting record's time); without one (``NO_TIMESTAMP``), the time of the record being processed."""
        self.put_raw_key(self.raw_key(key), value, timestamp)

    def put_raw_key(self, raw_key: bytes, value: Any, timestamp: int = NO_TIMESTAMP) -> None:
        """``put`` for a key serialized by ``raw_key``."""
        self.put_serialized(raw_key, self._value_serde.serialize(value), timestamp)

    def put_serialized(self, raw_key: bytes, raw_value: bytes | None, timestamp: int = NO_TIMESTAMP) -> None:
        """``put`` of a key serialized by ``raw_key`` and a value already serialized by the value serde (``None``
        deletes): for a caller that needs the bytes too (the record cache sizes its entries with them)."""
        if raw_value is not None and self.timestamped:
            raw_value = encode_timestamped(raw_value, timestamp)
        put_at = self._put_at
        if put_at is not None and timestamp != NO_TIMESTAMP:
            put_at(raw_key, raw_value, timestamp)  # logged at the write's time (a tombstone flushed by the cache)
        else:
            self._inner.put(raw_key, raw_value)
