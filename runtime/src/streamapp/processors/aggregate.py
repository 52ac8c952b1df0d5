"""The ``aggregate`` family's processors: a table's ``group_by``, and count, reduce and aggregate over a
key-value store, of grouped streams and grouped tables.

``group_by`` re-keys each table update (Kafka's ``KTableRepartitionMap``, ``GroupByProcessor``); a repartition
carries it to the aggregation.

Every aggregation reads the key's current aggregate from its store, writes the new one and forwards
``(key, Change(new aggregate, old aggregate))`` (a KTable). The input is partitioned by the key (a
repartition upstream when the key changed), so each key's aggregate lives in exactly one task.

- Grouped stream (Kafka's ``KStreamAggregate`` / ``KStreamReduce``): a record with a null key or a null
  value is skipped, counted in the dropped-records metric (``null_key_or_value``) and logged, rate-limited.
- Cogroup (KIP-150, ``CogroupedStreamAggregateBuilder``): each ``cogroup_aggregate`` is a ``KStreamAggregate`` with
  its input's aggregator over the store all of them share; ``cogroup_merge`` passes their updates on
  (``KTablePassThrough``). Behind the record cache each aggregate's flush listener is the cache's one listener of
  that store (the last set wins; all of them forward to the merge node), as in Kafka.
- Grouped table (``KTableAggregate`` / ``KTableReduce``): the input is ``Change(new, old)`` re-keyed by a
  table's ``group_by``; the old value is subtracted first (when there is an aggregate), then the new value
  added. A null key is an error (a table key is never null).

Timestamps (KIP-258): the stores are timestamped, and an aggregate's timestamp is the later of the input
record's and the current aggregate's (Kafka's ``KStreamAggregate`` / ``KStreamReduce``: ``max(record.timestamp,
oldAgg.timestamp)`` when there is an aggregate, else the record's; ``KTableAggregate`` / ``KTableReduce``: the
same whenever the existing aggregate is subtracted from or added to). The result is stored with that timestamp
and forwarded at it, so out-of-order input gives Kafka Streams' output timestamps.

With the record cache on (``statestore.cache.max.bytes`` > 0, ``streamapp.state.record_cache``) the store is
cached and the processors do not forward: the cache forwards ``Change(latest aggregate, last flushed
aggregate)`` when it flushes (commit) or evicts, Kafka's ``TimestampedTupleForwarder`` with caching enabled.

A value the store's value serde rejects (``value_serde="long"`` for dict aggregates) fails the record with a
``StoreSerializationError`` naming the node and the store: the processors catch the serde's error around their
write and re-raise, so a write that fits costs nothing more. Behind the record cache a container is serialized
when its key enters the cache, inside the write, and is named there; a number or a string is serialized only when
its entry is flushed (at commit, outside any record), where the cached store raises the same error, naming the node
given to its flush listener (``forward_on_flush(..., node)``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from streamapp.drop_reasons import NULL_KEY_OR_VALUE
from streamapp.processors.base import (
    BuildContext,
    Change,
    FamilyBuilders,
    ForwardProcessor,
    Processor,
    ProcessorMetrics,
    forward_on_flush,
    store_mismatch,
)
from streamapp.serdes import SerdeError
from streamapp.state.stores import TypedKeyValueStore
from streamapp.topology.nodes.aggregate import (
    AggregateNode,
    CogroupAggregateNode,
    CogroupMergeNode,
    CountNode,
    GroupByNode,
    ReduceNode,
)
from streamapp.topology.nodes.base import NodeBase

__all__ = [
    "BUILDERS",
    "CountProcessor",
    "GroupByProcessor",
    "StreamAggregateProcessor",
    "StreamReduceProcessor",
    "TableAggregateProcessor",
]

log = logging.getLogger(__name__)

_NULL_SKIP = "Skipping record due to null key or value"
"""Kafka's ``KStreamAggregate`` WARN text."""

BUILDERS = FamilyBuilders("aggregate")

Initializer = Callable[[], Any]
KeyedAggregator = Callable[[Any, Any, Any], Any]
"""``fn(key, value, aggregate) -> new aggregate`` (Kafka's ``Aggregator``)."""


class StreamAggregateProcessor:
    """Folds each record of a grouped stream into the key's aggregate (Kafka's ``KStreamAggregate``).

    ``initializer()`` starts a key's aggregate, ``aggregator(key, value, aggregate)`` folds a value in.
    Records with a null key or value are dropped (dropped-records metric).
    """

    def __init__(
        self,
        store: TypedKeyValueStore,
        initializer: Initializer,
        aggregator: KeyedAggregator,
        children: Sequence[Processor],
        metrics: ProcessorMetrics,
        *,
        node: str = "",
    ) -> None:
        self._store = store
        self._initializer = initializer
        self._aggregator = aggregator
        self._children = tuple(children)
        self._metrics = metrics
        self._node = node
        self._cached = forward_on_flush(store, self._children, node)

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        if key is None or value is None:
            self._metrics.drop(NULL_KEY_OR_VALUE, self._node, _NULL_SKIP)
            return
        raw_key = self._store.raw_key(key)  # serialized once for the read and the write
        found = self._store.get_raw_key(raw_key)
        if found is None:
            old = None
            new = self._aggregator(key, value, self._initializer())
        else:
            old, old_timestamp = found
            new = self._aggregator(key, value, old)
            if old_timestamp > timestamp:
                timestamp = old_timestamp
        try:
            self._store.put_raw_key(raw_key, new, timestamp)
        except SerdeError as exc:
            raise store_mismatch(self._node, self._store.name, key, new, exc) from exc
        if self._cached:
            return
        change = Change(new, old)
        for child in self._children:
            child.process(key, change, timestamp)


class CountProcessor(StreamAggregateProcessor):
    """Counts records per key: an aggregation with ``0`` and ``+1`` (Kafka's ``KGroupedStream.count``),
    inlined because a keyed count is a hot path."""

    def __init__(
        self, store: TypedKeyValueStore, children: Sequence[Processor], metrics: ProcessorMetrics, *, node: str = ""
    ) -> None:
        super().__init__(store, _zero, _plus_one, children, metrics, node=node)

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        if key is None or value is None:
            self._metrics.drop(NULL_KEY_OR_VALUE, self._node, _NULL_SKIP)
            return
        store = self._store
        raw_key = store.raw_key(key)
        found = store.get_raw_key(raw_key)
        if found is None:
            old, new = None, 1
        else:
            old, old_timestamp = found
            new = old + 1
            if old_timestamp > timestamp:
                timestamp = old_timestamp
        try:
            store.put_raw_key(raw_key, new, timestamp)
        except SerdeError as exc:
            raise store_mismatch(self._node, store.name, key, new, exc) from exc
        if self._cached:
            return
        change = Change(new, old)
        for child in self._children:
            child.process(key, change, timestamp)


class StreamReduceProcessor(StreamAggregateProcessor):
    """Combines values per key with ``reducer(aggregate, value)``; a key's first value is its aggregate
    (Kafka's ``KStreamReduce``). Records with a null key or value are dropped."""

    def __init__(
        self,
        store: TypedKeyValueStore,
        reducer: Callable[[Any, Any], Any],
        children: Sequence[Processor],
        metrics: ProcessorMetrics,
        *,
        node: str = "",
    ) -> None:
        super().__init__(store, _none, _first_or(reducer), children, metrics, node=node)


class TableAggregateProcessor:
    """Applies a grouped table's changes to the key's aggregate (Kafka's ``KTableAggregate``).

    For ``Change(new, old)``: with an old value and an existing aggregate, ``subtractor(key, old, agg)``;
    then with a new value ``adder(key, new, agg or initializer())``. The result (possibly ``None`` when
    nothing was ever added) is stored and forwarded as ``Change(result, previous aggregate)``, at the later of
    the record's and the previous aggregate's timestamps when that aggregate was subtracted from or added to.
    Raises ValueError for a null key.
    """

    def __init__(
        self,
        store: TypedKeyValueStore,
        initializer: Initializer,
        adder: KeyedAggregator,
        subtractor: KeyedAggregator,
        children: Sequence[Processor],
        *,
        node: str = "",
    ) -> None:
        self._store = store
        self._initializer = initializer
        self._adder = adder
        self._subtractor = subtractor
        self._children = tuple(children)
        self._node = node
        self._cached = forward_on_flush(store, self._children, node)

    def process(self, key: Any, value: Change, timestamp: int) -> None:
        if key is None:
            raise ValueError(f"record key for the table aggregation on store {self._store.name} must not be null")
        raw_key = self._store.raw_key(key)
        found = self._store.get_raw_key(raw_key)
        old_agg, old_timestamp = (None, timestamp) if found is None else found
        agg = old_agg
        touched = False
        if value.old_value is not None and old_agg is not None:
            agg = self._subtractor(key, value.old_value, old_agg)
            touched = True
        if value.new_value is not None:
            agg = self._adder(key, value.new_value, self._initializer() if agg is None else agg)
            touched = touched or old_agg is not None
        if touched and old_timestamp > timestamp:
            timestamp = old_timestamp
        try:
            self._store.put_raw_key(raw_key, agg, timestamp)
        except SerdeError as exc:
            raise store_mismatch(self._node, self._store.name, key, agg, exc) from exc
        if self._cached:
            return
        change = Change(agg, old_agg)
        for child in self._children:
            child.process(key, change, timestamp)


class GroupByProcessor:
    """Re-keys a table update by ``selector(key, value) -> (new_key, new_value)`` (Kafka's
    ``KTableRepartitionMap``).

    Both pairs on one key: one ``Change(new', old')``; otherwise ``Change(None, old')`` under the old key
    first, then ``Change(new', None)`` under the new key. Pairs with a null key or value are skipped.
    Raises ValueError for a null input key (a table key is never null).
    """

    def __init__(self, selector: Callable[[Any, Any], tuple[Any, Any]], children: Sequence[Processor]) -> None:
        self._selector = selector
        self._children = tuple(children)

    def process(self, key: Any, value: Change, timestamp: int) -> None:
        if key is None:
            raise ValueError("record key for the grouping KTable must not be null")
        new_pair = self._pair(key, value.new_value)
        old_pair = self._pair(key, value.old_value)
        if new_pair is not None and old_pair is not None and new_pair[0] == old_pair[0]:
            self._forward(new_pair[0], Change(new_pair[1], old_pair[1]), timestamp)
            return
        if old_pair is not None:
            self._forward(old_pair[0], Change(None, old_pair[1]), timestamp)
        if new_pair is not None:
            self._forward(new_pair[0], Change(new_pair[1], None), timestamp)

    def _pair(self, key: Any, value: Any) -> tuple[Any, Any] | None:
        if value is None:
            return None
        new_key, new_value = self._selector(key, value)
        if new_key is None or new_value is None:
            return None
        return new_key, new_value

    def _forward(self, key: Any, change: Change, timestamp: int) -> None:
        for child in self._children:
            child.process(key, change, timestamp)


def _zero() -> int:
    return 0


def _none() -> None:
    return None


def _plus_one(key: Any, value: Any, aggregate: int) -> int:
    return aggregate + 1


def _minus_one(key: Any, value: Any, aggregate: int) -> int:
    return aggregate - 1


def _first_or(reducer: Callable[[Any, Any], Any]) -> KeyedAggregator:
    """A reduce as an aggregation: the first value starts the aggregate (Kafka's reduce semantics)."""

    def aggregate(key: Any, value: Any, aggregate: Any) -> Any:
        return value if aggregate is None else reducer(aggregate, value)

    return aggregate


def _keyed(reducer: Callable[[Any, Any], Any]) -> KeyedAggregator:
    def aggregate(key: Any, value: Any, aggregate: Any) -> Any:
        return reducer(aggregate, value)

    return aggregate


def _table_input(node: NodeBase, ctx: BuildContext) -> bool:
    return ctx.kind_of(node.inputs()[0]) == "grouped_table"


@BUILDERS.builds(GroupByNode)
def build_group_by(node: GroupByNode, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    return GroupByProcessor(ctx.function(node.name, "selector"), children)


@BUILDERS.builds(CountNode)
def build_count(node: CountNode, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    store = ctx.store(node.store)
    if _table_input(node, ctx):
        return TableAggregateProcessor(store, _zero, _plus_one, _minus_one, children, node=node.name)
    return CountProcessor(store, children, ctx.metrics, node=node.name)


@BUILDERS.builds(ReduceNode)
def build_reduce(node: ReduceNode, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    """A grouped table's reduce is ``KTableReduce``: a key's first added value is its aggregate."""
    store = ctx.store(node.store)
    if _table_input(node, ctx):
        adder = _first_or(ctx.function(node.name, "adder"))
        subtractor = _keyed(ctx.function(node.name, "subtractor"))
        return TableAggregateProcessor(store, _none, adder, subtractor, children, node=node.name)
    return StreamReduceProcessor(store, ctx.function(node.name, "reducer"), children, ctx.metrics, node=node.name)


@BUILDERS.builds(AggregateNode)
def build_aggregate(node: AggregateNode, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    store = ctx.store(node.store)
    initializer = ctx.function(node.name, "initializer")
    if _table_input(node, ctx):
        adder, subtractor = ctx.function(node.name, "adder"), ctx.function(node.name, "subtractor")
        return TableAggregateProcessor(store, initializer, adder, subtractor, children, node=node.name)
    aggregator = ctx.function(node.name, "aggregator")
    return StreamAggregateProcessor(store, initializer, aggregator, children, ctx.metrics, node=node.name)


@BUILDERS.builds(CogroupAggregateNode)
def build_cogroup_aggregate(node: CogroupAggregateNode, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    """One input of a cogroup: Kafka's ``KStreamAggregate`` with this input's aggregator over the shared store."""
    initializer, aggregator = ctx.function(node.name, "initializer"), ctx.function(node.name, "aggregator")
    return StreamAggregateProcessor(
        ctx.store(node.store), initializer, aggregator, children, ctx.metrics, node=node.name
    )


@BUILDERS.builds(CogroupMergeNode)
def build_cogroup_merge(node: CogroupMergeNode, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    """The cogroup's table passes every update of its aggregations on (Kafka's ``KTablePassThrough``)."""
    return ForwardProcessor(children)
