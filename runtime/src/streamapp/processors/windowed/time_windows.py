"""The windowed aggregation over time windows (tumbling and hopping): ``TimeWindowAggregateProcessor``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from streamapp.processors.base import Change, Processor, ProcessorMetrics
from streamapp.processors.windowed.base import Aggregator, Initializer, WindowAggregateBase
from streamapp.serdes import SerdeError
from streamapp.state.caching_window_store import CachingWindowStore
from streamapp.state.window_store import WindowStore
from streamapp.topology.windows import WindowSpec
from streamapp.windowed import Windowed

__all__ = ["TimeWindowAggregateProcessor", "windows_closed_between"]


class TimeWindowAggregateProcessor(WindowAggregateBase):
    """Tumbling and hopping windows, Kafka's ``KStreamWindowAggregate`` (emit on every update).

    For each window ``[start, end)`` containing the record: if ``end > streamTime - grace`` the aggregate is
    updated and forwarded with timestamp ``max(record timestamps in the window)``; otherwise the record is late
    for that window and counted as dropped (once per closed window, as Kafka does). Null keys are dropped; null
    values are aggregated (Kafka checks only the key here).

    ``emit_on_close`` (``EmitStrategy.on_window_close()``, KIP-825; Kafka's
    ``AbstractKStreamTimeWindowAggregateProcessor`` with ``StrategyType.ON_WINDOW_CLOSE``): updates are written to
    the store (behind the record cache when it is on, which then forwards nothing) but not forwarded. After each
    record with a key, when the close time ``streamTime - grace`` moved past the last emission's
    (``last_emit_close_time``, -1 before the first), every window of the store with ``lower <= start <= closeTime -
    size`` is forwarded as ``Change(aggregate, None)`` at the window's timestamp, with the record's headers, by
    start then serialized key (Kafka's time-ordered window store); ``lower`` is 0 the first time, else the last
    emission's upper bound + 1. Kafka skips the store scan when no window start lies in that range, and so does
    this processor (``windows_closed_between``); it also checks at most once per
    ``__emit.interval.ms.kstreams.windowed.aggregation__`` of wall-clock time (an internal setting, 1 s by default),
    which only moves the same sequence of final results to a later record: the runtime checks after every record,
    so all three engines emit at the same record.

    Across a restart (restore, task migration) Kafka keeps the last emission's close time in the committed offsets'
    metadata (``processorMetadataForKey``); the runtime commits none, so before its first record a task derives a
    lower bound from the restored store instead: its stream time (the largest window start written, which the
    segmented store keeps) minus grace. The record that wrote that start had stream time at least that start, so
    every window ending at or before that close time was emitted before the commit that made its write durable, and
    is not emitted again; at most the windows that closed after it (one window start of a tumbling window) are
    emitted a second time. A task with an empty store starts from -1, as Kafka without metadata (which emits every
    closed window still in the store again).
    """

    def __init__(
        self,
        name: str,
        store: WindowStore | CachingWindowStore,
        windows: WindowSpec,
        initializer: Initializer,
        aggregator: Aggregator,
        children: Sequence[Processor],
        metrics: ProcessorMetrics,
        *,
        emit_on_close: bool = False,
    ) -> None:
        super().__init__(name, windows, initializer, aggregator, children, metrics)
        self._store = store
        self._size, self._advance, self._grace = windows.size, windows.advance, windows.grace_ms
        self._emit_on_close = emit_on_close
        self.last_emit_close_time = -1
        """The close time (ms) of the last final-results emission (``emit_on_close``); -1 before the first."""
        self._resumed = not emit_on_close
        """Whether the last emission's close time was derived from the restored store (before the first record)."""
        self._cached = isinstance(store, CachingWindowStore) or emit_on_close
        """Whether the processor only writes: the record cache forwards the updates when it flushes (Kafka's
        ``CachingWindowStore`` with ``TimestampedCacheFlushListener``), or only final results are forwarded."""
        if isinstance(store, CachingWindowStore) and not emit_on_close:
            store.set_flush_listener(self._forward_flushed, node=self.name)

    def _forward_flushed(self, windowed: Windowed, new: Any, old: Any, timestamp: int) -> None:
        change = Change(new, old)
        for child in self._children:
            child.process(windowed, change, timestamp)

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        if key is None or timestamp < 0:
            self._drop_invalid(key, timestamp)
            return
        if not self._resumed:
            self._resume()
        if timestamp > self.observed_stream_time:
            self.observed_stream_time = timestamp
        lateness, record = self.observed_stream_time - timestamp, self._lateness  # _observe, inlined: a hot path
        record.count += 1
        if lateness > 0:
            record.total_ms += lateness
            if lateness > record.max_ms:
                record.max_ms = lateness
        close_time = self.observed_stream_time - self._grace
        size, advance, store, children = self._size, self._advance, self._store, self._children
        first = (max(0, timestamp - size + advance) // advance) * advance  # WindowSpec.windows_for, inlined
        for start in range(first, timestamp + 1, advance) if advance != size else (first,):
            end = start + size
            if end <= close_time:
                self._late(timestamp, f"[{start},{end})", close_time)
                continue
            old = store.fetch(key, start)
            if old is None or old.value is None:
                old_agg = self._initializer()
                new_timestamp = timestamp
            else:
                old_agg = old.value
                new_timestamp = old.timestamp if old.timestamp > timestamp else timestamp
            new_agg = self._aggregator(key, value, old_agg)
            try:
                store.put(key, new_agg, start, new_timestamp)
            except SerdeError as exc:
                raise self._mismatch(store, key, new_agg, exc) from exc
            if self._cached:
                continue  # forwarded when the cache flushes the window
            windowed, change = Windowed(key, start, end), Change(new_agg, old_agg)
            for child in children:
                child.process(windowed, change, new_timestamp)
        if self._emit_on_close and close_time > self.last_emit_close_time:
            self._emit_final_results(close_time)

    def _resume(self) -> None:
        """Derive the last emission's close time from the restored store (class docstring)."""
        self._resumed = True
        close_time = self._store.stream_time() - self._grace
        if close_time - self._size >= 0:
            self.last_emit_close_time = close_time

    def _emit_final_results(self, close_time: int) -> None:
        """Forward the windows closed since the last emission (class docstring)."""
        upper = close_time - self._size
        if upper < 0:
            return  # no window has closed yet
        last = self.last_emit_close_time
        lower = 0 if last == -1 else max(0, last - self._size) + 1
        if not windows_closed_between(lower, upper, self._advance):
            return  # Kafka's shouldRangeFetch: no new window to emit, the last emission's close time is kept
        children = self._children
        for windowed, found in self._store.fetch_all_by_start(lower, upper):
            change = Change(found.value, None)
            for child in children:
                child.process(windowed, change, found.timestamp)
        self.last_emit_close_time = close_time


def windows_closed_between(lower: int, upper: int, advance: int) -> bool:
    """Whether a window start (a multiple of ``advance``, ms) lies in ``[lower, upper]``."""
    first = -(-lower // advance) * advance
    return first <= upper
