"""Segmented bytes stores for window and session stores (Kafka's ``RocksDBSegmentedBytesStore`` on
``KeyValueSegments``): entries grouped by time into segments, expired segments dropped whole.

The store sits where Kafka's segmented bytes store sits, *under* the changelogging store
(``streamapp.state.changelogging``): its ``write`` receives the same keys the changelog carries (Kafka's window
layout ``key + start + seqnum``, or the session layout ``key + end + start``), so changelog records, restore
batches and the changelogging store's buffer are unchanged. Inside, each entry is kept under
``segment id (8-byte big-endian) + store key`` in the persistent store below:

- **Segment** of an entry: ``time // segment_interval`` where time is the window start (window stores) or the
  session end (session stores), ``segment_interval = max(retention / 2, 60 s)`` (Kafka's default,
  ``segment_interval_ms``).
- **Stream time** of the store: the largest entry time written (applied after a commit, or restored); it is
  persisted with every write (``SEGMENTS_KEY``), so a reopened store knows it.
- **Expiry** (Kafka's ``AbstractSegments.cleanupExpiredSegments``): segments with
  ``id < (streamTime - retention) // segment_interval`` are dead. A write that moves the minimum live segment up
  deletes the dead segments' key range in the same atomic write, reading only the keys of the dead segments
  (never a live window); writes to a dead segment are dropped, as Kafka drops them. Because the store below
  receives only committed writes (the changelogging store applies its buffer after the commit), segments are
  dropped as of committed stream time, so records processed again after a crash never miss a window their own
  uncommitted attempt expired.
- **Reads**: ``get`` goes to one segment; ``range(lower, upper)`` merges the same range of every live segment in
  key order (optionally only the segments of a time interval).

**Migration.** A store written by a release before segments holds the store keys without a segment prefix and no
``SEGMENTS_KEY``. Opening it rewrites every entry under its segment (dead ones dropped) in one atomic write that
keeps the store's changelog offset, so a crash mid-way leaves the old layout, which migrates on the next open.
"""

from __future__ import annotations

import heapq
import struct
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

__all__ = [
    "DEFAULT_MIN_SEGMENT_INTERVAL_MS",
    "SEGMENTS_KEY",
    "SESSION_TIME_OFFSET",
    "WINDOW_TIME_OFFSET",
    "SegmentedBytesStore",
    "segment_interval_ms",
    "segmented_store",
    "window_start_of",
]

DEFAULT_MIN_SEGMENT_INTERVAL_MS = 60_000
"""Kafka's ``Stores.persistentWindowStore`` segment interval floor (ms)."""

SEGMENTS_KEY = b"\xff\xff\xff\xff\xff\xff\xff\xffstreamapp.segments"
"""Key, in the persistent store below, of the segmented layout's marker; its value is the store's stream time
(8-byte big-endian signed, ms). It sorts after every segment (segment ids are non-negative, so their first byte is
below 0x80)."""

_SEGMENT = struct.Struct(">q")
_LONG = struct.Struct(">q")

WINDOW_TIME_OFFSET = 12
"""A window store key's start is the 8-byte long this many bytes before its end (``key + start + seqnum``)."""

SESSION_TIME_OFFSET = 16
"""A session store key's end is the 8-byte long this many bytes before its end (``key + end + start``)."""


def segment_interval_ms(retention_ms: int) -> int:
    """Kafka's default segment interval for a retention (ms): ``max(retention / 2, 60 s)``."""
    return max(retention_ms // 2, DEFAULT_MIN_SEGMENT_INTERVAL_MS)


def window_start_of(store_key: bytes) -> int:
    """The window start (ms) of a window store key (``key + start (8 bytes) + seqnum (4 bytes)``)."""
    start: int = _LONG.unpack_from(store_key, len(store_key) - WINDOW_TIME_OFFSET)[0]
    return start


class _Persistent(Protocol):
    """What a segmented store needs of the store below (``RocksDBStore``, ``InMemoryKeyValueStore``)."""

    name: str

    def get(self, key: bytes) -> bytes | None: ...

    def write(self, batch: Mapping[bytes, bytes | None], changelog_offset: int | None) -> None: ...

    def changelog_offset(self) -> int | None: ...

    def items(self) -> Iterator[tuple[bytes, bytes]]: ...

    def range(self, lower: bytes, upper: bytes | None = None) -> Iterator[tuple[bytes, bytes]]: ...

    def close(self) -> None: ...


class SegmentedBytesStore:
    """A persistent bytes store of window or session entries kept in time segments (see the module docstring).

    ``inner``: the persistent store below (keys prefixed by segment id). ``retention_ms`` (>= 1) and
    ``segment_interval`` (ms, >= 1): as in Kafka's segmented store. ``time_offset``: where a store key's entry
    time (ms, 8-byte big-endian) starts, counted from the key's end (``WINDOW_TIME_OFFSET`` for window starts,
    ``SESSION_TIME_OFFSET`` for session ends). Opening migrates a store of the unsegmented layout.
    Implements ``PersistentKeyValueStore`` plus ``range``; ``segmented`` is True (window and session stores leave
    expiry to it).
    """

    segmented = True

    def __init__(
        self,
        inner: Any,
        *,
        retention_ms: int,
        segment_interval: int,
        time_offset: int,
    ) -> None:
        if retention_ms < 1 or segment_interval < 1:
            raise ValueError(
                f"segmented store '{inner.name}': retention ({retention_ms} ms) and segment interval "
                f"({segment_interval} ms) must be positive"
            )
        self.name: str = inner.name
        self.inner: _Persistent = inner
        self.retention_ms = retention_ms
        self.segment_interval = segment_interval
        self._time_offset = time_offset
        self.observed_stream_time = -1
        """Largest entry time written (ms); -1 for an empty store."""
        self.migrated_entries = 0
        """How many unsegmented entries opening this store rewrote (0 unless it was migrated)."""
        marker = inner.get(SEGMENTS_KEY)
        if marker is None:
            self._migrate()
        else:
            self.observed_stream_time = _LONG.unpack(bytes(marker))[0]
        self._min_live = self._min_live_segment(self.observed_stream_time)
        self._dropped_below = 0
        """Segments below this one were deleted by this instance (its first drop looks from segment 0: a
        shorter retention than the store was written with leaves older segments behind)."""

    # -- PersistentKeyValueStore -------------------------------------------------------------------

    def get(self, key: bytes) -> bytes | None:
        segment = _LONG.unpack_from(key, len(key) - self._time_offset)[0] // self.segment_interval
        if segment < self._min_live:
            return None
        return self.inner.get(_SEGMENT.pack(segment) + key)

    def write(
        self,
        batch: Mapping[bytes, bytes | None],
        changelog_offset: int | None,
        metadata: Mapping[bytes, bytes] | None = None,
    ) -> None:
        """Apply ``batch`` (store keys as the changelog carries them; ``None`` deletes) with the changelog offset,
        dropping the segments the batch's stream time expires, in one atomic write of the store below."""
        offset, interval, unpack_from, pack = self._time_offset, self.segment_interval, _LONG.unpack_from, _SEGMENT.pack
        observed, min_live = self.observed_stream_time, self._min_live
        out: dict[bytes, bytes | None] = {}
        for key, value in batch.items():
            time = unpack_from(key, len(key) - offset)[0]
            if time > observed:
                observed = time
            segment = time // interval
            if segment >= min_live:
                out[pack(segment) + key] = value
        min_live = self._min_live_segment(observed)
        if min_live > self._dropped_below:
            first_live = pack(min_live)  # segment prefixes sort like their ids (non-negative, big-endian)
            out = {key: value for key, value in out.items() if key >= first_live}
            for key, _ in self.inner.range(pack(self._dropped_below), first_live):
                out[key] = None
        out[SEGMENTS_KEY] = _LONG.pack(observed)
        self._write(out, changelog_offset, metadata)
        self.observed_stream_time = observed
        self._min_live = self._dropped_below = min_live

    def changelog_offset(self) -> int | None:
        return self.inner.changelog_offset()

    def get_metadata(self, key: bytes) -> bytes | None:
        """The store below's metadata entry ``key`` (``None`` when it keeps none)."""
        get_metadata = getattr(self.inner, "get_metadata", None)
        return None if get_metadata is None else get_metadata(key)

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        """Every live entry (store key without the segment prefix, value), in store-key order."""
        return self.range(b"")

    def range(
        self, lower: bytes, upper: bytes | None = None, *, time_from: int = 0, time_to: int | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        """Live entries with ``lower <= store key < upper`` (``upper`` None: no bound), in store-key order: the
        same range of every live segment, merged. ``time_from`` / ``time_to`` (ms, inclusive) limit the scan to
        the segments of entries with such times (a hint: entries outside may still be returned)."""
        first = max(self._min_live, max(time_from, 0) // self.segment_interval)
        last = self._last_segment() if time_to is None else min(self._last_segment(), time_to // self.segment_interval)
        scans = [self._segment_range(segment, lower, upper) for segment in range(first, last + 1)]
        if len(scans) == 1:
            return scans[0]
        return heapq.merge(*scans, key=_first)

    def close(self) -> None:
        self.inner.close()

    # -- internals ---------------------------------------------------------------------------------

    def _segment_range(self, segment: int, lower: bytes, upper: bytes | None) -> Iterator[tuple[bytes, bytes]]:
        prefix = _SEGMENT.pack(segment)
        end = _SEGMENT.pack(segment + 1) if upper is None else prefix + upper
        for key, value in self.inner.range(prefix + lower, end):
            yield key[8:], value

    def _time_of(self, store_key: bytes) -> int:
        time: int = _LONG.unpack_from(store_key, len(store_key) - self._time_offset)[0]
        return time

    def _last_segment(self) -> int:
        return max(self.observed_stream_time, 0) // self.segment_interval

    def _min_live_segment(self, observed: int) -> int:
        """Kafka's ``segmentId(streamTime - retention)``: segments below it hold only expired entries."""
        if observed < 0:
            return 0
        return max(0, (observed - self.retention_ms) // self.segment_interval)

    def _write(
        self, batch: dict[bytes, bytes | None], changelog_offset: int | None, metadata: Mapping[bytes, bytes] | None
    ) -> None:
        if metadata:
            self.inner.write(batch, changelog_offset, metadata=metadata)  # type: ignore[call-arg]
        else:
            self.inner.write(batch, changelog_offset)

    def _migrate(self) -> None:
        """Rewrite an unsegmented store's entries under their segments (one atomic write, offset kept)."""
        old = list(self.inner.items())
        time_of = self._time_of
        observed = max((time_of(key) for key, _ in old), default=-1)
        min_live = self._min_live_segment(observed)
        batch: dict[bytes, bytes | None] = dict.fromkeys((key for key, _ in old), None)
        for key, value in old:
            segment = time_of(key) // self.segment_interval
            if segment >= min_live:
                batch[_SEGMENT.pack(segment) + key] = value
        batch[SEGMENTS_KEY] = _LONG.pack(observed)
        self.inner.write(batch, self.inner.changelog_offset())
        self.observed_stream_time = observed
        self.migrated_entries = len(old)


def _first(item: tuple[bytes, bytes]) -> bytes:
    return item[0]


def segmented_store(spec: Any, inner: Any) -> Any:
    """The persistent store a task keeps store ``spec`` (a ``streamapp.topology.StoreSpec``) in: a
    ``SegmentedBytesStore`` over ``inner`` for ``window`` and ``session`` stores, ``inner`` itself otherwise.

    Every opener of a task's stores (active and standby tasks) must use it, so a store folder is always seen in
    one layout."""
    if spec.type not in ("window", "session"):
        return inner
    return SegmentedBytesStore(
        inner,
        retention_ms=spec.retention_ms,
        segment_interval=segment_interval_ms(spec.retention_ms),
        time_offset=WINDOW_TIME_OFFSET if spec.type == "window" else SESSION_TIME_OFFSET,
    )
