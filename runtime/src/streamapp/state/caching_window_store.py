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
sized when its window enters the cache and not re-measured at flush. Range reads (``fetch_range``, ``all``) are
not cached: they read the store below, i.e. the windows as of the last
flush, which is why only time windows, whose processor reads single windows, are cached (Kafka caches sliding and
session stores too, with merged range iterators; not done here).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from streamapp.state.record_cache import CachedStore, HeadersContext, ThreadCache
from streamapp.state.window_store import WindowStore, WindowValue
from streamapp.windowed import Windowed

__all__ = ["CachingWindowStore", "WindowFlushListener"]

_START_SEQ = struct.Struct(">qi")
_SUFFIX = _START_SEQ.size

WindowFlushListener = Callable[[Windowed, Any, Any, int], None]
"""``(windowed key, new value, old value, timestamp)`` of one flushed window (values ``None`` when absent)."""

_IMMUTABLE_KEY_TYPES = (str, bytes, int)
_NO_KEY = object()


class CachingWindowStore(CachedStore):
    """A ``WindowStore`` (``below``) whose puts wait in the thread's record ``cache`` (see the module docstring).

    ``namespace``: ``<taskId>-<store>``. ``record_context``: the task's headers of the record being processed,
    kept with each entry and set back while it is forwarded. Offers ``fetch``, ``put`` and the flush protocol
    of cached stores (``has_dirty``, ``flush``, ``discard``, ``close``); a store that retains duplicates cannot
    be cached (ValueError).
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
        self._key_serde = below.key_serde
        self._last_key: Any = _NO_KEY
        self._last_raw_key = b""
        """The last immutable key serialized and its bytes (a processor's fetch then put of one record's key)."""

    def set_flush_listener(self, listener: WindowFlushListener) -> None:
        """Call ``listener(Windowed key, new, old, timestamp)`` for each flushed window."""
        self._listener = listener

    def fetch(self, key: Any, window_start: int) -> WindowValue | None:
        """The aggregate of ``key``'s window at ``window_start`` (ms): the cached one, else the store below's."""
        entry = self._cache.get(self._store_key(key, window_start))
        if entry is None:
            return self.below.fetch(key, window_start)
        value = entry[0]
        return None if value is None else WindowValue(value, entry[1])

    def put(self, key: Any, value: Any, window_start: int, timestamp: int) -> None:
        """Cache ``value`` (its timestamp ``timestamp``, ms) for ``key``'s window at ``window_start`` as a dirty
        entry; ``None`` deletes the window when flushed."""
        self._cache_put(self._store_key(key, window_start), value, timestamp, self.below.value_serde)

    def _store_key(self, key: Any, window_start: int) -> bytes:
        if key is self._last_key:
            return self._last_raw_key + _START_SEQ.pack(window_start, 0)
        raw = self._key_serde.serialize(key)
        if raw is None:
            raise ValueError(f"window store '{self.name}': keys must not be null")
        if type(key) in _IMMUTABLE_KEY_TYPES:
            self._last_key, self._last_raw_key = key, raw
        return raw + _START_SEQ.pack(window_start, 0)

    def _write_and_forward(self, store_key: bytes, value: Any, timestamp: int) -> None:
        key = self._key_serde.deserialize(store_key[:-_SUFFIX])
        start: int = _START_SEQ.unpack_from(store_key, len(store_key) - _SUFFIX)[0]
        old = self.below.fetch(key, start)
        if value is None and old is None:
            return
        self.below.put(key, value, start, timestamp)
        if self._listener is not None:
            windowed = Windowed(key, start, start + self.window_size_ms)
            self._listener(windowed, value, None if old is None else old.value, timestamp)
