"""What the windowed aggregations (``time_windows``, ``sliding``, ``session``) share: the types of their
functions, ``WindowAggregateBase`` (children, observed stream time, drop and lateness accounting) and
``FinalResults`` (the emission of ``EmitStrategy.on_window_close()``, KIP-825)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from streamapp.drop_reasons import INVALID_TIMESTAMP, NULL_KEY_OR_VALUE
from streamapp.processors.base import Change, Processor, ProcessorMetrics, StoreSerializationError, store_mismatch
from streamapp.serdes import SerdeError
from streamapp.state.window_store import WindowValue
from streamapp.topology.windows import WindowSpec
from streamapp.windowed import Windowed

__all__ = ["Aggregator", "FinalResults", "Initializer", "Merger", "WindowAggregateBase"]

Initializer = Callable[[], Any]
Aggregator = Callable[[Any, Any, Any], Any]
Merger = Callable[[Any, Any, Any], Any]


class WindowAggregateBase:
    """What the three windowed aggregations share: functions, children, stream time, drop accounting."""

    def __init__(
        self,
        name: str,
        windows: WindowSpec,
        initializer: Initializer,
        aggregator: Aggregator,
        children: Sequence[Processor],
        metrics: ProcessorMetrics,
    ) -> None:
        self.name = name
        self.windows = windows
        self.observed_stream_time = -1
        """Largest record timestamp seen (ms), -1 before the first record."""
        self._initializer = initializer
        self._aggregator = aggregator
        self._children = tuple(children)
        self._metrics = metrics
        self._lateness = metrics.lateness_of(name)

    def _forward(self, key: Windowed, change: Change, timestamp: int) -> None:
        for child in self._children:
            child.process(key, change, timestamp)

    def _mismatch(self, store: Any, key: Any, value: Any, exc: SerdeError) -> StoreSerializationError:
        """The error for an aggregate the store's value serde rejected (``store_mismatch``; caught around the
        write, so a write that fits costs nothing more)."""
        return store_mismatch(self.name, store.name, key, value, exc)

    def _drop_invalid(self, key: Any, timestamp: int) -> None:
        """Count and log a record dropped for a null key, else for a negative timestamp, else (the caller
        found it) for a null value."""
        if key is not None and timestamp < 0:
            what, detail = "Skipping record due to a negative timestamp", f"timestamp=[{timestamp}]"
            self._metrics.drop(INVALID_TIMESTAMP, self.name, what, detail)
        else:
            self._metrics.drop(NULL_KEY_OR_VALUE, self.name, "Skipping record due to null key or value")

    def _late(self, timestamp: int, window: str, close_time: int) -> None:
        """Count and log a record dropped for the closed ``window`` (Kafka's "Skipping record for expired
        window"); ``close_time``: stream time minus grace, which the window's end did not exceed."""
        self._metrics.late(self.name, timestamp, window, close_time, self.observed_stream_time)

    def _observe(self, timestamp: int) -> None:
        """Advance the observed stream time and record the record's lateness behind it."""
        if timestamp > self.observed_stream_time:
            self.observed_stream_time = timestamp
        self._lateness.record(self.observed_stream_time - timestamp)


class _ClosedWindows(Protocol):
    """What final results are read from: a window store or its caching view."""

    def stream_time(self) -> int: ...

    def fetch_all_by_start(self, time_from: int, time_to: int) -> list[tuple[Windowed, WindowValue]]: ...


class FinalResults:
    """The final results of a time or sliding window aggregation with ``EmitStrategy.on_window_close()`` (Kafka's
    ``AbstractKStreamTimeWindowAggregateProcessor`` with ``StrategyType.ON_WINDOW_CLOSE``): after a record, when the
    close time (``streamTime - grace``) moved past the last emission's (``last_close_time``, -1 before the first),
    every window of ``store`` with ``lower <= start <= upper`` goes to ``forward`` as ``Change(aggregate, None)`` at
    the window's timestamp, by start then serialized key (Kafka's time-ordered window store's ``fetchAll``); the
    processor gives the bounds of its window kind (``emit``).

    Kafka keeps ``last_close_time`` in the committed offsets' metadata across a restart; the runtime commits none,
    so before a task's first record ``resume(lag)`` derives it from the restored store: its stream time (the largest
    window start written, kept by the segmented store) minus ``lag`` (grace, plus 1 for sliding windows, whose
    records write starts up to ``t + 1``). The record that wrote that start had at least that close time, so every
    window it closed was emitted before the commit that made its write durable; only windows closed after it are
    emitted again. ``min_upper(close time)`` < 0 leaves it at -1 (nothing could have been emitted yet), as Kafka
    without metadata starts.
    """

    def __init__(self, store: _ClosedWindows, forward: Any) -> None:
        self._store = store
        self._forward = forward
        self.last_close_time = -1
        self.resumed = False

    def resume(self, lag: int, upper_of: Any) -> None:
        self.resumed = True
        close_time = self._store.stream_time() - lag
        if upper_of(close_time) >= 0:
            self.last_close_time = close_time

    def emit(self, lower: int, upper: int, close_time: int) -> None:
        """Forward the windows with ``lower <= start <= upper`` (ms) and remember ``close_time``."""
        forward = self._forward
        for windowed, found in self._store.fetch_all_by_start(lower, upper):
            forward(windowed, Change(found.value, None), found.timestamp)
        self.last_close_time = close_time
