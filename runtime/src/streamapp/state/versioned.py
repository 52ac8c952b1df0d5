"""Versioned key-value stores (KIP-889): every value a key had within the history retention, by timestamp.

Follows Kafka Streams' ``RocksDBVersionedStore`` (``VersionedKeyValueStore``):

- ``put(key, value, timestamp)``: the record timestamp is the version; ``value`` ``None`` is a tombstone version
  (the key has no value from ``timestamp`` until its next version). A put older than ``observed stream time -
  history retention`` is not put (``PUT_RETURN_CODE_NOT_PUT``, Kafka's "Skipping record for expired put."); any
  other put returns the end of the new version's validity: ``PUT_RETURN_CODE_VALID_TO_UNDEFINED`` (-1) when it is
  the latest version, else the timestamp of the next newer version. A put at the timestamp of an existing version
  replaces that version's value. The observed stream time is the largest timestamp put.
- ``get(key)``: the latest version (``None`` when it is a tombstone or the key has none);
  ``get(key, as_of)``: the version valid at ``as_of`` (``valid_from <= as_of < valid_to``). For ``as_of`` older
  than ``observed stream time - history retention`` only the latest version can answer (it never expires), else
  ``None`` (Kafka's "Returning null for expired get.").
- **History retention** (Kafka drops whole time segments of older versions; this is a simpler exact equivalent):
  each key's versions are one stored value, newest first, and each write to a key drops the older versions whose
  validity ended at or before ``observed stream time - history retention``. No read can return such a version
  (a read at ``as_of >= stream time - retention`` needs ``valid_to > as_of``), so reads and return codes are
  Kafka's; only the disk space is reclaimed later for keys nobody writes.
- **Not cached**: Kafka never puts a versioned store behind the record cache (``VersionedKeyValueStoreBuilder``
  has no caching layer); ``streamapp.topology.stores.cached_stores`` names only ``key_value`` stores.
- **Changelog** (Kafka's ``ChangeLoggingVersionedKeyValueBytesStore``): one record per put, in put order, key =
  the serialized key, value = the serialized value (a tombstone: ``null``), record timestamp = the version. Unlike
  other stores nothing is deduplicated per key between commits: every version is a record. Restore replays the
  records as puts, one by one.

Stored value of a key (the persistent store's, never logged): repeated ``valid_from (8-byte BE signed) +
value length (4-byte BE signed, -1 for a tombstone) + value bytes``, newest version first. The observed stream
time is kept in the persistent store's metadata (``versioned.observed.stream.time``), written with each commit,
so a reopened store expires as the closed one did (Kafka recomputes it from the changelog it restores).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from streamapp.kafka.types import ProducerClient, TopicPartition
from streamapp.serdes import Serde
from streamapp.state.changelogging import ENTRY_OVERHEAD_BYTES, StreamTimeChangeLoggingStore
from streamapp.state.stores import PersistentKeyValueStore, TypedKeyValueStore

__all__ = [
    "PUT_RETURN_CODE_NOT_PUT",
    "PUT_RETURN_CODE_VALID_TO_UNDEFINED",
    "Version",
    "VersionedChangeLoggingStore",
    "VersionedKeyValueStore",
    "VersionedRecord",
    "get_as_of",
    "iter_history",
    "put_latest",
    "put_version",
]

PUT_RETURN_CODE_VALID_TO_UNDEFINED = -1
"""``put`` made the latest version (Kafka's ``VersionedKeyValueStore.PUT_RETURN_CODE_VALID_TO_UNDEFINED``)."""
PUT_RETURN_CODE_NOT_PUT = -(2**63)
"""``put`` was older than the history retention and changed nothing (Kafka's ``PUT_RETURN_CODE_NOT_PUT``,
``Long.MIN_VALUE``)."""

_HEADER = struct.Struct(">qi")


class Version(NamedTuple):
    """One version of a key: valid from ``valid_from`` (epoch ms) until the next newer version; ``value`` the
    serialized value, ``None`` for a tombstone."""

    valid_from: int
    value: bytes | None


class VersionedRecord(NamedTuple):
    """A value read from a versioned store with the timestamp it is valid from (Kafka's ``VersionedRecord``)."""

    value: Any
    timestamp: int


def encode_history(history: Sequence[Version]) -> bytes:
    """The stored value of a key's versions (newest first; see the module docstring)."""
    parts = []
    for valid_from, value in history:
        parts.append(_HEADER.pack(valid_from, -1 if value is None else len(value)))
        if value is not None:
            parts.append(value)
    return b"".join(parts)


def decode_history(raw: bytes | None) -> list[Version]:
    """The versions of a stored value (newest first); ValueError for a truncated value."""
    return list(iter_history(raw))


def iter_history(raw: bytes | None) -> Iterator[Version]:
    """The versions of a stored value, newest first, decoded as they are read (a lookup stops early)."""
    if raw is None:
        return
    offset, size = 0, len(raw)
    while offset < size:
        if offset + _HEADER.size > size:
            raise ValueError(f"a versioned store value is truncated at byte {offset} of {size}")
        valid_from, length = _HEADER.unpack_from(raw, offset)
        offset += _HEADER.size
        if length < 0:
            yield Version(valid_from, None)
            continue
        if offset + length > size:
            raise ValueError(f"a versioned store value is truncated at byte {offset} of {size}")
        yield Version(valid_from, raw[offset : offset + length])
        offset += length


def put_latest(raw: bytes | None, value: bytes | None, timestamp: int, horizon: int) -> bytes | None:
    """The stored value after putting the newest version ``timestamp`` (later than every version of ``raw``, or
    the key has none): the entry in front, then the versions of ``raw`` valid after ``horizon`` (ms; the first
    one at or before it stays: it is valid until the next). ``None`` when ``timestamp`` is not the newest."""
    if raw:
        latest = _HEADER.unpack_from(raw)[0]
        if latest >= timestamp:
            return None
    entry = _HEADER.pack(timestamp, -1 if value is None else len(value)) + (value or b"")
    if not raw:
        return entry
    if timestamp <= horizon:  # the previous latest ends at or before the horizon: nothing older is readable
        return entry
    offset, size = 0, len(raw)
    while offset < size:
        valid_from, length = _HEADER.unpack_from(raw, offset)
        offset += _HEADER.size + max(length, 0)
        if valid_from <= horizon:
            return entry + raw[:offset]
    return entry + raw


def put_version(
    history: list[Version], value: bytes | None, timestamp: int, stream_time: int, history_retention_ms: int
) -> tuple[list[Version], int, int]:
    """Kafka's ``RocksDBVersionedStore.put`` on one key's ``history`` (newest first): ``(new history, return
    code, new observed stream time)``. ``stream_time``: the store's observed stream time before the put (ms).
    Returns ``history`` unchanged with ``PUT_RETURN_CODE_NOT_PUT`` for a put older than the retention."""
    if timestamp < stream_time - history_retention_ms:
        return history, PUT_RETURN_CODE_NOT_PUT, stream_time
    stream_time = max(stream_time, timestamp)
    new = Version(timestamp, value)
    index = next((i for i, version in enumerate(history) if version.valid_from <= timestamp), len(history))
    if index < len(history) and history[index].valid_from == timestamp:
        updated = [*history[:index], new, *history[index + 1 :]]
    else:
        updated = [*history[:index], new, *history[index:]]
    code = PUT_RETURN_CODE_VALID_TO_UNDEFINED if index == 0 else history[index - 1].valid_from
    return _expired_dropped(updated, stream_time - history_retention_ms), code, stream_time


def _expired_dropped(history: list[Version], horizon: int) -> list[Version]:
    """``history`` without the versions whose validity ended at or before ``horizon`` (the latest never ends)."""
    for index in range(1, len(history)):
        if history[index - 1].valid_from <= horizon:
            return history[:index]
    return history


def get_as_of(
    history: Iterable[Version], as_of: int | None, stream_time: int, history_retention_ms: int
) -> Version | None:
    """Kafka's ``RocksDBVersionedStore.get(key)`` (``as_of`` ``None``) / ``get(key, asOfTimestamp)``: the version
    valid at ``as_of`` (a tombstone version is returned as such; callers read it as "no value"), or ``None``.
    ``history`` (newest first) is read only as far as needed."""
    versions = iter(history)
    latest = next(versions, None)
    if latest is None or as_of is None or latest.valid_from <= as_of:
        return latest
    if as_of < stream_time - history_retention_ms:
        return None  # expired, and the latest version (which never expires) is newer than as_of
    return next((version for version in versions if version.valid_from <= as_of), None)


class VersionedChangeLoggingStore(StreamTimeChangeLoggingStore):
    """The changelogging layer of a versioned store: ``put_version`` / ``get_version`` over a persistent store of
    encoded histories; every put is a changelog record (see the module docstring). Between commits the written
    keys' histories wait in the buffer, as in ``ChangeLoggingKeyValueStore``; ``discard`` also rolls the observed
    stream time back to the committed one."""

    STREAM_TIME_KEY = b"versioned.observed.stream.time"

    def __init__(
        self,
        inner: PersistentKeyValueStore,
        changelog: TopicPartition,
        timestamp: Callable[[], int],
        history_retention_ms: int,
    ) -> None:
        super().__init__(inner, changelog, timestamp)
        self.history_retention_ms = history_retention_ms
        self._log: list[tuple[bytes, bytes | None, int]] = []

    def _raw(self, key: bytes) -> bytes | None:
        pending = self._pending.get(key)
        return pending[0] if pending is not None else self.inner.get(key)

    def _history(self, key: bytes) -> list[Version]:
        return decode_history(self._raw(key))

    def put(self, key: bytes, value: bytes | None) -> None:
        raise TypeError(f"store '{self.name}' is versioned: write it with put_version(key, value, timestamp)")

    def put_version(self, key: bytes, value: bytes | None, timestamp: int) -> int:
        """Put version ``timestamp`` (epoch ms) of ``key`` (``value`` ``None``: a tombstone); Kafka's return code
        (module docstring). The put is logged unless it was not put."""
        code = self._apply_put(key, value, timestamp)
        if code != PUT_RETURN_CODE_NOT_PUT:
            self._log.append((key, value, timestamp))
            self._pending_bytes += len(key) + (len(value) if value is not None else 0) + ENTRY_OVERHEAD_BYTES
        return code

    def _apply_put(self, key: bytes, value: bytes | None, timestamp: int) -> int:
        raw = self._raw(key)
        if timestamp >= self.stream_time - self.history_retention_ms:  # else: not put (put_version says so)
            stream_time = max(self.stream_time, timestamp)
            latest = put_latest(raw, value, timestamp, stream_time - self.history_retention_ms)
            if latest is not None:  # the common case, without decoding the history
                self.stream_time = stream_time
                self._pending[key] = (latest, timestamp)
                return PUT_RETURN_CODE_VALID_TO_UNDEFINED
        history, code, self.stream_time = put_version(
            decode_history(raw), value, timestamp, self.stream_time, self.history_retention_ms
        )
        if code != PUT_RETURN_CODE_NOT_PUT:
            self._pending[key] = (encode_history(history) if history else None, timestamp)
        return code

    def get_version(self, key: bytes, as_of: int | None = None) -> Version | None:
        """The version of ``key`` valid at ``as_of`` (``None``: the latest), tombstones included, or ``None``."""
        return get_as_of(iter_history(self._raw(key)), as_of, self.stream_time, self.history_retention_ms)

    def get(self, key: bytes) -> bytes | None:
        """The latest value of ``key`` (``None``: none, or a tombstone)."""
        latest = self.get_version(key)
        return None if latest is None else latest.value

    def versions(self) -> Iterator[tuple[bytes, list[Version]]]:
        """Every key with its versions (newest first), the buffered writes included; for tests and tools."""
        keys = {key for key, _ in self.inner.items()} | set(self._pending)
        for key in sorted(keys):
            history = self._history(key)
            if history:
                yield key, history

    @property
    def has_pending(self) -> bool:
        return bool(self._pending) or bool(self._log)

    def send_changelog(self, producer: ProducerClient) -> None:
        """Queue one changelog record per put since the last commit, in put order (record timestamp: the
        version)."""
        if not self._log:
            return
        topic, partition = self.changelog.topic, self.changelog.partition
        last = len(self._log) - 1
        for index, (key, value, timestamp) in enumerate(self._log):
            producer.send(topic, key, value, timestamp, partition, self._delivered if index == last else None)

    def discard(self) -> None:
        super().discard()
        self._log.clear()

    def restore(self, batch: Mapping[bytes, tuple[bytes | None, int]], last_offset: int) -> None:
        """``restore_records`` of one record per key (``{key: (value, record timestamp)}``)."""
        self.restore_records([(k, v, t) for k, (v, t) in batch.items()], last_offset)

    def restore_records(self, records: Sequence[tuple[bytes, bytes | None, int]], last_offset: int) -> None:
        """Replay changelog records ``[(key, value, record timestamp), ...]`` (offset order) as puts and record
        ``last_offset``, the offset of the last one (``streamapp.state.restore.ChangelogReader``)."""
        self._pending.clear()
        for key, value, timestamp in records:
            self._apply_put(key, value, timestamp)
        self._write({key: value for key, (value, _) in self._pending.items()}, last_offset)


class VersionedKeyValueStore:
    """A versioned store seen through key and value serdes (Kafka's ``VersionedKeyValueStore``): what processors
    read and write. ``put`` returns Kafka's return code; ``get`` returns a ``VersionedRecord`` or ``None`` (a
    tombstone version reads as ``None``)."""

    cached = False

    def __init__(self, inner: VersionedChangeLoggingStore, key_serde: Serde, value_serde: Serde) -> None:
        self.name = inner.name
        self.inner = inner
        self._key_serde = key_serde
        self._value_serde = value_serde

    def raw_key(self, key: Any) -> bytes:
        """``key`` serialized; ValueError for a null key (``TypedKeyValueStore.raw_key``)."""
        return TypedKeyValueStore.raw_key(self, key)  # type: ignore[arg-type]

    def put(self, key: Any, value: Any, timestamp: int) -> int:
        """Put ``value`` (``None``: a tombstone) as the version of ``key`` at ``timestamp`` (epoch ms)."""
        return self.inner.put_version(self.raw_key(key), self._value_serde.serialize(value), timestamp)

    def delete(self, key: Any, timestamp: int) -> VersionedRecord | None:
        """Kafka's ``delete(key, timestamp)``: the version valid at ``timestamp`` before a tombstone is put there."""
        found = self.get(key, timestamp)
        self.put(key, None, timestamp)
        return found

    def get(self, key: Any, as_of: int | None = None) -> VersionedRecord | None:
        """The latest version of ``key`` (``as_of`` ``None``) or the one valid at ``as_of`` (epoch ms)."""
        version = self.inner.get_version(self.raw_key(key), as_of)
        if version is None or version.value is None:
            return None
        return VersionedRecord(self._value_serde.deserialize(version.value), version.valid_from)
