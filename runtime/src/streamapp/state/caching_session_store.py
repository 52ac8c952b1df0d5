"""A session store behind the record cache (Kafka Streams' ``CachingSessionStore``, KIP-63).

A session-window aggregation writes each session's aggregate into the thread's record cache
(``streamapp.state.record_cache``) instead of its session store: one dirty entry per session, keyed by the session
store key (``key bytes + end + start``, Kafka's ``SessionKeySchema``). A removed session (merged into a larger one)
is a cached *delete*. Reads merge the cache over the store below (Kafka's ``MergedSortedCacheSessionStoreIterator``):
``find_sessions`` returns the store's sessions and the cached ones of the key in the bounds, a cached session
replacing the store's, a cached delete hiding it, ordered by end then start; ``fetch_session`` sees the cache
first. The cache is indexed per record key (Kafka's cache is a sorted map it range-scans; ours is hashed).

Entries leave the cache as the key-value cache's do (on commit, or when the cache evicts, the whole named cache
flushed, in the order of each session's last update): the store below's value for the session is read (the last
flushed one: what downstream last saw), the entry is written below (so to the changelog, at the timestamp of the
record that last wrote the session: Kafka sets the entry's record context back while it flushes) and forwarded as
``(Windowed(key, start, end), Change(new, old), end)``, timestamped with the session's end (Kafka's
``CachingSessionStore.putAndMaybeForward`` and ``SessionCacheFlushListener``). A session created and merged away
between two flushes is absent before and after and is neither written nor forwarded; a flushed session merged
away is forwarded as a tombstone ``Change(None, old)``. A session updated by many records between two commits is
therefore forwarded and logged once.

Retention follows the store below: the observed stream time is the largest session end put (here or below); a
session with ``end < observed - retention`` is invisible and puts to it are dropped, as
``streamapp.state.session_store`` does. A cached delete of a session that expired in the store below before the
flush is neither written nor forwarded (the store below no longer returns its old value, as Kafka's segmented
store's ``get`` does not).

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
from streamapp.state.session_store import SessionStore
from streamapp.windowed import Windowed

__all__ = ["CachingSessionStore", "SessionFlushListener"]

_END_START = struct.Struct(">qq")
_SUFFIX = _END_START.size

SessionFlushListener = Callable[[Windowed, Any, Any, int], None]
"""``(session, new value, old value, timestamp)`` of one flushed session (values ``None`` when absent; the
timestamp is the session's end, ms)."""


class CachingSessionStore(CachedStore):
    """A ``SessionStore`` (``below``) whose puts and removes wait in the thread's record ``cache`` (see the module
    docstring).

    ``namespace``: ``<taskId>-<store>``. ``record_context``: the task's headers of the record being processed,
    kept with each entry and set back while it is forwarded. Offers ``put``, ``remove``, ``find_sessions``,
    ``fetch_session`` and the flush protocol of cached stores (``has_dirty``, ``flush``, ``discard``, ``close``).
    A cache entry's value is ``None`` (a delete) or the exact tuple ``(aggregate, key)``, which CPython's
    collector untracks when both are immutable.
    """

    cached = True

    def __init__(
        self,
        below: SessionStore,
        cache: ThreadCache,
        namespace: str,
        record_context: HeadersContext | None = None,
    ) -> None:
        self.name = below.name
        self.below = below
        self.retention_ms = below.retention_ms
        self.observed_stream_time = -1
        """Largest session end put through this store (ms); -1 before the first put."""
        self._attach(cache, namespace, record_context)
        self._listener: SessionFlushListener | None = None
        self._value_serde = below.value_serde
        self._sessions = self._index = CacheIndex(self._cache, _SUFFIX)
        """Record key bytes -> the store keys of its cached sessions (entries and deletes)."""

    def set_flush_listener(self, listener: SessionFlushListener, *, node: str = "") -> None:
        """Call ``listener(session, new, old, timestamp)`` for each flushed session; ``node`` (the processor that
        writes the store) is named when a flushed aggregate does not fit the store's value serde."""
        self._listener = listener
        self._node = node

    # -- writes ------------------------------------------------------------------------------------

    def put(self, session: Windowed, value: Any) -> None:
        """Cache ``value`` as the aggregate of ``session`` (a dirty entry, forwarded at the session's end when
        flushed); ``None`` deletes the session. Puts to expired sessions are dropped."""
        raw_key = self.below.raw_key(session.key)
        end = session.end
        observed = self._stream_time()
        if end > observed:
            observed = self.observed_stream_time = end
        if end < observed - self.retention_ms:
            return
        store_key = raw_key + _END_START.pack(end, session.start)
        cache, context = self._cache, self._context
        size = cached_value_size(value, self._value_serde, cache, store_key)
        self._sessions.add(raw_key, store_key)
        cache.put(
            store_key,
            None if value is None else (value, session.key),
            self.below.record_timestamp(),  # the writer's: the changelog record's timestamp at flush
            size,
            None if context is None else context.headers,
        )

    def remove(self, session: Windowed) -> None:
        """Delete ``session`` (a cached delete, forwarded as a tombstone when flushed if the store below has it)."""
        self.put(session, None)

    # -- reads -------------------------------------------------------------------------------------

    def find_sessions(
        self, key: Any, earliest_session_end: int, latest_session_start: int
    ) -> list[tuple[Windowed, Any]]:
        """``key``'s live sessions with ``end >= earliest_session_end`` and ``start <= latest_session_start``,
        the cache merged over the store below, ordered by end then start (Kafka's ``findSessions``)."""
        below = self.below
        raw_key = below.raw_key(key)
        found = below.find_sessions_raw_key(key, raw_key, earliest_session_end, latest_session_start)
        first_live = self._first_live_end()
        cached = self._sessions.range(raw_key, raw_key + _END_START.pack(max(earliest_session_end, 0), 0))
        if not cached:
            return [pair for pair in found if pair[0].end >= first_live]
        merged = {(session.end, session.start): (session, value) for session, value in found}
        cache, offset = self._cache, len(raw_key)
        for store_key in cached:
            end, start = _END_START.unpack_from(store_key, offset)
            if start > latest_session_start:
                continue
            entry = cache.get(store_key)  # a use, as Kafka's cache range iterator's reads are
            assert entry is not None, "a cached session left the cache without leaving the index"
            if entry[0] is None:
                merged.pop((end, start), None)
            else:
                merged[(end, start)] = (Windowed(key, start, end), entry[0][0])
        return [merged[bounds] for bounds in sorted(merged) if bounds[0] >= first_live]

    def fetch_all_by_end(self, earliest_end: int, latest_end: int) -> list[tuple[Windowed, Any]]:
        """``SessionStore.fetch_all_by_end`` with the cache merged over the store below: a session waiting in the
        cache replaces the store's, a cached delete hides it. Only dirty entries can differ from the store below."""
        merged = {
            store_key: (session.end, store_key[:-_SUFFIX], session.start, session, value)
            for store_key, session, value in self.below.raw_fetch_all_by_end(earliest_end, latest_end)
        }
        cache = self._cache
        for store_key in list(cache.dirty_keys()):
            end, start = _END_START.unpack_from(store_key, len(store_key) - _SUFFIX)
            if not earliest_end <= end <= latest_end:
                continue
            entry = cache.get(store_key)  # a use, as Kafka's cache range iterator's reads are
            assert entry is not None
            if entry[0] is None:
                merged.pop(store_key, None)
            else:
                value, key = entry[0]
                merged[store_key] = (end, store_key[:-_SUFFIX], start, Windowed(key, start, end), value)
        return [(item[3], item[4]) for item in sorted(merged.values(), key=lambda item: item[:3])]

    def stream_time(self) -> int:
        """The largest session end put through this store or below (ms, -1 when empty)."""
        return self._stream_time()

    def fetch_session(self, key: Any, start: int, end: int) -> Any:
        """The aggregate of ``key``'s session ``[start, end]``, or ``None`` (absent, deleted or expired)."""
        if end < self._first_live_end():
            return None
        raw_key = self.below.raw_key(key)
        entry = self._cache.get(raw_key + _END_START.pack(end, start))
        if entry is None:
            return self.below.fetch_session_raw_key(raw_key, start, end)
        return None if entry[0] is None else entry[0][0]

    # -- flush protocol ------------------------------------------------------------------------------

    def _write_and_forward(self, store_key: bytes, value: Any, timestamp: int) -> None:
        below = self.below
        offset = len(store_key) - _SUFFIX
        raw_key = store_key[:offset]
        end, start = _END_START.unpack_from(store_key, offset)
        old = below.fetch_session_raw_key(raw_key, start, end)
        if value is None:
            if old is None:
                return  # created and merged away between two flushes: nothing to write or forward
            new, key = None, below.key_serde.deserialize(raw_key)
        else:
            new, key = value
        try:
            below.put_raw_key(raw_key, start, end, new, timestamp)
        except SerdeError as exc:
            raise self._unserializable(key, new, exc) from exc
        if self._listener is not None:
            self._listener(Windowed(key, start, end), new, old, end)

    # -- internals ---------------------------------------------------------------------------------

    def _stream_time(self) -> int:
        below = self.below.stream_time()
        if below > self.observed_stream_time:
            self.observed_stream_time = below
        return self.observed_stream_time

    def _first_live_end(self) -> int:
        observed = self._stream_time()
        return 0 if observed < 0 else max(0, observed - self.retention_ms)
