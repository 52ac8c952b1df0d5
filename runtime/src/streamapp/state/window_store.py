"""Window stores: aggregates per key and window start over a logged bytes store, with retention.

Follows Kafka Streams' ``RocksDBTimestampedWindowStore`` on ``RocksDBSegmentedBytesStore``:

- **Key layout** (Kafka's ``WindowKeySchema.toStoreKeyBinary``): ``key bytes + start (8-byte big-endian signed)
  + seqnum (4-byte big-endian)``; the seqnum is 0 unless duplicates are retained (stream-stream join buffers).
  Keys of one record key sort by window start, so ``fetch(key, from, to)`` is one forward range scan.
- **Value layout** (Kafka's ``ValueAndTimestampSerializer``): ``timestamp (8-byte big-endian) + value bytes``; the
  timestamp is the largest record timestamp folded into the aggregate (ms). A ``None`` value deletes the window.
- The store key *is* the changelog key, so the changelog (``<app>-<store>-changelog``, ``compact,delete``,
  ``retention.ms = retention + 1 day``) holds Kafka's record layout.
- **Retention**: the store's observed stream time is the largest window start put (Kafka's segmented store does
  the same). A window with ``start < observed - retention`` is expired: reads do not see it and puts to it are
  dropped. (Kafka hides ``start <= observed - retention``, one millisecond earlier; with the default retention a
  sliding window with time difference 0, or a session ending exactly at the close time, is then accepted by the
  processor but invisible to its next read, so a record is silently lost. Keeping the boundary window avoids
  that; the late-record rule of the processors is Kafka's, unchanged.)
- **Expiry**: the persistent store under the logged store is a ``streamapp.state.segments.SegmentedBytesStore``
  (Kafka's segmented bytes store): it drops whole time segments (interval ``max(retention / 2, 60 s)``, Kafka's
  default) once the *committed* stream time expires them, unlogged (the changelog's ``delete`` policy ages them
  out). Over a plain persistent store (a store opened without ``segmented_store``) expired windows are deleted
  by a scan each time the expiry horizon of the committed stream time crosses a segment boundary
  (``RetentionExpiry``).

Reads see uncommitted writes: writes go into the logged store's buffer (``ChangeLoggingKeyValueStore``), and
range reads merge its persistent ``inner`` store's range with the keys written since the buffer was last
applied (``BufferedRangeReader``). Negative timestamps are not supported (signed big-endian order), as in Kafka.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple, Protocol

from streamapp.serdes import Serde
from streamapp.state.segments import DEFAULT_MIN_SEGMENT_INTERVAL_MS, segment_interval_ms, window_start_of
from streamapp.windowed import Windowed

__all__ = [
    "DEFAULT_MIN_SEGMENT_INTERVAL_MS",
    "BufferedRangeReader",
    "LoggedBytesStore",
    "RangeBytesStore",
    "RetentionExpiry",
    "WindowStore",
    "WindowValue",
    "segment_interval_ms",
    "segmented_inner",
]

_START_SEQ = struct.Struct(">qi")
_TIMESTAMP = struct.Struct(">q")
_SUFFIX = _START_SEQ.size  # 12 bytes
_MAX_TIME = 2**63 - 1
_IMMUTABLE_KEY_TYPES = (str, bytes, int)
_NO_KEY = object()  # no key serialized yet (None is a key the serde must reject)


class RangeBytesStore(Protocol):
    """The persistent store under a logged store: key-ordered range scans and unlogged batch writes."""

    def range(self, lower: bytes, upper: bytes | None = None) -> Iterator[tuple[bytes, bytes]]: ...

    def items(self) -> Iterator[tuple[bytes, bytes]]: ...

    def write(self, batch: dict[bytes, bytes | None], changelog_offset: int | None) -> None: ...


def segmented_inner(store: LoggedBytesStore) -> Any:
    """The ``SegmentedBytesStore`` under ``store``, or ``None`` when its persistent store is plain."""
    inner = store.inner
    return inner if getattr(inner, "segmented", False) else None


class LoggedBytesStore(Protocol):
    """A buffered, changelogged bytes store (``streamapp.state.changelogging.ChangeLoggingKeyValueStore``)."""

    name: str

    @property
    def inner(self) -> Any: ...

    @property
    def has_pending(self) -> bool: ...

    def get(self, key: bytes) -> bytes | None: ...

    def put(self, key: bytes, value: bytes | None) -> None: ...

    def put_at(self, key: bytes, value: bytes | None, timestamp: int) -> None: ...

    def record_timestamp(self) -> int: ...


class WindowValue(NamedTuple):
    """A window's aggregate and the largest record timestamp folded into it (ms)."""

    value: Any
    timestamp: int


class BufferedRangeReader:
    """Range reads over a ``LoggedBytesStore`` that include its buffered (uncommitted) writes.

    Every write through the store's owner is noted per *group* (the serialized record key); a range read of a
    group merges the persistent store's range with the noted keys in that range, whose current values come from
    the logged store (buffer first). Notes are dropped whenever the store has no buffered writes (after a
    commit applied or discarded them), so they stay bounded by one commit interval's writes.
    """

    def __init__(self, store: LoggedBytesStore) -> None:
        self._store = store
        self._written: dict[bytes, set[bytes]] = {}
        self._segmented = segmented_inner(store)

    def note_write(self, group: bytes, key: bytes) -> None:
        """Record that ``key`` (in ``group``) is being written through the logged store; call just before the
        write (notes from before the buffer was last applied are dropped first)."""
        written = self._written
        if written and not self._store.has_pending:
            written.clear()
        keys = written.get(group)
        if keys is None:
            written[group] = {key}
        else:
            keys.add(key)

    def forget_if_applied(self) -> None:
        """Drop the notes when the store's buffer is empty (before reads)."""
        if self._written and not self._store.has_pending:
            self._written.clear()

    def range(
        self, group: bytes, lower: bytes, upper: bytes, time_from: int = 0, time_to: int | None = None
    ) -> list[tuple[bytes, bytes]]:
        """Current ``(key, value)`` pairs with ``lower <= key < upper`` in key order (all keys in ``group``);
        ``time_from`` / ``time_to`` (ms) bound the entry times, so a segmented store scans only their segments."""
        self.forget_if_applied()
        if self._segmented is not None:
            persisted = self._segmented.range(lower, upper, time_from=time_from, time_to=time_to)
        else:
            persisted = self._store.inner.range(lower, upper)
        written = self._written.get(group)
        if not written:
            return list(persisted)
        merged = {key: value for key, value in persisted if key not in written}
        for key in written:
            if lower <= key < upper:
                value = self._store.get(key)
                if value is not None:
                    merged[key] = value
        return sorted(merged.items())

    def all(self) -> list[tuple[bytes, bytes]]:
        """Every current ``(key, value)`` pair in key order."""
        self.forget_if_applied()
        written = {key for keys in self._written.values() for key in keys}
        merged = {key: value for key, value in self._store.inner.items() if key not in written}
        for key in written:
            value = self._store.get(key)
            if value is not None:
                merged[key] = value
        return sorted(merged.items())


class RetentionExpiry:
    """Deletes a store's expired entries from its persistent store, unlogged, as of *committed* stream time.

    ``before_write(observed)`` runs before each write. Only when the logged store has no buffered writes (every
    earlier write was committed and applied) is ``observed`` a committed stream time; then, if its horizon
    ``observed - retention`` entered a new segment interval since the last scan, one scan deletes every entry
    whose time (``time_of(store key)``, ms) is before the horizon. Deleting only as of committed stream time keeps
    a crash or an aborted transaction safe: records processed again after the last commit never find a window
    deleted by their own first, uncommitted attempt.
    """

    def __init__(
        self, store: LoggedBytesStore, retention_ms: int, segment_interval: int, time_of: Callable[[bytes], int]
    ) -> None:
        self._store = store
        self._retention = retention_ms
        self._segment_interval = segment_interval
        self._time_of = time_of
        self._scanned_segment: int | None = None
        self._segmented = segmented_inner(store) is not None

    def before_write(self, observed: int) -> None:
        if self._segmented or observed < 0 or self._store.has_pending:
            return  # a segmented store drops its expired segments itself
        segment = (observed - self._retention) // self._segment_interval
        if self._scanned_segment is not None and segment <= self._scanned_segment:
            return
        self._scanned_segment = segment
        horizon = observed - self._retention
        expired = [key for key, _ in self._store.inner.items() if self._time_of(key) < horizon]
        if expired:
            self._store.inner.write(dict.fromkeys(expired), None)


class WindowStore:
    """A timestamped window store (Kafka's ``TimestampedWindowStore``) seen through key and value serdes.

    ``window_size_ms`` gives the ``end`` of returned ``Windowed`` keys (``start + size``). ``retention_ms`` as
    in the module docstring. ``retain_duplicates``: every put adds an entry (seqnum suffix), ``None`` puts are
    ignored and point ``fetch`` is not available (Kafka's join window stores). Raises ValueError for a null key.
    """

    def __init__(
        self,
        store: LoggedBytesStore,
        key_serde: Serde,
        value_serde: Serde,
        *,
        retention_ms: int,
        window_size_ms: int,
        retain_duplicates: bool = False,
        segment_interval: int | None = None,
    ) -> None:
        if retention_ms < 1:
            raise ValueError(f"window store '{store.name}': retention must be positive, got {retention_ms} ms")
        self.name = store.name
        self.retention_ms = retention_ms
        self.window_size_ms = window_size_ms
        self.retain_duplicates = retain_duplicates
        self.observed_stream_time = -1
        """Largest window start put (ms); -1 before the first put."""
        self._store = store
        self._reader = BufferedRangeReader(store)
        self._key_serde = key_serde
        self._value_serde = value_serde
        self._segmented = segmented_inner(store)
        self._synced = self._segmented is None
        self._expiry = (
            None
            if self._segmented is not None
            else RetentionExpiry(
                store, retention_ms, segment_interval or segment_interval_ms(retention_ms), window_start_of
            )
        )
        self._seqnum = 0
        self._last_key: Any = _NO_KEY
        self._last_raw_key = b""

    # -- writes ------------------------------------------------------------------------------------

    def put(self, key: Any, value: Any, window_start: int, timestamp: int) -> None:
        """Store ``value`` (with its ``timestamp``, ms) for ``key``'s window at ``window_start`` (ms);
        ``None`` deletes it. A put to an expired window is dropped."""
        self.put_raw_key(
            self._last_raw_key if key is self._last_key else self.raw_key(key), value, window_start, timestamp
        )

    def put_raw_key(self, raw_key: bytes, value: Any, window_start: int, timestamp: int) -> None:
        """``put`` of a record key already serialized by the key serde (``raw_key``)."""
        if not self._synced:
            self._sync_stream_time()
        if self._expiry is not None:
            self._expiry.before_write(self.observed_stream_time)
        if window_start > self.observed_stream_time:
            self.observed_stream_time = window_start
        elif window_start < self.observed_stream_time - self.retention_ms:
            return  # expired
        if self.retain_duplicates:
            if value is None:
                return
            self._seqnum = (self._seqnum + 1) & 0x7FFFFFFF
            store_key = raw_key + _START_SEQ.pack(window_start, self._seqnum)
        else:
            store_key = raw_key + _START_SEQ.pack(window_start, 0)
        raw_value = self._value_serde.serialize(value)
        self._reader.note_write(raw_key, store_key)
        if raw_value is None:
            self._store.put(store_key, None)
        else:  # logged at the value's timestamp, as Kafka's ChangeLoggingTimestampedWindowBytesStore does
            self._store.put_at(store_key, _TIMESTAMP.pack(timestamp) + raw_value, timestamp)

    # -- reads -------------------------------------------------------------------------------------

    @property
    def key_serde(self) -> Serde:
        """The serde of record keys (the store key is these bytes + window start + seqnum)."""
        return self._key_serde

    @property
    def value_serde(self) -> Serde:
        """The serde of values (stored after an 8-byte timestamp)."""
        return self._value_serde

    def fetch(self, key: Any, window_start: int) -> WindowValue | None:
        """The aggregate of ``key``'s window at ``window_start``, or ``None`` (absent or expired)."""
        return self.fetch_raw_key(self._last_raw_key if key is self._last_key else self.raw_key(key), window_start)

    def fetch_raw_key(self, raw_key: bytes, window_start: int) -> WindowValue | None:
        """``fetch`` of a record key already serialized by the key serde (``raw_key``)."""
        if self.retain_duplicates:
            raise ValueError(f"window store '{self.name}' retains duplicates; use fetch_range")
        if not self._synced:
            self._sync_stream_time()
        if window_start < self.observed_stream_time - self.retention_ms:
            return None  # expired (or no window put yet: observed -1, starts are >= 0)
        raw = self._store.get(raw_key + _START_SEQ.pack(window_start, 0))
        if raw is None:
            return None
        return WindowValue(self._value_serde.deserialize(raw[8:]), _TIMESTAMP.unpack_from(raw)[0])

    def fetch_range(self, key: Any, time_from: int, time_to: int) -> list[tuple[int, WindowValue]]:
        """``[(start, value)]`` of ``key``'s live windows with ``time_from <= start <= time_to``, by start."""
        raw_key = self.raw_key(key)
        time_from = max(time_from, self._first_live_start())
        if time_from > time_to:
            return []
        lower = raw_key + _START_SEQ.pack(time_from, 0)
        upper = raw_key + (_START_SEQ.pack(time_to + 1, 0) if time_to < _MAX_TIME else b"\xff" * (_SUFFIX + 1))
        found: list[tuple[int, WindowValue]] = []
        for store_key, raw in self._reader.range(raw_key, lower, upper, time_from, time_to):
            if len(store_key) != len(raw_key) + _SUFFIX:
                continue  # a longer key that starts with these bytes
            start, _ = _START_SEQ.unpack_from(store_key, len(raw_key))
            found.append((start, self._decode_value(raw)))
        return found

    def fetch_all(self, time_from: int, time_to: int) -> list[tuple[Windowed, WindowValue]]:
        """Every live window with ``time_from <= start <= time_to``, by serialized key then start."""
        return [(w, v) for w, v in self.all() if time_from <= w.start <= time_to]

    def fetch_all_by_start(self, time_from: int, time_to: int) -> list[tuple[Windowed, WindowValue]]:
        """Every window the store holds with ``time_from <= start <= time_to``, by start then serialized key: the
        order of Kafka's time-ordered window store (``RocksDbIndexedTimeOrderedWindowBytesStoreSupplier``, what an
        ``EmitStrategy.onWindowClose()`` aggregation's ``fetchAll`` reads). Unlike the other reads it also returns
        windows past retention that the store has not deleted yet (deletion waits for a committed stream time that
        expires them, so a window closed by the record being processed is still there), as a segmented store's
        range over whole segments does. One scan of the store."""
        return [(window, value) for _, window, value in self.raw_fetch_all_by_start(time_from, time_to)]

    def raw_fetch_all_by_start(self, time_from: int, time_to: int) -> list[tuple[bytes, Windowed, WindowValue]]:
        """``fetch_all_by_start`` with each window's store key (``key bytes + start + seqnum``)."""
        found: list[tuple[int, bytes, Windowed, WindowValue]] = []
        for store_key, raw in self._reader.all():
            start, _ = _START_SEQ.unpack_from(store_key, len(store_key) - _SUFFIX)
            if time_from <= start <= time_to:
                raw_key = store_key[:-_SUFFIX]
                window = Windowed(self._key_serde.deserialize(raw_key), start, start + self.window_size_ms)
                found.append((start, store_key, window, self._decode_value(raw)))
        found.sort(key=lambda entry: (entry[0], entry[1][:-_SUFFIX]))
        return [(store_key, window, value) for _, store_key, window, value in found]

    def all(self) -> list[tuple[Windowed, WindowValue]]:
        """Every live window, by serialized key then start (for tests and interactive queries)."""
        first_live = self._first_live_start()
        result: list[tuple[Windowed, WindowValue]] = []
        for store_key, raw in self._reader.all():
            start, _ = _START_SEQ.unpack_from(store_key, len(store_key) - _SUFFIX)
            if start < first_live:
                continue
            key = self._key_serde.deserialize(store_key[:-_SUFFIX])
            result.append((Windowed(key, start, start + self.window_size_ms), self._decode_value(raw)))
        return result

    # -- internals ---------------------------------------------------------------------------------

    def raw_key(self, key: Any) -> bytes:
        """The serialized ``key`` (ValueError for a null one); the last immutable key's bytes are kept
        (``_last_key`` / ``_last_raw_key``, always set together) for a processor's fetch then put of one record's
        key, a caching view's included (``streamapp.state.caching_window_store``)."""
        if key is self._last_key:
            return self._last_raw_key
        raw = self._key_serde.serialize(key)
        if raw is None:
            raise ValueError(f"window store '{self.name}': keys must not be null")
        if type(key) in _IMMUTABLE_KEY_TYPES:
            self._last_key, self._last_raw_key = key, raw
        return raw

    def stream_time(self) -> int:
        """The observed stream time (ms, -1 before the first put), the segmented store's if it is ahead
        (restored state)."""
        if not self._synced:
            self._sync_stream_time()
        return self.observed_stream_time

    def _decode_value(self, raw: bytes) -> WindowValue:
        timestamp: int = _TIMESTAMP.unpack_from(raw)[0]
        return WindowValue(self._value_serde.deserialize(raw[8:]), timestamp)

    def _sync_stream_time(self) -> None:
        """Adopt the segmented store's stream time (restored, or written before this view existed) on first use;
        later writes go through this view, so its stream time stays ahead."""
        self._synced = True
        segmented = self._segmented
        if segmented is not None and segmented.observed_stream_time > self.observed_stream_time:
            self.observed_stream_time = segmented.observed_stream_time

    def _first_live_start(self) -> int:
        """Smallest window start still visible: ``observed - retention`` (see the module docstring)."""
        if not self._synced:
            self._sync_stream_time()
        if self.observed_stream_time < 0:
            return 0
        return max(0, self.observed_stream_time - self.retention_ms)
