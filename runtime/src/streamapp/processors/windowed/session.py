"""The windowed aggregation over session windows: ``SessionWindowAggregateProcessor``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from streamapp.processors.base import Change, Processor, ProcessorMetrics
from streamapp.processors.windowed.base import Aggregator, FinalResults, Initializer, Merger, WindowAggregateBase
from streamapp.serdes import SerdeError
from streamapp.state.caching_session_store import CachingSessionStore
from streamapp.state.session_store import SessionStore
from streamapp.topology.windows import WindowSpec
from streamapp.windowed import Windowed

__all__ = ["SessionWindowAggregateProcessor"]


class SessionWindowAggregateProcessor(WindowAggregateBase):
    """Session windows, Kafka's ``KStreamSessionWindowAggregate`` (emit on every update).

    A record at ``t`` merges every session of its key that ends at or after ``t - gap`` and starts at or before
    ``t + gap`` into one session (aggregates combined with ``merger``, oldest end first). The merged session is
    late, and the record dropped, when ``end < streamTime - grace - gap``. Replaced sessions are forwarded as
    tombstones ``Change(None, old)``; the new session as ``Change(agg, None)``, all timestamped with the
    session's end. Null keys are dropped.

    Behind the record cache (a ``CachingSessionStore``, Kafka's ``CachingSessionStore`` with
    ``SessionCacheFlushListener``) the processor only writes: each session is forwarded when the cache flushes
    it, as ``Change(new, old)`` with ``old`` the value last flushed (so a record inside an existing session gives
    one update, not a tombstone and an update), and a flushed session merged away as ``Change(None, old)``.

    ``emit_on_close`` (``EmitStrategy.on_window_close()``, KIP-825; Kafka's ``KStreamSessionWindowAggregate`` with
    ``StrategyType.ON_WINDOW_CLOSE``): nothing is forwarded per update (neither merged-away sessions nor new ones);
    after each record with a key, late ones included, when ``closeTime = streamTime - grace - gap`` moved past the
    last emission's, ``final_results`` (``FinalResults``) forwards every session of the store with ``lower <= end <=
    closeTime - 1`` (``lower``: the last emission's close time, 0 the first time) as ``Change(aggregate, None)`` at its
    end, by end then key then start (Kafka's time-ordered session store).
    """

    def __init__(
        self,
        name: str,
        store: SessionStore | CachingSessionStore,
        windows: WindowSpec,
        initializer: Initializer,
        aggregator: Aggregator,
        merger: Merger,
        children: Sequence[Processor],
        metrics: ProcessorMetrics,
        *,
        emit_on_close: bool = False,
    ) -> None:
        super().__init__(name, windows, initializer, aggregator, children, metrics)
        self._store = store
        self._merger = merger
        assert windows.gap_ms is not None
        self._gap = windows.gap_ms
        self._cached = isinstance(store, CachingSessionStore) or emit_on_close
        """Whether the processor only writes (the record cache forwards, or only final results are forwarded)."""
        self.final_results = (
            FinalResults(store.stream_time, self._closed_sessions, self._forward) if emit_on_close else None
        )
        if isinstance(store, CachingSessionStore) and not emit_on_close:
            store.set_flush_listener(self._forward_flushed, node=self.name)

    def _forward_flushed(self, session: Windowed, new: Any, old: Any, timestamp: int) -> None:
        self._forward(session, Change(new, old), timestamp)

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        if key is None or timestamp < 0:
            self._drop_invalid(key, timestamp)
            return
        final = self.final_results
        if final is not None and not final.resumed:
            final.resume(self.windows.grace_ms + self._gap, _emit_upper)
        self._observe(timestamp)
        close_time = self.observed_stream_time - self.windows.grace_ms - self._gap
        start = end = timestamp
        agg = self._initializer()
        merged = self._store.find_sessions(key, timestamp - self._gap, timestamp + self._gap)
        for session, session_agg in merged:
            agg = self._merger(key, agg, session_agg)
            start, end = min(start, session.start), max(end, session.end)
        if end < close_time:
            self._late(timestamp, f"[{start},{end}]", close_time)
        else:
            self._merge_and_put(key, value, timestamp, agg, merged, (start, end))
        if final is not None and close_time > final.last_close_time:
            upper = _emit_upper(close_time)
            lower = max(0, final.last_close_time)
            if lower <= upper:  # lower >= 0; a session may be a single point: [t, t]
                final.emit(lower, upper, close_time)

    def _closed_sessions(self, lower: int, upper: int) -> list[tuple[Windowed, Any, int]]:
        return [(session, value, session.end) for session, value in self._store.fetch_all_by_end(lower, upper)]

    def _merge_and_put(
        self,
        key: Any,
        value: Any,
        timestamp: int,
        agg: Any,
        merged: list[tuple[Windowed, Any]],
        bounds: tuple[int, int],
    ) -> None:
        """Replace the ``merged`` sessions by the session ``bounds`` (start, end) with the record folded in
        (forwarded unless the processor only writes)."""
        start, end = bounds
        cached = self._cached
        if bounds != (timestamp, timestamp):
            for session, session_agg in merged:
                self._store.remove(session)
                if not cached:
                    self._forward(session, Change(None, session_agg), session.end)
        agg = self._aggregator(key, value, agg)
        session_key = Windowed(key, start, end)
        try:
            self._store.put(session_key, agg)
        except SerdeError as exc:
            raise self._mismatch(self._store, key, agg, exc) from exc
        if not cached:
            self._forward(session_key, Change(agg, None), end)


def _emit_upper(close_time: int) -> int:
    """The largest session end closed at ``close_time`` (ends are inclusive; Kafka's ``emitRangeUpperBound``)."""
    return close_time - 1
