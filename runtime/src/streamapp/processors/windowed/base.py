"""What the windowed aggregations (``time_windows``, ``sliding``, ``session``) share: the types of their
functions, and ``WindowAggregateBase`` (children, observed stream time, drop and lateness accounting)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from streamapp.drop_reasons import INVALID_TIMESTAMP, NULL_KEY_OR_VALUE
from streamapp.processors.base import Change, Processor, ProcessorMetrics, StoreSerializationError, store_mismatch
from streamapp.serdes import SerdeError
from streamapp.topology.windows import WindowSpec
from streamapp.windowed import Windowed

__all__ = ["Aggregator", "Initializer", "Merger", "WindowAggregateBase"]

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
