"""The suppression buffer: a time-ordered, changelogged buffer of a table's latest updates per key.

Kafka Streams' ``InMemoryTimeOrderedKeyValueChangeBuffer``: the whole buffer is held in memory, ordered by
``(buffer time, serialized key)``, and every put / eviction is written through a logged bytes store (the
suppress node's ``key_value`` store, changelog ``<app>-<store>-changelog``, compacted), so a restarted or moved
task rebuilds it from the store on first use.

Stored record: key = the serialized table key (the store's key serde, e.g. ``windowed:string:60000``); value =
``record timestamp (8-byte BE) + buffer time (8-byte BE) + new value + prior value``, each value as a 4-byte BE
length (-1 for null) followed by the value serde's bytes. ``prior`` is the old value of the *first* update
buffered for the key (what downstream last saw), ``new`` the latest value: evicting forwards
``Change(new, prior)`` once, whatever happened in between (Kafka keeps ``priorValue`` the same way).

Headers: each buffered update keeps the headers of the record that made it, in memory only, and its eviction
returns them (Kafka keeps the record context in the buffer and forwards the evicted update with it). They are not
in the stored record: after a restore (a restarted or moved task) the buffered updates come back without headers.

Size (``size_bytes``, what ``BufferConfig.max_bytes`` bounds): per buffered key, the serialized key, new and
prior values plus ``ENTRY_OVERHEAD_BYTES`` for the record timestamp and buffer time, Kafka's
``computeRecordSize`` estimate without the record context it keeps and this buffer does not.
"""

from __future__ import annotations

import heapq
import struct
from typing import Any, NamedTuple

from streamapp.kafka.types import Headers
from streamapp.serdes import Serde
from streamapp.state.window_store import LoggedBytesStore

__all__ = ["ENTRY_OVERHEAD_BYTES", "BufferedUpdate", "SuppressionBuffer"]

ENTRY_OVERHEAD_BYTES = 16
"""Bytes counted per buffered key beyond the key and values: the record timestamp and the buffer time."""

_HEADER = struct.Struct(">qq")
_LENGTH = struct.Struct(">i")


class BufferedUpdate(NamedTuple):
    """An evicted update: the table key, its latest ``new`` value, the ``prior`` value, the timestamp (ms) of
    the latest buffered record and its headers (``None``: none, or restored)."""

    key: Any
    new_value: Any
    prior_value: Any
    timestamp: int
    headers: Headers | None = None


class _Entry(NamedTuple):
    time: int
    timestamp: int
    new: bytes | None
    prior: bytes | None
    headers: Headers | None = None


class SuppressionBuffer:
    """Buffered updates by key, evicted oldest buffer time first (ties by serialized key).

    ``store``: the logged bytes store that backs the buffer. Not thread-safe; one per task and suppress node.
    """

    def __init__(self, store: LoggedBytesStore, key_serde: Serde, value_serde: Serde) -> None:
        self.name = store.name
        self._store = store
        self._key_serde = key_serde
        self._value_serde = value_serde
        self._entries: dict[bytes, _Entry] = {}
        self._order: list[tuple[int, bytes]] = []
        self._size = 0
        self._loaded = False

    @property
    def num_records(self) -> int:
        """Keys currently buffered."""
        self._load()
        return len(self._entries)

    @property
    def size_bytes(self) -> int:
        """The buffer's size in bytes (module docstring), what ``max_bytes`` bounds."""
        self._load()
        return self._size

    def put(
        self, time: int, key: Any, new_value: Any, old_value: Any, timestamp: int, headers: Headers | None = None
    ) -> None:
        """Buffer ``Change(new_value, old_value)`` of ``key`` at buffer time ``time`` (ms; for final window
        results the window end) from a record with ``timestamp`` (ms) and ``headers``. Replaces the key's buffered
        update, keeping its prior value. ValueError for a null key."""
        self._load()
        raw_key = self._key_serde.serialize(key)
        if raw_key is None:
            raise ValueError(f"suppression buffer '{self.name}': keys must not be null")
        previous = self._entries.get(raw_key)
        prior = self._value_serde.serialize(old_value) if previous is None else previous.prior
        entry = _Entry(time, timestamp, self._value_serde.serialize(new_value), prior, headers)
        self._entries[raw_key] = entry
        self._size += _size(raw_key, entry) - (0 if previous is None else _size(raw_key, previous))
        if previous is None or previous.time != time:
            heapq.heappush(self._order, (time, raw_key))
        self._store.put(raw_key, _encode(entry))

    def min_time(self) -> int | None:
        """The smallest buffer time held, or ``None`` when empty."""
        self._load()
        self._drop_stale()
        return self._order[0][0] if self._order else None

    def evict_until(self, expiry_time: int) -> list[BufferedUpdate]:
        """Remove and return, in buffer-time order, every update whose buffer time is ``<= expiry_time``."""
        self._load()
        evicted: list[BufferedUpdate] = []
        while True:
            self._drop_stale()
            if not self._order or self._order[0][0] > expiry_time:
                return evicted
            evicted.append(self._evict_oldest())

    def evict_oldest(self) -> BufferedUpdate | None:
        """Remove and return the update with the smallest buffer time (ties by serialized key); ``None`` when
        empty (Kafka's ``evictWhile`` one step, used to emit early when the buffer is full)."""
        self._load()
        self._drop_stale()
        return self._evict_oldest() if self._order else None

    def _evict_oldest(self) -> BufferedUpdate:
        _, raw_key = heapq.heappop(self._order)
        entry = self._entries.pop(raw_key)
        self._size -= _size(raw_key, entry)
        self._store.put(raw_key, None)
        return BufferedUpdate(
            self._key_serde.deserialize(raw_key),
            self._value_serde.deserialize(entry.new),
            self._value_serde.deserialize(entry.prior),
            entry.timestamp,
            entry.headers,
        )

    def _drop_stale(self) -> None:
        """Pop heap entries of keys removed or re-buffered at another time."""
        while self._order:
            time, raw_key = self._order[0]
            entry = self._entries.get(raw_key)
            if entry is not None and entry.time == time:
                return
            heapq.heappop(self._order)

    def _load(self) -> None:
        """Read the persisted buffer once, on first use (after the task's restore finished)."""
        if self._loaded:
            return
        self._loaded = True
        for raw_key, raw in self._store.inner.items():
            entry = _decode(raw)
            self._entries[raw_key] = entry
            self._size += _size(raw_key, entry)
            self._order.append((entry.time, raw_key))
        heapq.heapify(self._order)


def _size(raw_key: bytes, entry: _Entry) -> int:
    return (
        len(raw_key)
        + (0 if entry.new is None else len(entry.new))
        + (0 if entry.prior is None else len(entry.prior))
        + ENTRY_OVERHEAD_BYTES
    )


def _encode(entry: _Entry) -> bytes:
    parts = [_HEADER.pack(entry.timestamp, entry.time)]
    for value in (entry.new, entry.prior):
        if value is None:
            parts.append(_LENGTH.pack(-1))
        else:
            parts.append(_LENGTH.pack(len(value)))
            parts.append(value)
    return b"".join(parts)


def _decode(raw: bytes) -> _Entry:
    timestamp, time = _HEADER.unpack_from(raw)
    offset = _HEADER.size
    values: list[bytes | None] = []
    for _ in range(2):
        (length,) = _LENGTH.unpack_from(raw, offset)
        offset += _LENGTH.size
        if length < 0:
            values.append(None)
        else:
            values.append(bytes(raw[offset : offset + length]))
            offset += length
    return _Entry(time, timestamp, values[0], values[1])
