"""Join processors: stream-table, stream-global and table-table (stream-stream: ``joins.stream_stream``).

A join node has two inputs. Its processor object is built once and offers one side processor per input
through ``for_input(parent)``: the task's graph builder gives each parent the side processor for that
edge, so a record's side is known without inspecting it. Each class names the Kafka Streams processor
whose behaviour (null handling, what triggers output, timestamps) it follows.

Records are ``(key, value, timestamp)`` with timestamps in epoch ms; table-valued inputs and outputs carry
``Change(new_value, old_value)`` values. Dropped records (null keys or values Kafka Streams skips) count
in the task's dropped records (reason ``null_key_or_value``) and are logged, rate-limited
(``streamapp.processors.drops``).

A stream record of a stream-table or stream-global-table join that finds no table value is a *join miss*: an
inner join forwards nothing for it, a left join forwards ``joiner(value, None)``. Kafka Streams says nothing
about it; here each miss is counted per join (``ProcessorMetrics.join_misses``, ``/metrics``
``streamapp_join_misses_total``) and logged, rate-limited, saying why when the join can tell: the table has
only updates newer than the stream record (the table side was behind in event time, e.g. not loaded yet), or
the key is absent.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, cast

from streamapp.drop_reasons import NULL_KEY_OR_VALUE
from streamapp.processors.base import BuildContext, Change, FamilyBuilders, Processor, ProcessorMetrics, RecordContext
from streamapp.processors.drops import JoinMissLog, short_repr
from streamapp.state.grace_buffer import BufferedRecord, GraceBuffer, GraceBufferStore, RecordOrigin
from streamapp.state.stores import TypedKeyValueStore
from streamapp.state.versioned import VersionedKeyValueStore
from streamapp.topology.nodes.joins import StreamGlobalJoinNode, StreamTableJoinNode, TableTableJoinNode

__all__ = [
    "BUILDERS",
    "JoinProcessor",
    "Joiner",
    "StreamGlobalJoinProcessor",
    "StreamTableJoinProcessor",
    "TableTableJoinProcessor",
    "VersionedStreamTableJoinProcessor",
]

log = logging.getLogger(__name__)

BUILDERS = FamilyBuilders("joins")

Joiner = Callable[[Any, Any], Any]


class _Side:
    """The processor one input of a join sees: forwards every record to ``receive``."""

    __slots__ = ("process",)

    def __init__(self, receive: Callable[[Any, Any, int], None]) -> None:
        self.process = receive


class JoinProcessor:
    """Base of the two-input join processors.

    ``for_input(parent)`` returns the side processor for the edge from ``parent``; ``process`` itself is
    not used (a join has no single input) and raises.
    """

    def __init__(
        self, left: str, right: str, children: Sequence[Processor], metrics: ProcessorMetrics, name: str = ""
    ) -> None:
        self.name = name
        self._children = tuple(children)
        self._metrics = metrics
        self._sides = {left: _Side(self.process_left), right: _Side(self.process_right)}
        if left == right:  # a self-join: every record is a left record, then a right one (Kafka's order)
            self._sides[left] = _Side(self._process_both)

    def _process_both(self, key: Any, value: Any, timestamp: int) -> None:
        self.process_left(key, value, timestamp)
        self.process_right(key, value, timestamp)

    def for_input(self, parent: str) -> Processor:
        """The side processor for records from ``parent``; KeyError for a node that is not an input."""
        return self._sides[parent]

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        raise TypeError("a join processor receives records through for_input(parent), not process()")

    def process_left(self, key: Any, value: Any, timestamp: int) -> None:
        raise NotImplementedError

    def process_right(self, key: Any, value: Any, timestamp: int) -> None:
        raise NotImplementedError

    def _forward(self, key: Any, value: Any, timestamp: int) -> None:
        for child in self._children:
            child.process(key, value, timestamp)

    def _drop(self, what: str) -> None:
        self._metrics.drop(NULL_KEY_OR_VALUE, self.name, f"Skipping record due to {what}")


class StreamTableJoinProcessor(JoinProcessor):
    """Kafka's ``KStreamKTableJoin`` / ``KStreamKTableJoinProcessor`` (non-versioned table, no grace).

    Left (stream): a null value is dropped; a null key is dropped by ``inner`` and joined with ``None`` by
    ``left``; otherwise the table value is read from the store and ``(key, joiner(value, table value))``
    is forwarded unless ``inner`` found none. Right (table ``Change``): the new value is written to the
    store (``None`` deletes); nothing is forwarded.
    """

    def __init__(
        self,
        left: str,
        right: str,
        joiner: Joiner,
        left_join: bool,
        table: TypedKeyValueStore | VersionedKeyValueStore,
        children: Sequence[Processor],
        metrics: ProcessorMetrics,
        name: str = "",
    ) -> None:
        super().__init__(left, right, children, metrics, name)
        self._joiner = joiner
        self._left_join = left_join
        self._table = table
        self._table_get = table.get
        self._table_times = JoinMissLog()

    def process_left(self, key: Any, value: Any, timestamp: int) -> None:
        if value is None or key is None:
            if value is None or not self._left_join:
                self._drop("null key or value")
                return
            table_value = None
        else:
            table_value = self._table_get(key)
            if table_value is None:
                self._metrics.join_miss(self.name, self._table_times.why(key, timestamp))
                if not self._left_join:
                    return
        joined = self._joiner(value, table_value)
        for child in self._children:
            child.process(key, joined, timestamp)

    def process_right(self, key: Any, value: Any, timestamp: int) -> None:
        if key is None:
            self._drop("null key")
            return
        self._table_times.table_update(timestamp)
        self._table.put(key, _new_value(value), timestamp)


class VersionedStreamTableJoinProcessor(StreamTableJoinProcessor):
    """Kafka's ``KStreamKTableJoinProcessor`` against a versioned table (KIP-914), with the grace buffer of
    ``Joined.withGracePeriod`` when ``buffer`` is given (KIP-923).

    Right (table ``Change``, out-of-order updates included): the new value is put as the version at the update's
    timestamp (``None``: a tombstone version). Left (stream): Kafka's null rules first (a null value, or a null key
    of an inner join, is dropped; a left join joins a null key with ``None`` at once, as it cannot be buffered);
    without a buffer, or when the buffer refuses the record (older than its stream time - grace), the record joins
    at once; else it is buffered and every buffered record whose grace has passed is joined, oldest first. A join
    reads the table value *as of the stream record's timestamp* (``None`` when that version is a tombstone or is
    older than the history retention and not the latest).
    """

    def __init__(
        self, *args: Any, buffer: GraceBuffer | None = None, record_context: RecordContext | None = None, **kwargs: Any
    ) -> None:
        """``StreamTableJoinProcessor``'s arguments with a ``VersionedKeyValueStore`` as the table; ``buffer``: the
        grace buffer (``None``: no grace period); ``record_context``: the task's, whose source and headers a
        buffered record keeps and gets back while it is joined."""
        super().__init__(*args, **kwargs)
        self._versions = cast(VersionedKeyValueStore, self._table)
        self._buffer = buffer
        self._context = record_context if record_context is not None else RecordContext()

    def process_left(self, key: Any, value: Any, timestamp: int) -> None:
        if value is None or key is None:
            if value is None or not self._left_join:
                self._drop("null key or value")
                return
            self._forward(key, self._joiner(value, None), timestamp)
            return
        buffer = self._buffer
        if buffer is None or not buffer.put(key, value, timestamp, self._origin()):
            self._join(key, value, timestamp)
            return
        buffer.evict(self._join_buffered)

    def _origin(self) -> RecordOrigin:
        source = self._context.source
        if source is None:
            return RecordOrigin(headers=self._context.headers)
        return RecordOrigin(source.topic, source.partition, source.offset, self._context.headers)

    def _join_buffered(self, record: BufferedRecord) -> None:
        """Join an evicted record with its own headers (Kafka's ``emit`` sets the buffered record context)."""
        context = self._context
        headers = context.headers
        context.headers = record.origin.headers
        try:
            self._join(record.key, record.value, record.timestamp)
        finally:
            context.headers = headers

    def _join(self, key: Any, value: Any, timestamp: int) -> None:
        found = self._versions.get(key, timestamp)
        if found is None:
            self._metrics.join_miss(self.name, f"timestamp=[{timestamp}]: the table has no value as of that time")
            if not self._left_join:
                return
        self._forward(key, self._joiner(value, None if found is None else found.value), timestamp)


class StreamGlobalJoinProcessor:
    """Kafka's ``KStreamGlobalKTableJoin`` (a ``KStreamKTableJoinProcessor`` with a key mapper).

    Only stream records arrive (the global table is updated by the worker's global consumer, outside the
    graph). ``global_key = key_selector(key, value)``; a null value, or a null global key (unless ``left``
    and the record key is null), drops the record; ``(key, joiner(value, global value))`` is forwarded
    unless ``inner`` found no global value.
    """

    def __init__(
        self,
        key_selector: Callable[[Any, Any], Any],
        joiner: Joiner,
        left_join: bool,
        table: TypedKeyValueStore,
        children: Sequence[Processor],
        metrics: ProcessorMetrics,
        name: str = "",
    ) -> None:
        self.name = name
        self._key_selector = key_selector
        self._joiner = joiner
        self._left_join = left_join
        self._table = table
        self._children = tuple(children)
        self._metrics = metrics

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        global_key = self._key_selector(key, value)
        keep_null_key = self._left_join and key is None and value is not None
        if not keep_null_key and (global_key is None or value is None):
            self._metrics.drop(NULL_KEY_OR_VALUE, self.name, "Skipping record due to null global key or value")
            return
        global_value = None if global_key is None else self._table.get(global_key)
        if global_value is None and global_key is not None:
            why = f"timestamp=[{timestamp}] globalKey=[{short_repr(global_key)}]: the key is absent from the table"
            self._metrics.join_miss(self.name, why)
        if global_value is not None or self._left_join:
            joined = self._joiner(value, global_value)
            for child in self._children:
                child.process(key, joined, timestamp)


class TableTableJoinProcessor(JoinProcessor):
    """Kafka's ``KTableKTableInnerJoin`` / ``LeftJoin`` / ``OuterJoin`` (and ``RightJoin`` for the right side of
    a left join), always sending old values.

    An update ``Change(new, old)`` of one side is written to that side's store, then joined with the other
    side's current value ``other``:

    - inner: nothing when ``other`` is absent; else ``Change(j(new, other) if new, j(old, other) if old)``;
    - left, left side: nothing when ``other``, ``new`` and ``old`` are all absent; else
      ``Change(j(new, other) if new, j(old, other) if old)``;
    - left, right side: nothing when the left value is absent; else ``Change(j(left, new), j(left, old))``
      (the left row stays, joined with ``None``, when the right value goes);
    - outer, either side: nothing when all three are absent; else a result wherever ``other`` or the
      changed side's value is present (see ``_join_change``).

    ``j`` is the joiner with (left, right) argument order. Null keys are dropped. The result's timestamp is
    the later of the update's and the other side's value's (the update's when the other side is absent), as
    in Kafka (KIP-258): each side's store keeps its values' timestamps.
    """

    def __init__(
        self,
        left: str,
        right: str,
        joiner: Joiner,
        join: str,
        stores: tuple[TypedKeyValueStore, TypedKeyValueStore],
        children: Sequence[Processor],
        metrics: ProcessorMetrics,
        name: str = "",
    ) -> None:
        super().__init__(left, right, children, metrics, name)
        self._joiner = joiner
        self._join = join
        self._left_store, self._right_store = stores

    def process_left(self, key: Any, value: Any, timestamp: int) -> None:
        if key is None:
            self._drop("null key")
            return
        change = _as_change(value)
        self._left_store.put(key, change.new_value, timestamp)
        other, timestamp = _other_side(self._right_store, key, timestamp)
        mode = {"inner": "inner", "left": "preserved_this", "outer": "outer"}[self._join]
        result = _join_change(change, other, mode, self._joiner)
        if result is not None:
            self._forward(key, result, timestamp)

    def process_right(self, key: Any, value: Any, timestamp: int) -> None:
        if key is None:
            self._drop("null key")
            return
        change = _as_change(value)
        self._right_store.put(key, change.new_value, timestamp)
        other, timestamp = _other_side(self._left_store, key, timestamp)
        mode = {"inner": "inner", "left": "preserved_other", "outer": "outer"}[self._join]
        result = _join_change(change, other, mode, _reversed(self._joiner))
        if result is not None:
            self._forward(key, result, timestamp)


def _join_change(change: Change, other: Any, mode: str, joiner: Joiner) -> Change | None:
    """The joined ``Change`` for an update ``change`` of this side against ``other`` (None = absent).

    ``joiner(this value, other value)``. Modes (Kafka class):

    - ``inner`` (``KTableKTableInnerJoin``): nothing without ``other``; a side value that is absent gives
      an absent result;
    - ``preserved_this`` (``KTableKTableLeftJoin``, left join's left side): nothing when all three values
      are absent; this side's absent values give absent results, ``other`` may be ``None``;
    - ``preserved_other`` (``KTableKTableRightJoin``, left join's right side): nothing without ``other``
      (the left value); otherwise both results are joined, with ``None`` for an absent right value;
    - ``outer`` (``KTableKTableOuterJoin``): nothing when all three are absent; a result is absent only
      when both its inputs are.
    """
    new, old = change.new_value, change.old_value
    if mode in ("inner", "preserved_other") and other is None:
        return None
    if mode in ("preserved_this", "outer") and other is None and new is None and old is None:
        return None
    if mode == "preserved_other":
        return Change(joiner(new, other), joiner(old, other))
    if mode == "outer":
        return Change(
            joiner(new, other) if new is not None or other is not None else None,
            joiner(old, other) if old is not None or other is not None else None,
        )
    return Change(None if new is None else joiner(new, other), None if old is None else joiner(old, other))


def _other_side(store: TypedKeyValueStore, key: Any, timestamp: int) -> tuple[Any, int]:
    """The other side's current value (``None``: absent) and the result timestamp: the later of the update's
    and that value's (Kafka's ``KTableKTable*Join``: ``max(record.timestamp, other.timestamp)``), or the
    update's when the other side is absent."""
    found = store.get_with_timestamp(key)
    if found is None:
        return None, timestamp
    other, other_timestamp = found
    return other, max(timestamp, other_timestamp)


def _reversed(joiner: Joiner) -> Joiner:
    def reversed_joiner(this: Any, other: Any) -> Any:
        return joiner(other, this)

    return reversed_joiner


def _as_change(value: Any) -> Change:
    """A table update as a ``Change`` (a bare value from a producer that sends no old values: ``Change(v, None)``)."""
    return value if isinstance(value, Change) else Change(value, None)


def _new_value(value: Any) -> Any:
    return value.new_value if isinstance(value, Change) else value


# -- builders (BUILDERS entries) -----------------------------------------------------------------------


@BUILDERS.builds(StreamTableJoinNode)
def build_stream_table_join(node: StreamTableJoinNode, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    if ctx.store_type(node.store) == "versioned":
        buffer = None
        if node.buffer_store is not None and node.grace_ms is not None:
            store = ctx.logged_store(node.buffer_store)
            if not isinstance(store, GraceBufferStore):
                raise TypeError(f"store '{node.buffer_store}' was not opened as a grace buffer")
            buffer = GraceBuffer(store, *ctx.store_serdes(node.buffer_store), node.grace_ms)
        versioned = ctx.versioned_store(node.store)
        joiner = ctx.function(node.name, "joiner")
        args = (node.left, node.right, joiner, node.join == "left", versioned, children, ctx.metrics, node.name)
        return VersionedStreamTableJoinProcessor(*args, buffer=buffer, record_context=ctx.record_context)
    return StreamTableJoinProcessor(
        node.left,
        node.right,
        ctx.function(node.name, "joiner"),
        node.join == "left",
        ctx.store(node.store),
        children,
        ctx.metrics,
        node.name,
    )


@BUILDERS.builds(StreamGlobalJoinNode)
def build_stream_global_join(node: StreamGlobalJoinNode, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    return _GlobalJoinEntry(
        node.left,
        StreamGlobalJoinProcessor(
            ctx.function(node.name, "key_selector"),
            ctx.function(node.name, "joiner"),
            node.join == "left",
            ctx.global_store(node.right),
            children,
            ctx.metrics,
            node.name,
        ),
    )


@BUILDERS.builds(TableTableJoinNode)
def build_table_table_join(node: TableTableJoinNode, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    return TableTableJoinProcessor(
        node.left,
        node.right,
        ctx.function(node.name, "joiner"),
        node.join,
        (ctx.store(node.left_store), ctx.store(node.right_store)),
        children,
        ctx.metrics,
        node.name,
    )


class _GlobalJoinEntry:
    """A stream-global join as its stream input sees it (``for_input`` of the stream parent)."""

    def __init__(self, stream: str, processor: StreamGlobalJoinProcessor) -> None:
        self._stream = stream
        self._processor = processor
        self.process = processor.process

    def for_input(self, parent: str) -> Processor:
        if parent != self._stream:
            raise KeyError(parent)
        return self._processor
