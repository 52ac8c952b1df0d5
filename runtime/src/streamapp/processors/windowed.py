"""The ``windowed`` family's processors: windowed aggregations (time, sliding and session windows) and
``suppress``.

Each processor receives ``(key, value, timestamp)`` records of a grouped stream and forwards
``(Windowed(key, start, end), Change(new aggregate, old aggregate), timestamp)`` for every window it updates, or,
behind the record cache (``statestore.cache.max.bytes`` > 0, docs/record-cache.md), leaves forwarding to the
cache's flush (Kafka's caching window and session stores with their flush listeners).
Stream time is the largest timestamp the processor has seen (Kafka's per-processor ``observedStreamTime``, one
per task); a record whose window is closed (see ``streamapp.topology.windows``) is dropped, counted in the
task's dropped records under reason ``late`` (Kafka's ``dropped-records`` sensor) and logged, rate-limited, with
its topic, partition, offset, window and stream time (``streamapp.processors.drops``). Records with a negative
timestamp are dropped too (``invalid_timestamp``; Kafka's timestamp extractors refuse them before they reach a
processor). Each record's lateness behind the observed stream time is recorded (Kafka's ``record-lateness``).

Count and reduce are aggregates (Kafka's ``GroupedStreamAggregateBuilder``): count = ``(0, agg + 1, a + b)``;
reduce = ``(None, value if agg is None else reducer(agg, value), ...)``.

``suppress`` is Kafka Streams' ``KTableSuppressProcessor``. ``until_window_closes``: every update of the windowed
table goes into a ``SuppressionBuffer`` at buffer time = the window's end; after each record the processor
forwards (oldest buffer time first) every buffered update with ``end <= streamTime - closeGrace``, where stream
time is the largest record timestamp it has seen and ``closeGrace`` the upstream window's grace (plus the gap
for session windows); final tombstones (a session merged away) are not forwarded. ``until_time_limit``: the
buffer time is the record's timestamp and the limit replaces the grace; tombstones are forwarded. A forwarded
record is ``(key, Change(new, prior), timestamp of the last update)``. A bounded buffer over its bound then
fails the record (strict, ``shut_down``) or forwards its oldest updates early until it fits (``emit_early``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from streamapp.drop_reasons import INVALID_TIMESTAMP, NULL_KEY_OR_VALUE
from streamapp.processors.base import (
    BuildContext,
    Change,
    FamilyBuilders,
    Processor,
    ProcessorMetrics,
    RecordContext,
    StoreSerializationError,
    store_mismatch,
)
from streamapp.serdes import SerdeError
from streamapp.state.caching_session_store import CachingSessionStore
from streamapp.state.caching_window_store import CachingSlidingWindowStore, CachingWindowStore
from streamapp.state.session_store import SessionStore
from streamapp.state.suppression_buffer import BufferedUpdate, SuppressionBuffer
from streamapp.state.window_store import WindowStore, WindowValue
from streamapp.topology.nodes.windowed import (
    SuppressNode,
    WindowedAggregateNode,
    WindowedAggregationNode,
    WindowedCountNode,
    WindowedReduceNode,
)
from streamapp.topology.windows import WindowSpec
from streamapp.windowed import Windowed

__all__ = [
    "BUILDERS",
    "SessionWindowAggregateProcessor",
    "SlidingWindowAggregateProcessor",
    "SuppressProcessor",
    "SuppressionBufferFullError",
    "TimeWindowAggregateProcessor",
]

log = logging.getLogger(__name__)

BUILDERS = FamilyBuilders("windowed")

Initializer = Callable[[], Any]
Aggregator = Callable[[Any, Any, Any], Any]
Merger = Callable[[Any, Any, Any], Any]


class _WindowAggregateBase:
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


class TimeWindowAggregateProcessor(_WindowAggregateBase):
    """Tumbling and hopping windows, Kafka's ``KStreamWindowAggregate`` (emit on every update).

    For each window ``[start, end)`` containing the record: if ``end > streamTime - grace`` the aggregate is
    updated and forwarded with timestamp ``max(record timestamps in the window)``; otherwise the record is late
    for that window and counted as dropped (once per closed window, as Kafka does). Null keys are dropped; null
    values are aggregated (Kafka checks only the key here).
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
    ) -> None:
        super().__init__(name, windows, initializer, aggregator, children, metrics)
        self._store = store
        self._size, self._advance, self._grace = windows.size, windows.advance, windows.grace_ms
        self._cached = isinstance(store, CachingWindowStore)
        """Whether the record cache forwards the updates when it flushes (Kafka's ``CachingWindowStore`` with
        ``TimestampedCacheFlushListener``): the processor then only writes."""
        if isinstance(store, CachingWindowStore):
            store.set_flush_listener(self._forward_flushed, node=self.name)

    def _forward_flushed(self, windowed: Windowed, new: Any, old: Any, timestamp: int) -> None:
        change = Change(new, old)
        for child in self._children:
            child.process(windowed, change, timestamp)

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        if key is None or timestamp < 0:
            self._drop_invalid(key, timestamp)
            return
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


class SlidingWindowAggregateProcessor(_WindowAggregateBase):
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
    ) -> None:
        super().__init__(name, windows, initializer, aggregator, children, metrics)
        self._store = store
        self._diff = windows.size
        self._cache: CachingSlidingWindowStore | None = None
        if isinstance(store, CachingSlidingWindowStore):
            self._cache = store
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
        self._observe(timestamp)
        close_time = self.observed_stream_time - self.windows.grace_ms
        if timestamp + self._diff < close_time:
            self._late(timestamp, f"[{timestamp},{timestamp + self._diff}]", close_time)
            return
        if timestamp < self._diff:
            self._process_early(key, value, timestamp, close_time)
        else:
            self._process_reverse(key, value, timestamp, close_time)

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
        if self._cache is None:
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
        if self._cache is None:
            self._forward(Windowed(key, start, end), Change(new_agg, old_agg), new_timestamp)


class SessionWindowAggregateProcessor(_WindowAggregateBase):
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
    ) -> None:
        super().__init__(name, windows, initializer, aggregator, children, metrics)
        self._store = store
        self._merger = merger
        assert windows.gap_ms is not None
        self._gap = windows.gap_ms
        self._cached = isinstance(store, CachingSessionStore)
        if isinstance(store, CachingSessionStore):
            store.set_flush_listener(self._forward_flushed, node=self.name)

    def _forward_flushed(self, session: Windowed, new: Any, old: Any, timestamp: int) -> None:
        self._forward(session, Change(new, old), timestamp)

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        if key is None or timestamp < 0:
            self._drop_invalid(key, timestamp)
            return
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
            return
        cached = self._cached
        if (start, end) != (timestamp, timestamp):
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


# -- count / reduce / aggregate as (initializer, aggregator, merger) ----------------------------------------


def _count_initializer() -> int:
    return 0


def _count_aggregator(key: Any, value: Any, aggregate: int) -> int:
    return aggregate + 1


def _count_merger(key: Any, first: int, second: int) -> int:
    return first + second


def _reduce_functions(reducer: Callable[[Any, Any], Any]) -> tuple[Initializer, Aggregator, Merger]:
    def aggregator(key: Any, value: Any, aggregate: Any) -> Any:
        return value if aggregate is None else reducer(aggregate, value)

    def merger(key: Any, first: Any, second: Any) -> Any:
        return aggregator(key, second, first)

    return (lambda: None), aggregator, merger


def _functions(node: WindowedAggregationNode, ctx: BuildContext) -> tuple[Initializer, Aggregator, Merger | None]:
    if isinstance(node, WindowedCountNode):
        return _count_initializer, _count_aggregator, _count_merger
    if isinstance(node, WindowedReduceNode):
        return _reduce_functions(ctx.function(node.name, "reducer"))
    assert isinstance(node, WindowedAggregateNode)
    merger = ctx.function(node.name, "merger") if node.merger is not None else None
    return ctx.function(node.name, "initializer"), ctx.function(node.name, "aggregator"), merger


@BUILDERS.builds(WindowedCountNode, WindowedReduceNode, WindowedAggregateNode)
def build_windowed_aggregation(
    node: WindowedAggregationNode, children: Sequence[Processor], ctx: BuildContext
) -> Processor:
    """The processor of a ``windowed_count`` / ``windowed_reduce`` / ``windowed_aggregate`` node."""
    initializer, aggregator, merger = _functions(node, ctx)
    windows = node.windows
    if windows.type == "session":
        assert merger is not None
        return SessionWindowAggregateProcessor(
            node.name,
            ctx.cached_session_store(node.store),
            windows,
            initializer,
            aggregator,
            merger,
            children,
            ctx.metrics,
        )
    if windows.type == "sliding":
        sliding = ctx.cached_window_store(node.store)
        assert not isinstance(sliding, CachingWindowStore) or isinstance(sliding, CachingSlidingWindowStore)
        return SlidingWindowAggregateProcessor(
            node.name, sliding, windows, initializer, aggregator, children, ctx.metrics
        )
    store = ctx.cached_window_store(node.store)
    return TimeWindowAggregateProcessor(node.name, store, windows, initializer, aggregator, children, ctx.metrics)


class SuppressionBufferFullError(RuntimeError):
    """A suppress node's strict buffer exceeded its bound (Kafka's ``StreamsException`` from
    ``KTableSuppressProcessor`` with ``shutDownWhenFull``); it goes to the processing exception handler."""


class SuppressProcessor:
    """Buffers table updates and forwards them when their buffer time expires (``SuppressNode``).

    ``suppress_ms``: how far behind stream time an update's buffer time must be to be forwarded (the close grace
    for final results, the time limit otherwise). ``final_results``: buffer under the window end, require
    ``Windowed`` keys (TypeError otherwise) and drop final tombstones; else buffer under the record timestamp and
    forward tombstones. ``max_records`` / ``max_bytes`` (``None``: unbounded) and ``emit_early_when_full`` as in
    ``SuppressNode``; a strict buffer over its bound raises SuppressionBufferFullError. ``record_context``: the
    task's headers of the record being processed; an update is forwarded with the headers of the record that
    buffered it (Kafka's ``KTableSuppressProcessor`` sets the buffered record context back).
    """

    def __init__(
        self,
        name: str,
        buffer: SuppressionBuffer,
        suppress_ms: int,
        children: Sequence[Processor],
        *,
        final_results: bool = True,
        max_records: int | None = None,
        max_bytes: int | None = None,
        emit_early_when_full: bool = False,
        record_context: RecordContext | None = None,
    ) -> None:
        self.name = name
        self._context = record_context if record_context is not None else RecordContext()
        self.close_grace_ms = suppress_ms
        """How far behind stream time (ms) a buffered update is forwarded (named for final results)."""
        self.observed_stream_time = -1
        """Largest record timestamp seen (ms), -1 before the first record."""
        self.emitted = 0
        """Updates forwarded (Kafka's ``suppression-emit-total``)."""
        self._buffer = buffer
        self._children = tuple(children)
        self._final_results = final_results
        self._max_records = max_records
        self._max_bytes = max_bytes
        self._emit_early = emit_early_when_full

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        if self._final_results:
            if not isinstance(key, Windowed):
                raise TypeError(f"suppress node '{self.name}' needs Windowed keys, got {type(key).__name__}")
            buffer_time = key.end
        else:
            buffer_time = timestamp
        self.observed_stream_time = max(self.observed_stream_time, timestamp)
        change = value if isinstance(value, Change) else Change(value, None)
        self._buffer.put(buffer_time, key, change.new_value, change.old_value, timestamp, self._context.headers)
        for update in self._buffer.evict_until(self.observed_stream_time - self.close_grace_ms):
            self._emit(update)
        if self._over_capacity():
            if not self._emit_early:
                raise SuppressionBufferFullError(
                    f"{self.name} buffer exceeded its max capacity. Currently "
                    f"[{self._buffer.num_records}/{_bound(self._max_records)}] records and "
                    f"[{self._buffer.size_bytes}/{_bound(self._max_bytes)}] bytes."
                )
            while self._over_capacity():
                evicted = self._buffer.evict_oldest()
                if evicted is None:
                    break
                self._emit(evicted)

    def _over_capacity(self) -> bool:
        return (self._max_records is not None and self._buffer.num_records > self._max_records) or (
            self._max_bytes is not None and self._buffer.size_bytes > self._max_bytes
        )

    def _emit(self, update: BufferedUpdate) -> None:
        if update.new_value is None and self._final_results:
            return  # safe to drop final tombstones (Kafka's FinalResultsSuppressionBuilder)
        self.emitted += 1
        forwarded = Change(update.new_value, update.prior_value)
        context = self._context
        current, context.headers = context.headers, update.headers  # the buffered record's (Kafka's)
        try:
            for child in self._children:
                child.process(update.key, forwarded, update.timestamp)
        finally:
            context.headers = current


def _bound(limit: int | None) -> int:
    return 2**63 - 1 if limit is None else limit  # Kafka prints Long.MAX_VALUE for an unbounded limit


@BUILDERS.builds(SuppressNode)
def build_suppress(node: SuppressNode, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    """The processor of a ``suppress`` node; for final results its close grace comes from the upstream windowed
    aggregation, for a time limit it is ``time_limit_ms``."""
    final_results = node.until == "window_closes"
    suppress_ms = ctx.close_grace(node.name) if final_results else node.time_limit_ms
    assert suppress_ms is not None
    return SuppressProcessor(
        node.name,
        ctx.suppression_buffer(node.store),
        suppress_ms,
        children,
        final_results=final_results,
        max_records=node.max_records,
        max_bytes=node.max_bytes,
        emit_early_when_full=node.when_full == "emit_early",
        record_context=ctx.record_context,
    )
