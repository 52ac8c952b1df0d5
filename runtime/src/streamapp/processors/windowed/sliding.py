"""The windowed aggregation over sliding windows: ``SlidingWindowAggregateProcessor``."""

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
from streamapp.state.caching_window_store import CachingSlidingWindowStore
from streamapp.state.window_store import WindowStore, WindowValue
from streamapp.topology.windows import WindowSpec
from streamapp.windowed import Windowed

__all__ = ["SlidingWindowAggregateProcessor"]


class SlidingWindowAggregateProcessor(WindowAggregateBase):
    """Sliding windows, Kafka's ``KStreamSlidingWindowAggregate`` (reverse-iterator variant, as on RocksDB).

    Windows ``[start, start + d]`` (inclusive) exist only where records are: each record creates its left window
    ``[t - d, t]`` and, when later records fall within ``d`` after it, its right window ``[t + 1, t + 1 + d]``;
    records with ``t < d`` share the window ``[0, d]``. A record is late when ``t + d < streamTime - grace``; a
    window it would update is skipped (counted as dropped) when ``end < streamTime - grace``. Null keys and null
    values are dropped.

    Behind the record cache (a ``CachingSlidingWindowStore``, Kafka's ``CachingWindowStore`` with
    ``TimestampedCacheFlushListener``) the processor only writes: each window is forwarded when the cache flushes
    it, as ``Change(new, old)`` with ``old`` the value last flushed, at the window's timestamp. A window created
    from another window's aggregate gets a copy of it (``CachingSlidingWindowStore.detached``).

    ``emit_on_close`` (``EmitStrategy.on_window_close()``, KIP-825; Kafka's ``KStreamSlidingWindowAggregate`` with
    ``StrategyType.ON_WINDOW_CLOSE``): updates are stored, not forwarded; after each record that is neither late nor
    early (``t < d``: Kafka returns before its emission for both), ``final_results`` (``FinalResults``) forwards the
    windows with ``lower <= start <= closeTime - d - 1`` (ends are inclusive), ``lower`` 0 the first time, else the
    last emission's close time - d (Kafka's ``emitRangeLowerBound`` / ``emitRangeUpperBound``).
    """

    def __init__(
        self,
        name: str,
        store: WindowStore | CachingSlidingWindowStore,
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
        self._diff = windows.size
        self._cache: CachingSlidingWindowStore | None = None
        self.final_results = (
            FinalResults(store.stream_time, closed_windows(store), self._forward) if emit_on_close else None
        )
        self._forwards = not isinstance(store, CachingSlidingWindowStore) and not emit_on_close
        """Whether updates are forwarded as they are written (no record cache, every update emitted)."""
        if isinstance(store, CachingSlidingWindowStore):
            self._cache = store
            if not emit_on_close:
                store.set_flush_listener(self._forward_flushed, node=self.name)

    def _forward_flushed(self, windowed: Windowed, new: Any, old: Any, timestamp: int) -> None:
        self._forward(windowed, Change(new, old), timestamp)

    def _seed(self, aggregate: Any) -> Any:
        """Another window's aggregate as the start of a new window: a copy of a cached mutable one."""
        return aggregate if self._cache is None else self._cache.detached(aggregate)

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        if key is None or value is None or timestamp < 0:
            self._drop_invalid(key, timestamp)
            return
        final = self.final_results
        if final is not None and not final.resumed:
            final.resume(self.windows.grace_ms + 1, self._emit_upper)
        self._observe(timestamp)
        close_time = self.observed_stream_time - self.windows.grace_ms
        if timestamp + self._diff < close_time:
            self._late(timestamp, f"[{timestamp},{timestamp + self._diff}]", close_time)
            return
        if timestamp < self._diff:
            self._process_early(key, value, timestamp, close_time)
            return  # Kafka's processEarly: no emission
        self._process_reverse(key, value, timestamp, close_time)
        if final is not None and close_time > final.last_close_time:
            upper = self._emit_upper(close_time)
            if upper >= 0:
                last = final.last_close_time
                final.emit(0 if last == -1 else max(0, last - self._diff), upper, close_time)

    def _emit_upper(self, close_time: int) -> int:
        """The largest window start closed at ``close_time``: its end ``start + d`` is below it (Kafka's
        ``emitRangeUpperBound``)."""
        return close_time - self._diff - 1

    def _process_reverse(self, key: Any, value: Any, timestamp: int, close_time: int) -> None:
        diff = self._diff
        starts: set[int] = set()
        left_agg: WindowValue | None = None
        right_agg: WindowValue | None = None
        left_created = right_created = False
        previous_timestamp: int | None = None
        windows = self._store.fetch_range(key, max(0, timestamp - 2 * diff), timestamp + 1)
        for start, found in reversed(windows):
            starts.add(start)
            end = start + diff
            if start == timestamp + 1:
                right_created = True
            elif end > timestamp:
                if right_agg is None:
                    right_agg = found
                self._update(key, value, timestamp, start, found, close_time)
            elif end == timestamp:
                left_created = True
                self._update(key, value, timestamp, start, found, close_time)
                if found.timestamp < timestamp:
                    previous_timestamp = found.timestamp
                else:
                    return  # every window this record belongs to exists already
            else:  # end < timestamp: the closest earlier window holds the previous record
                left_agg = found
                previous_timestamp = found.timestamp
                break
        self._create_windows(
            key,
            value,
            timestamp,
            close_time,
            starts,
            right_agg,
            left_agg,
            left_created,
            right_created,
            previous_timestamp,
        )

    def _process_early(self, key: Any, value: Any, timestamp: int, close_time: int) -> None:
        """Records with ``0 <= t < d`` go into the window ``[0, d]`` (no negative starts)."""
        combined: WindowValue | None = None
        right_agg: WindowValue | None = None
        right_created = False
        starts: set[int] = set()
        previous_timestamp: int | None = None
        for start, found in self._store.fetch_range(key, 0, timestamp + 1):
            starts.add(start)
            if start == 0:
                combined = found
                if found.timestamp < timestamp:
                    previous_timestamp = found.timestamp
            elif start <= timestamp:
                right_agg = found
                self._update(key, value, timestamp, start, found, close_time)
            else:  # start == timestamp + 1
                right_created = True
        if right_agg is None and combined is not None and combined.timestamp > timestamp:
            right_agg = combined
        if not right_created and right_agg is not None and right_agg.timestamp > timestamp:
            self._create_right_window(key, timestamp, right_agg)
        if previous_timestamp is not None and previous_timestamp + 1 not in starts:
            self._update(key, value, timestamp, previous_timestamp + 1, self._empty(timestamp), close_time)
        self._update(key, value, timestamp, 0, combined or self._empty(timestamp), close_time)

    def _create_windows(
        self,
        key: Any,
        value: Any,
        timestamp: int,
        close_time: int,
        starts: set[int],
        right_agg: WindowValue | None,
        left_agg: WindowValue | None,
        left_created: bool,
        right_created: bool,
        previous_timestamp: int | None,
    ) -> None:
        diff = self._diff
        if previous_timestamp is not None:
            previous_right_start = previous_timestamp + 1
            if previous_right_start not in starts and previous_right_start + diff >= timestamp:
                self._update(key, value, timestamp, previous_right_start, self._empty(timestamp), close_time)
        if not left_created:
            if previous_timestamp is not None and left_agg is not None and timestamp - diff <= previous_timestamp:
                left = WindowValue(self._seed(left_agg.value), timestamp)
            else:
                left = self._empty(timestamp)
            self._update(key, value, timestamp, timestamp - diff, left, close_time)
        if not right_created and right_agg is not None and right_agg.timestamp > timestamp:
            self._create_right_window(key, timestamp, right_agg)

    def _create_right_window(self, key: Any, timestamp: int, right_agg: WindowValue) -> None:
        """The record's right window ``[t + 1, t + 1 + d]`` holds what its right neighbours hold (no update)."""
        start = timestamp + 1
        value = self._seed(right_agg.value)
        try:
            self._store.put(key, value, start, right_agg.timestamp)
        except SerdeError as exc:
            raise self._mismatch(self._store, key, value, exc) from exc
        if self._forwards:
            self._forward(Windowed(key, start, start + self._diff), Change(value, None), right_agg.timestamp)

    def _empty(self, timestamp: int) -> WindowValue:
        return WindowValue(self._initializer(), timestamp)

    def _update(self, key: Any, value: Any, timestamp: int, start: int, current: WindowValue, close_time: int) -> None:
        end = start + self._diff
        if end < close_time:
            self._late(timestamp, f"[{start},{end}]", close_time)
            return
        old_agg = current.value
        new_agg = self._aggregator(key, value, old_agg)
        new_timestamp = timestamp if old_agg is None else max(timestamp, current.timestamp)
        try:
            self._store.put(key, new_agg, start, new_timestamp)
        except SerdeError as exc:
            raise self._mismatch(self._store, key, new_agg, exc) from exc
        if self._forwards:
            self._forward(Windowed(key, start, end), Change(new_agg, old_agg), new_timestamp)
