"""A window store behind the record cache (Kafka Streams' ``CachingWindowStore``, KIP-63).

A time-window aggregation (tumbling and hopping windows) writes each window's aggregate into the thread's record
cache (``streamapp.state.record_cache``) instead of its window store: one dirty entry per window, keyed by the
window store key (``key bytes + start + seqnum 0``, Kafka's ``WindowKeySchema``), holding the deserialized
aggregate, its timestamp and the headers of the record that wrote it. Reads of a window see the cache first.
Entries leave the cache as the key-value cache's do (on commit, or when the cache evicts, the whole named cache
flushed): each flushed window is written to the window store below (so to its changelog and, after the commit,
to RocksDB) and forwarded as ``(Windowed(key, start, start + size), Change(new, old), timestamp)``, ``old`` being
what the store below held (what downstream last saw; Kafka's ``TimestampedCacheFlushListener`` with
``sendOldValues``). A window updated by many records between two commits is therefore forwarded and logged once.

Sizes are counted as the key-value cache counts them (``record_cache.cached_value_size``); a container aggregate is
sized when its window enters the cache and not re-measured at flush. A flush does not read the store below again
for an immutable aggregate (a count): see ``CachingWindowStore``. ``CachingWindowStore`` reads single windows
(what a tumbling or hopping aggregation reads); its ``CachingSlidingWindowStore`` also merges the cache into range
reads (``fetch_range``, what a sliding-window aggregation reads; Kafka's ``CachingWindowStore.fetch(key, from,
to)`` with ``MergedSortedCacheWindowStoreIterator``): a cached window replaces the store's, by start. It indexes
its cached windows per record key (Kafka's cache is a sorted map it range-scans; ours is hashed), which the time
windows' puts do not pay for. Session stores are cached by ``streamapp.state.caching_session_store``.

A flushed aggregate the store's value serde rejects (a string into a ``long`` store: a number or a string is first
serialized at the flush) raises a ``StoreSerializationError`` naming the store and the node that writes it
(``set_flush_listener(..., node=...)``; ``streamapp.state.record_cache``).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from streamapp.serdes import SerdeError
from streamapp.state.record_cache import CachedStore, CacheIndex, HeadersContext, ThreadCache, cached_value_size
from streamapp.state.window_store import WindowStore, WindowValue
from streamapp.windowed import Windowed

__all__ = ["CachingSlidingWindowStore", "CachingWindowStore", "WindowFlushListener"]

_START_SEQ = struct.Struct(">qi")
_SUFFIX = _START_SEQ.size
_MAX_TIME = 2**63 - 1

WindowFlushListener = Callable[[Windowed, Any, Any, int], None]
"""``(windowed key, new value, old value, timestamp)`` of one flushed window (values ``None`` when absent)."""


_VALUE, _BELOW = 0, 1
"""A cache entry's value is a plain tuple ``(value, below, key, raw_key, start)``: the window's aggregate (``None``:
deleted), the aggregate the store below holds for the window (``None``: none; ``_UNKNOWN``: not known, read at
flush), and the record key, its bytes and the window start (so a flush neither deserializes the key nor reads the
store again). A plain tuple, not a NamedTuple: CPython's collector stops tracking an exact tuple of untracked
values, never a tuple subclass, and a full cache of tracked entries made every full collection walk all of them
(a third of the windowed count's time with the default cache)."""

_UNKNOWN: Any = object()
_IMMUTABLE_VALUE_TYPES = (int, float, str, bytes)


class CachingWindowStore(CachedStore):
    """A ``WindowStore`` (``below``) whose puts wait in the thread's record ``cache`` (see the module docstring).

    ``namespace``: ``<taskId>-<store>``. ``record_context``: the task's headers of the record being processed,
    kept with each entry and set back while it is forwarded. Offers ``fetch``, ``put`` and the flush protocol
    of cached stores (``has_dirty``, ``flush``, ``discard``, ``close``); a store that retains duplicates cannot
    be cached (ValueError).

    The old value a flush forwards is what the store below holds. A put remembers it from the read that preceded
    it (a processor's fetch then put; the entry's own value after a flush, since only this cache writes the store
    below) when it is immutable; a mutable aggregate, which an aggregator may have changed in place, is read
    from the store below at flush.
    """

    cached = True

    def __init__(
        self,
        below: WindowStore,
        cache: ThreadCache,
        namespace: str,
        record_context: HeadersContext | None = None,
    ) -> None:
        if below.retain_duplicates:
            raise ValueError(f"window store '{below.name}' retains duplicates and cannot be cached")
        self.name = below.name
        self.below = below
        self.window_size_ms = below.window_size_ms
        self._attach(cache, namespace, record_context)
        self._listener: WindowFlushListener | None = None
        self._value_serde = below.value_serde
        self._raw_key = below.raw_key
        """The store below's key serialization, which keeps the last key's bytes (a processor's fetch then put)."""
        self._missed: tuple[bytes, WindowValue | None] | None = None
        """The store key and value of the last fetch that missed the cache (what the store below holds)."""

    def set_flush_listener(self, listener: WindowFlushListener, *, node: str = "") -> None:
        """Call ``listener(Windowed key, new, old, timestamp)`` for each flushed window; ``node`` (the processor
        that writes the store) is named when a flushed aggregate does not fit the store's value serde."""
        self._listener = listener
        self._node = node

    def fetch(self, key: Any, window_start: int) -> WindowValue | None:
        """The aggregate of ``key``'s window at ``window_start`` (ms): the cached one, else the store below's."""
        raw_key = self._raw_key(key)
        store_key = raw_key + _START_SEQ.pack(window_start, 0)
        entry = self._cache.get(store_key)
        if entry is None:
            found = self.below.fetch_raw_key(raw_key, window_start)
            self._missed = (store_key, found)
            return found
        value = entry[0][_VALUE]
        return None if value is None else WindowValue(value, entry[1])

    def stream_time(self) -> int:
        """The store below's stream time (ms, -1 when empty): the largest window start flushed to it."""
        return self.below.stream_time()

    def fetch_all_by_start(self, time_from: int, time_to: int) -> list[tuple[Windowed, WindowValue]]:
        """``WindowStore.fetch_all_by_start`` with the cache merged over the store below: a window waiting in the
        cache replaces the store's, a cached delete hides it (Kafka's ``CachingWindowStore.fetchAll`` merges its
        cache into the store's range). Only dirty entries can differ from the store below."""
        merged = {
            store_key: (store_key[:-_SUFFIX], window, value)
            for store_key, window, value in self.below.raw_fetch_all_by_start(time_from, time_to)
        }
        cache = self._cache
        for store_key in list(cache.dirty_keys()):
            entry = cache.get(store_key)  # a use, as Kafka's cache range iterator's reads are
            assert entry is not None
            new, _, key, raw_key, start = entry[0]
            if not time_from <= start <= time_to:
                continue
            if new is None:
                merged.pop(store_key, None)
            else:
                window = Windowed(key, start, start + self.window_size_ms)
                merged[store_key] = (raw_key, window, WindowValue(new, entry[1]))
        ordered = sorted(merged.values(), key=lambda item: (item[1].start, item[0]))
        return [(window, value) for _, window, value in ordered]

    def put(self, key: Any, value: Any, window_start: int, timestamp: int) -> None:
        """Cache ``value`` (its timestamp ``timestamp``, ms) for ``key``'s window at ``window_start`` as a dirty
        entry; ``None`` deletes the window when flushed."""
        raw_key = self._raw_key(key)
        store_key = raw_key + _START_SEQ.pack(window_start, 0)
        cache = self._cache
        entry = cache.peek(store_key)
        below: Any
        if entry is not None:
            # a flushed entry's value is what the store below holds
            below = entry[0][_BELOW] if cache.is_dirty(store_key) else entry[0][_VALUE]
        else:
            missed = self._missed
            if missed is not None and missed[0] == store_key:
                below = None if missed[1] is None else missed[1].value
            else:
                below = _UNKNOWN
        self._missed = None
        if below is not None and below is not _UNKNOWN and type(below) not in _IMMUTABLE_VALUE_TYPES:
            below = _UNKNOWN  # possibly changed in place by the aggregator: read it again at flush
        size = cached_value_size(value, self._value_serde, cache, store_key)
        context = self._context
        cache.put(
            store_key,
            (value, below, key, raw_key, window_start),
            timestamp,
            size,
            None if context is None else context.headers,
        )

    def _write_and_forward(self, store_key: bytes, value: Any, timestamp: int) -> None:
        new, below, key, raw_key, start = value
        if below is _UNKNOWN:
            found = self.below.fetch_raw_key(raw_key, start)
            below = None if found is None else found.value
        if new is None and below is None:
            return
        try:
            self.below.put_raw_key(raw_key, new, start, timestamp)
        except SerdeError as exc:
            raise self._unserializable(key, new, exc) from exc
        if self._listener is not None:
            self._listener(Windowed(key, start, start + self.window_size_ms), new, below, timestamp)


class CachingSlidingWindowStore(CachingWindowStore):
    """A ``CachingWindowStore`` whose ``fetch_range`` merges the cache over the store below (see the module
    docstring), for sliding-window aggregations.

    Retention as in ``streamapp.state.window_store``: the observed stream time is the largest window start put
    (here or below); a window with ``start < observed - retention`` is invisible and puts to it are dropped.
    """

    def __init__(
        self,
        below: WindowStore,
        cache: ThreadCache,
        namespace: str,
        record_context: HeadersContext | None = None,
    ) -> None:
        super().__init__(below, cache, namespace, record_context)
        self.retention_ms = below.retention_ms
        self.observed_stream_time = -1
        """Largest window start put through this store (ms); -1 before the first put."""
        self._windows = self._index = CacheIndex(self._cache, _SUFFIX)
        """Record key bytes -> the store keys of its cached windows."""
        self._read: tuple[bytes, int, int, dict[int, Any]] = (b"", 0, -1, {})
        """The last ``fetch_range`` of a key: its bytes, the bounds, and what the store below held for each start
        in them that the cache did not (``None``: no window): a put right after knows the old value a flush
        forwards without reading the store below again (the point reads' ``_missed``, for ranges)."""

    def put(self, key: Any, value: Any, window_start: int, timestamp: int) -> None:
        """``CachingWindowStore.put``; a put to an expired window is dropped, as the store below drops it."""
        observed = self._stream_time()
        if window_start > observed:
            observed = self.observed_stream_time = window_start
        elif window_start < observed - self.below.retention_ms:
            return
        raw_key = self._raw_key(key)
        store_key = raw_key + _START_SEQ.pack(window_start, 0)
        self._windows.add(raw_key, store_key)
        read_key, time_from, time_to, below = self._read
        if read_key == raw_key and time_from <= window_start <= time_to:
            old = below.get(window_start)
            if old is not _UNKNOWN:
                self._missed = (store_key, None if old is None else WindowValue(old, timestamp))
                below[window_start] = _UNKNOWN  # from now on in the cache
        super().put(key, value, window_start, timestamp)

    def fetch_range(self, key: Any, time_from: int, time_to: int) -> list[tuple[int, WindowValue]]:
        """``[(start, value)]`` of ``key``'s live windows with ``time_from <= start <= time_to``, by start: the
        cached windows merged over the store below's (Kafka's ``CachingWindowStore.fetch(key, from, to)``)."""
        found = self.below.fetch_range(key, time_from, time_to)
        first_live = self._first_live_start()
        raw_key = self._raw_key(key)
        upper = raw_key + _START_SEQ.pack(time_to + 1, 0) if time_to < _MAX_TIME else None
        cached = self._windows.range(raw_key, raw_key + _START_SEQ.pack(max(time_from, 0), 0), upper)
        below: dict[int, Any] = {start: window.value for start, window in found}
        self._read = (raw_key, time_from, time_to, below)
        if not cached:
            return [pair for pair in found if pair[0] >= first_live]
        merged = dict(found)
        cache, offset = self._cache, len(raw_key)
        for store_key in cached:
            start = _START_SEQ.unpack_from(store_key, offset)[0]
            below[start] = _UNKNOWN  # cached: the store below may change when the cache flushes it
            entry = cache.get(store_key)  # a use, as Kafka's cache range iterator's reads are
            assert entry is not None, "a cached window left the cache without leaving the index"
            value = entry[0][_VALUE]
            if value is None:
                merged.pop(start, None)
            else:
                merged[start] = WindowValue(value, entry[1])
        return [(start, merged[start]) for start in sorted(merged) if start >= first_live]

    def detached(self, value: Any) -> Any:
        """``value``, or a copy of it (a serde round trip) when it is mutable: an aggregate that seeds another
        window must not be shared with the cache entry it was read from, as an aggregator may update it in place
        (Kafka's cache holds bytes, so each read is a copy)."""
        if value is None or type(value) in _IMMUTABLE_VALUE_TYPES:
            return value
        serde = self._value_serde
        return serde.deserialize(serde.serialize(value))

    def _stream_time(self) -> int:
        below = self.below.stream_time()
        if below > self.observed_stream_time:
            self.observed_stream_time = below
        return self.observed_stream_time

    def _first_live_start(self) -> int:
        observed = self._stream_time()
        return 0 if observed < 0 else max(0, observed - self.retention_ms)
