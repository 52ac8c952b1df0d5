"""The windowed aggregation over time windows (tumbling and hopping): ``TimeWindowAggregateProcessor``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from streamapp.processors.base import Change, Processor, ProcessorMetrics
from streamapp.processors.windowed.base import (
    Aggregator,
    FinalResults,
    Initializer,
    WindowAggregateBase,
    closed_windows,
)
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

    ``emit_on_close`` (``EmitStrategy.on_window_close()``, KIP-825; Kafka's ``KStreamWindowAggregate`` with
    ``StrategyType.ON_WINDOW_CLOSE``): updates are written to the store (behind the record cache when it is on, which
    then forwards nothing) but not forwarded; after each record with a key, ``final_results`` (``FinalResults``:
    emission, order, restart) forwards the windows with ``lower <= start <= closeTime - size``, ``lower`` 0 the first
    time, else the last emission's upper bound + 1, with the record's headers. Kafka skips the store scan when no
    window start lies in that range, and so does this processor (``windows_closed_between``); it also checks at most
    once per ``__emit.interval.ms.kstreams.windowed.aggregation__`` of wall-clock time (an internal setting, 1 s by
    default), which only moves the same sequence of final results to a later record: the runtime checks after every
    record, so all three engines emit at the same record.
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
        self.final_results = (
            FinalResults(store.stream_time, closed_windows(store), self._forward) if emit_on_close else None
        )
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
        final = self.final_results
        if final is not None and not final.resumed:
            final.resume(self._grace, self._emit_upper)
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
        if final is not None and close_time > final.last_close_time:
            self._emit_final_results(final, close_time)

    def _emit_upper(self, close_time: int) -> int:
        """The largest window start closed at ``close_time`` (Kafka's ``emitRangeUpperBound``)."""
        return close_time - self._size

    def _emit_final_results(self, final: FinalResults, close_time: int) -> None:
        """Forward the windows closed since the last emission (class docstring)."""
        upper = self._emit_upper(close_time)
        if upper < 0:
            return  # no window has closed yet
        last = final.last_close_time
        lower = 0 if last == -1 else max(0, last - self._size) + 1
        if windows_closed_between(lower, upper, self._advance):  # else Kafka's shouldRangeFetch skips the scan
            final.emit(lower, upper, close_time)


def windows_closed_between(lower: int, upper: int, advance: int) -> bool:
    """Whether a window start (a multiple of ``advance``, ms) lies in ``[lower, upper]``."""
    first = -(-lower // advance) * advance
    return first <= upper
