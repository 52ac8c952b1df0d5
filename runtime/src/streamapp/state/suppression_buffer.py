"""The suppression buffer: a time-ordered, changelogged buffer of a table's latest updates per key.

Kafka Streams' ``InMemoryTimeOrderedKeyValueChangeBuffer``: the whole buffer is held in memory, ordered by
``(buffer time, serialized key)``, and every put / eviction is written through a logged bytes store (the
suppress node's ``key_value`` store, changelog ``<app>-<store>-changelog``, compacted), so a restarted or moved
task rebuilds it from the store on first use.

Stored record (the store's value and the changelog record's value): key = the serialized table key (the store's
key serde, e.g. ``windowed:string:60000``); value, layout 2 =
``record timestamp (8-byte BE) + buffer time (8-byte BE) + new value + prior value + layout version (1 byte, 2)
+ headers``. Each value is a 4-byte BE length (-1 for null) followed by the value serde's bytes. ``prior`` is the
old value of the *first* update buffered for the key (what downstream last saw), ``new`` the latest value:
evicting forwards ``Change(new, prior)`` once, whatever happened in between (Kafka keeps ``priorValue`` the same
way). ``headers`` are those of the record that made the latest update, as Kafka's ``ProcessorRecordContext``
serializes them into the buffer's changelog (``BufferValue``): a 4-byte BE count (-1: the record had none), then per
header a 4-byte BE length and the UTF-8 name, a 4-byte BE length (-1 for null) and the value bytes. So an update
buffered before a restart or a task move is forwarded with its record's headers after the restore, as in Kafka.

Layout 1 (written before headers were kept) ends right after the prior value; it still restores, its updates
without headers (Kafka likewise restores its older buffer changelog formats, told apart by a ``v`` record header).
A reader of layout 1 reads layout 2's timestamps and values and ignores the rest. A stored value that is truncated,
has trailing bytes or an unknown layout version raises ValueError naming the buffer and key, and deletes nothing.

Size (``size_bytes``, what ``BufferConfig.max_bytes`` bounds): per buffered key, the serialized key, new and
prior values plus ``ENTRY_OVERHEAD_BYTES`` for the record timestamp and buffer time, Kafka's
``computeRecordSize`` estimate without the record context (Kafka also counts its offset, topic, partition and
headers; the headers are not counted here).
"""

from __future__ import annotations

import heapq
import struct
from typing import Any, NamedTuple, cast

from streamapp.kafka.types import Headers
from streamapp.serdes import Serde
from streamapp.state.window_store import LoggedBytesStore

__all__ = [
    "ENTRY_OVERHEAD_BYTES",
    "LAYOUT_VERSION",
    "BufferedUpdate",
    "SizedReader",
    "SuppressionBuffer",
    "append_sized",
]

ENTRY_OVERHEAD_BYTES = 16
"""Bytes counted per buffered key beyond the key and values: the record timestamp and the buffer time."""

LAYOUT_VERSION = 2
"""The stored value layout this release writes (module docstring); it reads layouts 1 and 2."""

_HEADER = struct.Struct(">qq")
_LENGTH = struct.Struct(">i")
_LAYOUT_VERSION = struct.Struct(">b")


class BufferedUpdate(NamedTuple):
    """An evicted update: the table key, its latest ``new`` value, the ``prior`` value, the timestamp (ms) of
    the latest buffered record and its headers (``None``: it had none, or it was stored in layout 1)."""

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
            try:
                entry = _decode(raw)
            except ValueError as error:
                raise ValueError(
                    f"suppression buffer '{self.name}': stored value of key {raw_key.hex()} is not a buffered "
                    f"update of layout 1 or {LAYOUT_VERSION}: {error}"
                ) from error
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
    """The layout-2 stored value of ``entry`` (module docstring)."""
    parts = [_HEADER.pack(entry.timestamp, entry.time)]
    for value in (entry.new, entry.prior):
        append_sized(parts, value)
    parts.append(_LAYOUT_VERSION.pack(LAYOUT_VERSION))
    if entry.headers is None:
        parts.append(_LENGTH.pack(-1))
    else:
        parts.append(_LENGTH.pack(len(entry.headers)))
        for name, value in entry.headers:
            append_sized(parts, name.encode())
            append_sized(parts, value)
    return b"".join(parts)


def append_sized(parts: list[bytes], value: bytes | None) -> None:
    """Append ``value`` as a 4-byte BE length (-1: null) and its bytes (Kafka's buffer value layout)."""
    if value is None:
        parts.append(_LENGTH.pack(-1))
    else:
        parts.append(_LENGTH.pack(len(value)))
        parts.append(value)


def _decode(raw: bytes) -> _Entry:
    """A stored value of layout 1 or 2 (module docstring); ValueError when malformed."""
    reader = SizedReader(raw)
    timestamp, time = reader.unpack(_HEADER)
    new, prior = reader.sized(), reader.sized()
    if reader.at_end():
        return _Entry(time, timestamp, new, prior)  # layout 1: no headers
    (version,) = reader.unpack(_LAYOUT_VERSION)
    if version != LAYOUT_VERSION:
        raise ValueError(f"unknown layout version {version} (this release reads 1 and {LAYOUT_VERSION})")
    (count,) = reader.unpack(_LENGTH)
    headers: Headers | None = None
    if count >= 0:
        headers = []
        for _ in range(count):
            name = reader.sized()
            if name is None:
                raise ValueError("a header without a name")
            headers.append((name.decode(), cast(bytes, reader.sized())))  # a null value stays null, as in Kafka
    if not reader.at_end():
        raise ValueError(f"{len(raw) - reader.offset} trailing bytes")
    return _Entry(time, timestamp, new, prior, headers)


class SizedReader:
    """Reads a stored value front to back."""

    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        self.offset = 0

    def unpack(self, layout: struct.Struct) -> tuple[int, ...]:
        if self.offset + layout.size > len(self.raw):
            raise ValueError(f"truncated: {len(self.raw)} bytes")
        values = layout.unpack_from(self.raw, self.offset)
        self.offset += layout.size
        return values

    def sized(self) -> bytes | None:
        """A 4-byte BE length (-1: null) and that many bytes."""
        (length,) = self.unpack(_LENGTH)
        if length < 0:
            return None
        if self.offset + length > len(self.raw):
            raise ValueError(f"truncated: {len(self.raw)} bytes, a length of {length} past the end")
        value = bytes(self.raw[self.offset : self.offset + length])
        self.offset += length
        return value

    def at_end(self) -> bool:
        return self.offset == len(self.raw)
