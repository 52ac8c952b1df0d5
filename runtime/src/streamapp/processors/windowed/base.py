"""What the windowed aggregations (``time_windows``, ``sliding``, ``session``) share: the types of their
functions, ``WindowAggregateBase`` (children, observed stream time, drop and lateness accounting) and
``FinalResults`` (the emission of ``EmitStrategy.on_window_close()``, KIP-825)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from streamapp.drop_reasons import INVALID_TIMESTAMP, NULL_KEY_OR_VALUE
from streamapp.processors.base import Change, Processor, ProcessorMetrics, StoreSerializationError, store_mismatch
from streamapp.serdes import SerdeError
from streamapp.topology.windows import WindowSpec
from streamapp.windowed import Windowed

__all__ = [
    "Aggregator",
    "ClosedWindows",
    "FinalResults",
    "Initializer",
    "Merger",
    "WindowAggregateBase",
    "closed_windows",
    "derived_close_time",
]

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


ClosedWindows = Callable[[int, int], Iterable[tuple[Windowed, Any, int]]]
"""``fetch(lower, upper)``: the windows (sessions) a final-results emission forwards, ``(windowed key, aggregate,
timestamp)``, in Kafka's order for the window kind."""


class FinalResults:
    """The final results of a windowed aggregation with ``EmitStrategy.on_window_close()`` (KIP-825; Kafka's
    ``AbstractKStreamTimeWindowAggregateProcessor`` and ``KStreamSessionWindowAggregate`` with
    ``StrategyType.ON_WINDOW_CLOSE``): after a record, when the close time moved past the last emission's
    (``last_close_time``, -1 before the first), the processor calls ``emit(lower, upper, close time)`` with the bounds
    of its window kind, and every window ``fetch`` finds in them goes to ``forward`` as ``Change(aggregate, None)``
    at its timestamp (Kafka reads them from its time-ordered store: by window start, or session end, then key).

    ``last_close_time`` survives a restart or a move in the committed offsets' metadata, as Kafka keeps it
    (``addProcessorMetadataKeyValue(storeName, windowCloseTime)``; ``streamapp.processing.commit_metadata``): the
    task commits it with its input offsets (in the same transaction under exactly-once) and, before its first
    record, ``restore_committed`` sets the committed value, so no final result is emitted twice by a task that
    committed it. Without metadata (a commit of an older runtime) the first record's ``resume(lag, upper_of)``
    falls back to ``derived_close_time``: from the restored store, which emits again at most the windows closed
    after the last committed store write.
    """

    def __init__(self, stream_time: Callable[[], int], fetch: ClosedWindows, forward: Any) -> None:
        self._stream_time = stream_time
        self._fetch = fetch
        self._forward = forward
        self.last_close_time = -1
        self.resumed = False

    def restore_committed(self, close_time: int) -> None:
        """Resume from the close time the task's last commit carried (-1: nothing emitted as of that commit)."""
        self.last_close_time = close_time
        self.resumed = True

    def resume(self, lag: int, upper_of: Callable[[int], int]) -> None:
        """Resume without committed metadata, before the first record: ``derived_close_time``."""
        self.resumed = True
        self.last_close_time = derived_close_time(self._stream_time(), lag, upper_of)

    def emit(self, lower: int, upper: int, close_time: int) -> None:
        """Forward the windows ``fetch`` finds in ``[lower, upper]`` (ms) and remember ``close_time``."""
        forward = self._forward
        for windowed, aggregate, timestamp in self._fetch(lower, upper):
            forward(windowed, Change(aggregate, None), timestamp)
        self.last_close_time = close_time


def derived_close_time(stream_time: int, lag: int, upper_of: Callable[[int], int]) -> int:
    """The last emission's close time (ms) as a restored store shows it, when no commit metadata holds it: the
    store's ``stream_time`` (the largest window start or session end written, kept by the segmented store; -1 when
    empty) minus ``lag`` (what separates that time from the close time of the record that wrote it: grace; plus 1
    for sliding windows, whose records write starts up to ``t + 1``; plus the gap for sessions). Every window that
    record closed was emitted before the commit that made its write durable; the windows closed after it are
    emitted again. -1 (nothing emitted, as Kafka without metadata) when ``upper_of(close time)`` < 0: no window
    could have closed yet."""
    close_time = stream_time - lag
    return close_time if upper_of(close_time) >= 0 else -1


def closed_windows(store: Any) -> ClosedWindows:
    """``FinalResults``' fetch over a window store or its caching view: by start, at each window's timestamp."""

    def fetch(lower: int, upper: int) -> Iterable[tuple[Windowed, Any, int]]:
        return [(window, found.value, found.timestamp) for window, found in store.fetch_all_by_start(lower, upper)]

    return fetch
