"""Session stores: one aggregate per key and session window over a logged bytes store, with retention.

Follows Kafka Streams' ``RocksDBSessionStore`` (``SessionKeySchema``, segmented by session end):

- **Key layout** (``SessionKeySchema.toBinary``, also the ``SessionWindowedSerializer`` layout):
  ``key bytes + end (8-byte big-endian signed) + start (8-byte big-endian signed)``; a key's sessions sort by end,
  then start. The store key is the changelog key (``<app>-<store>-changelog``, ``compact,delete``).
- **Value**: the aggregate's bytes (session stores are not timestamped; a session's record timestamp is its end).
- **Retention**: the observed stream time is the largest session end put. A session with
  ``end < observed - retention`` is expired (one millisecond later than Kafka, see
  ``streamapp.state.window_store``): ``find_sessions`` skips it and puts to it are dropped. The persistent
  store is segmented by session end (``streamapp.state.segments``, segment interval ``max(retention / 2, 60 s)``)
  and drops whole segments once the committed stream time expires them, unlogged, like Kafka; over a plain
  persistent store a scan deletes expired sessions each time the horizon crosses a segment boundary.

Reads see the writes buffered since the last commit (``streamapp.state.window_store.BufferedRangeReader``).
"""

from __future__ import annotations

import struct
from typing import Any

from streamapp.serdes import Serde
from streamapp.state.window_store import (
    BufferedRangeReader,
    LoggedBytesStore,
    RetentionExpiry,
    segment_interval_ms,
    segmented_inner,
)
from streamapp.windowed import Windowed

__all__ = ["SessionStore"]

_END_START = struct.Struct(">qq")
_SUFFIX = _END_START.size  # 16 bytes
_MAX_TIME = 2**63 - 1


class SessionStore:
    """A session store (Kafka's ``SessionStore``) seen through key and value serdes.

    Sessions are ``Windowed(key, start, end)`` with both bounds inclusive (ms). Raises ValueError for a null key.
    """

    def __init__(
        self,
        store: LoggedBytesStore,
        key_serde: Serde,
        value_serde: Serde,
        *,
        retention_ms: int,
        segment_interval: int | None = None,
    ) -> None:
        if retention_ms < 1:
            raise ValueError(f"session store '{store.name}': retention must be positive, got {retention_ms} ms")
        self.name = store.name
        self.retention_ms = retention_ms
        self.observed_stream_time = -1
        """Largest session end put (ms); -1 before the first put."""
        self._store = store
        self._reader = BufferedRangeReader(store)
        self._segmented = segmented_inner(store)
        self._key_serde = key_serde
        self._value_serde = value_serde
        self._expiry = RetentionExpiry(
            store, retention_ms, segment_interval or segment_interval_ms(retention_ms), _session_end_of
        )

    # -- writes ------------------------------------------------------------------------------------

    def put(self, session: Windowed, value: Any) -> None:
        """Store ``value`` as the aggregate of ``session``; ``None`` removes it. Puts to expired sessions are
        dropped."""
        self.put_raw_key(self.raw_key(session.key), session.start, session.end, value)

    def record_timestamp(self) -> int:
        """The timestamp (epoch ms) of the record being processed, which a ``put`` logs its write at (Kafka's
        ``ChangeLoggingSessionBytesStore`` logs at the record context's timestamp)."""
        return self._store.record_timestamp()

    def put_raw_key(self, raw_key: bytes, start: int, end: int, value: Any, logged_at: int | None = None) -> None:
        """``put`` of the session ``[start, end]`` (ms) of a record key already serialized by the key serde;
        ``logged_at``: the changelog record's timestamp (ms) when not the record being processed's (the record
        cache flushes an entry at the timestamp of the record that wrote it)."""
        self._sync_stream_time()
        self._expiry.before_write(self.observed_stream_time)
        if end > self.observed_stream_time:
            self.observed_stream_time = end
        if self._expired(end):
            return
        store_key = raw_key + _END_START.pack(end, start)
        self._reader.forget_if_applied()
        raw_value = self._value_serde.serialize(value)
        if logged_at is None:
            self._store.put(store_key, raw_value)
        else:
            self._store.put_at(store_key, raw_value, logged_at)
        self._reader.note_write(raw_key, store_key)

    def remove(self, session: Windowed) -> None:
        """Delete ``session`` (Kafka's ``SessionStore.remove``)."""
        self.put(session, None)

    # -- reads -------------------------------------------------------------------------------------

    def find_sessions(
        self, key: Any, earliest_session_end: int, latest_session_start: int
    ) -> list[tuple[Windowed, Any]]:
        """``key``'s live sessions with ``end >= earliest_session_end`` and ``start <= latest_session_start``,
        ordered by end then start (Kafka's ``findSessions(key, earliestSessionEndTime, latestSessionStartTime)``).
        """
        return self.find_sessions_raw_key(key, self.raw_key(key), earliest_session_end, latest_session_start)

    def find_sessions_raw_key(
        self, key: Any, raw_key: bytes, earliest_session_end: int, latest_session_start: int
    ) -> list[tuple[Windowed, Any]]:
        """``find_sessions`` of ``key`` already serialized by the key serde (``raw_key``)."""
        earliest_end = max(earliest_session_end, self._first_live_end())
        lower = raw_key + _END_START.pack(max(earliest_end, 0), 0)
        upper = raw_key + b"\xff" * (_SUFFIX + 1)
        found: list[tuple[Windowed, Any]] = []
        for store_key, raw in self._reader.range(raw_key, lower, upper, max(earliest_end, 0)):
            if len(store_key) != len(raw_key) + _SUFFIX:
                continue  # a longer key that starts with these bytes
            end, start = _END_START.unpack_from(store_key, len(raw_key))
            if start <= latest_session_start:
                found.append((Windowed(key, start, end), self._value_serde.deserialize(raw)))
        return found

    def fetch_session(self, key: Any, start: int, end: int) -> Any:
        """The aggregate of ``key``'s session ``[start, end]``, or ``None`` (absent or expired)."""
        return self.fetch_session_raw_key(self.raw_key(key), start, end)

    def fetch_session_raw_key(self, raw_key: bytes, start: int, end: int) -> Any:
        """``fetch_session`` of a record key already serialized by the key serde."""
        self._sync_stream_time()
        if self._expired(end):
            return None
        raw = self._store.get(raw_key + _END_START.pack(end, start))
        return self._value_serde.deserialize(raw)

    def fetch_all_by_end(self, earliest_end: int, latest_end: int) -> list[tuple[Windowed, Any]]:
        """Every session the store holds with ``earliest_end <= end <= latest_end``, by end, then serialized key,
        then start: the order of Kafka's time-ordered session store (``TimeFirstSessionKeySchema``, what an
        ``EmitStrategy.onWindowClose()`` session aggregation's ``findSessions(earliestEnd, latestEnd)`` reads). Like
        ``WindowStore.fetch_all_by_start`` it also returns sessions past retention not deleted yet: with the default
        retention (gap + grace) a session closes exactly when it expires. One scan of the store."""
        return [(session, value) for _, session, value in self.raw_fetch_all_by_end(earliest_end, latest_end)]

    def raw_fetch_all_by_end(self, earliest_end: int, latest_end: int) -> list[tuple[bytes, Windowed, Any]]:
        """``fetch_all_by_end`` with each session's store key (``key bytes + end + start``)."""
        found: list[tuple[int, bytes, int, bytes, Any]] = []
        for store_key, raw in self._reader.all():
            end, start = _END_START.unpack_from(store_key, len(store_key) - _SUFFIX)
            if earliest_end <= end <= latest_end:
                found.append((end, store_key[:-_SUFFIX], start, store_key, raw))
        found.sort(key=lambda entry: entry[:3])
        return [
            (store_key, Windowed(self._key_serde.deserialize(raw_key), start, end), self._value_serde.deserialize(raw))
            for end, raw_key, start, store_key, raw in found
        ]

    def all(self) -> list[tuple[Windowed, Any]]:
        """Every live session, by serialized key then end then start (tests, interactive queries)."""
        first_live = self._first_live_end()
        result: list[tuple[Windowed, Any]] = []
        for store_key, raw in self._reader.all():
            end, start = _END_START.unpack_from(store_key, len(store_key) - _SUFFIX)
            if end < first_live:
                continue
            key = self._key_serde.deserialize(store_key[:-_SUFFIX])
            result.append((Windowed(key, start, end), self._value_serde.deserialize(raw)))
        return result

    @property
    def key_serde(self) -> Serde:
        """The serde of record keys (the store key is these bytes + end + start)."""
        return self._key_serde

    @property
    def value_serde(self) -> Serde:
        """The serde of aggregates."""
        return self._value_serde

    def stream_time(self) -> int:
        """The observed stream time (ms, -1 before the first put), the segmented store's if it is ahead
        (restored state)."""
        self._sync_stream_time()
        return self.observed_stream_time

    def raw_key(self, key: Any) -> bytes:
        """The serialized ``key``; ValueError for a null one."""
        raw = self._key_serde.serialize(key)
        if raw is None:
            raise ValueError(f"session store '{self.name}': keys must not be null")
        return raw

    def _sync_stream_time(self) -> None:
        """Adopt the segmented store's stream time (restored, or written before this view existed)."""
        segmented = self._segmented
        if segmented is not None and segmented.observed_stream_time > self.observed_stream_time:
            self.observed_stream_time = segmented.observed_stream_time

    def _first_live_end(self) -> int:
        self._sync_stream_time()
        if self.observed_stream_time < 0:
            return 0
        return max(0, self.observed_stream_time - self.retention_ms)

    def _expired(self, end: int) -> bool:
        return self.observed_stream_time >= 0 and end < self.observed_stream_time - self.retention_ms


def _session_end_of(store_key: bytes) -> int:
    end: int = _END_START.unpack_from(store_key, len(store_key) - _SUFFIX)[0]
    return end
