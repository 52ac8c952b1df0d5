"""Aggregations over a key-value store: count, reduce and aggregate, of grouped streams and grouped tables.

Every aggregation reads the key's current aggregate from its store, writes the new one and forwards
``(key, Change(new aggregate, old aggregate))`` (a KTable). The input is partitioned by the key (a
repartition upstream when the key changed), so each key's aggregate lives in exactly one task.

- Grouped stream (Kafka's ``KStreamAggregate`` / ``KStreamReduce``): a record with a null key or a null
  value is skipped and counted in the dropped-records metric.
- Grouped table (``KTableAggregate`` / ``KTableReduce``): the input is ``Change(new, old)`` re-keyed by a
  table's ``group_by``; the old value is subtracted first (when there is an aggregate), then the new value
  added. A null key is an error (a table key is never null).

The forwarded timestamp is the input record's (Kafka forwards the larger of it and the stored aggregate's
timestamp; our key-value stores keep no timestamps).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from streamapp.processors.base import BuildContext, Change, Processor, ProcessorMetrics
from streamapp.state.stores import TypedKeyValueStore
from streamapp.topology import CountNode, NodeBase
from streamapp.topology.nodes.aggregate import AggregateNode, ReduceNode

__all__ = [
    "CountProcessor",
    "StreamAggregateProcessor",
    "TableAggregateProcessor",
    "build_aggregate",
    "build_count",
    "build_reduce",
]

log = logging.getLogger(__name__)

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
    ) -> None:
        self._store = store
        self._initializer = initializer
        self._aggregator = aggregator
        self._children = tuple(children)
        self._metrics = metrics

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        if key is None or value is None:
            self._metrics.dropped_records += 1
            log.debug("Skipped record with null key or value in aggregation on store %s", self._store.name)
            return
        old = self._store.get(key)
        new = self._aggregator(key, value, self._initializer() if old is None else old)
        self._store.put(key, new)
        change = Change(new, old)
        for child in self._children:
            child.process(key, change, timestamp)


class CountProcessor(StreamAggregateProcessor):
    """Counts records per key: an aggregation with ``0`` and ``+1`` (Kafka's ``KGroupedStream.count``),
    inlined because a keyed count is a hot path."""

    def __init__(self, store: TypedKeyValueStore, children: Sequence[Processor], metrics: ProcessorMetrics) -> None:
        super().__init__(store, _zero, _plus_one, children, metrics)

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        if key is None or value is None:
            self._metrics.dropped_records += 1
            return
        store = self._store
        old = store.get(key)
        change = Change(1 if old is None else old + 1, old)
        store.put(key, change.new_value)
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
    ) -> None:
        super().__init__(store, _none, _first_or(reducer), children, metrics)


class TableAggregateProcessor:
    """Applies a grouped table's changes to the key's aggregate (Kafka's ``KTableAggregate``).

    For ``Change(new, old)``: with an old value and an existing aggregate, ``subtractor(key, old, agg)``;
    then with a new value ``adder(key, new, agg or initializer())``. The result (possibly ``None`` when
    nothing was ever added) is stored and forwarded as ``Change(result, previous aggregate)``.
    Raises ValueError for a null key.
    """

    def __init__(
        self,
        store: TypedKeyValueStore,
        initializer: Initializer,
        adder: KeyedAggregator,
        subtractor: KeyedAggregator,
        children: Sequence[Processor],
    ) -> None:
        self._store = store
        self._initializer = initializer
        self._adder = adder
        self._subtractor = subtractor
        self._children = tuple(children)

    def process(self, key: Any, value: Change, timestamp: int) -> None:
        if key is None:
            raise ValueError(f"record key for the table aggregation on store {self._store.name} must not be null")
        old_agg = self._store.get(key)
        agg = old_agg
        if value.old_value is not None and old_agg is not None:
            agg = self._subtractor(key, value.old_value, old_agg)
        if value.new_value is not None:
            agg = self._adder(key, value.new_value, self._initializer() if agg is None else agg)
        self._store.put(key, agg)
        change = Change(agg, old_agg)
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


def build_count(node: NodeBase, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    assert isinstance(node, CountNode)
    store = ctx.store(node.store)
    if _table_input(node, ctx):
        return TableAggregateProcessor(store, _zero, _plus_one, _minus_one, children)
    return CountProcessor(store, children, ctx.metrics)


def build_reduce(node: NodeBase, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    """A grouped table's reduce is ``KTableReduce``: a key's first added value is its aggregate."""
    assert isinstance(node, ReduceNode)
    store = ctx.store(node.store)
    if _table_input(node, ctx):
        adder = _first_or(ctx.function(node.name, "adder"))
        return TableAggregateProcessor(store, _none, adder, _keyed(ctx.function(node.name, "subtractor")), children)
    return StreamReduceProcessor(store, ctx.function(node.name, "reducer"), children, ctx.metrics)


def build_aggregate(node: NodeBase, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    assert isinstance(node, AggregateNode)
    store = ctx.store(node.store)
    initializer = ctx.function(node.name, "initializer")
    if _table_input(node, ctx):
        return TableAggregateProcessor(
            store, initializer, ctx.function(node.name, "adder"), ctx.function(node.name, "subtractor"), children
        )
    return StreamAggregateProcessor(store, initializer, ctx.function(node.name, "aggregator"), children, ctx.metrics)
