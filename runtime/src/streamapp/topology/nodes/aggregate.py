"""The ``aggregate`` family: grouping and the keyed aggregations of grouped streams and grouped tables.

===========  ==================================================  =========================================
type         parameters                                          semantics (Kafka Streams class)
===========  ==================================================  =========================================
group_by     input (table), selector ``fn(k, v) -> (k, v)``      re-keys a table (KTableRepartitionMap)
count        input, store                                        KTable of counts (KStreamAggregate)
reduce       input, store, reducer | adder + subtractor          KStreamReduce / KTableReduce
aggregate    input, store, initializer, aggregator | adder +     KStreamAggregate / KTableAggregate
             subtractor
cogroup_     input (a grouped stream), store, initializer,       one input of a cogroup (KIP-150):
aggregate    aggregator                                          KStreamAggregate into the shared store
cogroup_     inputs (its cogroup_aggregate nodes), store         the cogroup's KTable (KTablePassThrough,
merge                                                            CogroupedKStreamImpl)
===========  ==================================================  =========================================

A table's ``group_by`` (Kafka's ``KTableRepartitionMap``) re-keys its updates into a grouped table: for an
update ``Change(new, old)`` of key ``k`` it emits ``selector(k, old)`` as a retraction and
``selector(k, new)`` as an addition, through a repartition topic (whose records carry both values), into
``count`` / ``reduce`` / ``aggregate``, which subtract the old value and add the new one (Kafka's
``KTableAggregate`` / ``KTableReduce``). On a stream, ``reduce`` / ``aggregate`` follow ``KStreamReduce`` /
``KStreamAggregate``. Windowed aggregations are the ``windowed`` family.

A **cogroup** (Kafka's ``KGroupedStream.cogroup``, KIP-150, ``CogroupedStreamAggregateBuilder``) folds several
grouped streams into one aggregate per key, in one store: one ``cogroup_aggregate`` per grouped stream, each with
its own aggregator (a ``KStreamAggregate`` over the shared store and initializer), and one ``cogroup_merge`` that
passes every update of any of them on as the cogroup's KTable (``KTablePassThrough``). Its inputs are in one
sub-topology, so the streams must be co-partitioned (a grouped stream whose key changed is repartitioned first). A
windowed cogroup's inputs are ``windowed_aggregate`` nodes (the ``windowed`` family) over one window or session store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

from pydantic import Field
from pydantic.alias_generators import to_camel

from streamapp.topology.nodes.base import FunctionRef, NodeBase

__all__ = ["AggregateNode", "CogroupAggregateNode", "CogroupMergeNode", "CountNode", "GroupByNode", "ReduceNode"]


class GroupByNode(NodeBase):
    """Re-keys a table's updates by ``selector(key, value) -> (new_key, new_value)`` into a grouped table
    (Kafka's ``KTable.groupBy``, ``KTableRepartitionMap``).

    Per ``Change(new, old)``: when both map to one key it emits ``Change(new', old')`` once; otherwise the
    retraction ``Change(None, old')`` under the old pair's key first, then ``Change(new', None)`` under the
    new one. A pair with a null key or value is skipped. A repartition node must follow (the DSL adds it).
    """

    type: Literal["group_by"] = "group_by"
    input: str
    selector: FunctionRef
    output: ClassVar[str | None] = "grouped_table"
    accepts: ClassVar[frozenset[str]] = frozenset({"table"})
    changes_key: ClassVar[bool] = True


class CountNode(NodeBase):
    """Counts records per key in a key-value store; the output is a KTable of counts.

    Emits ``Change(new count, old count)`` per counted record (old ``None`` for a new key). Records with a
    null key or value are dropped and counted in the dropped-records metric (Kafka's ``KStreamAggregate``).
    """

    type: Literal["count"] = "count"
    input: str
    store: str
    output: ClassVar[str | None] = "table"
    accepts: ClassVar[frozenset[str]] = frozenset({"stream", "grouped_table"})
    requires_copartitioned_input: ClassVar[bool] = True

    def stores(self) -> list[str]:
        return [self.store]


class _Aggregation(NodeBase):
    """An aggregation into key-value store ``store``; outputs a table of ``Change(new aggregate, old)``."""

    input: str
    store: str
    output: ClassVar[str | None] = "table"
    accepts: ClassVar[frozenset[str]] = frozenset({"stream", "grouped_table"})
    requires_copartitioned_input: ClassVar[bool] = True
    _stream_fields: ClassVar[tuple[str, ...]] = ()
    _table_fields: ClassVar[tuple[str, ...]] = ("adder", "subtractor")

    def stores(self) -> list[str]:
        return [self.store]

    def check_input_kinds(self, input_kinds: Sequence[str]) -> str | None:
        grouped_table = input_kinds[0] == "grouped_table"
        needed, forbidden = (
            (self._table_fields, self._stream_fields) if grouped_table else (self._stream_fields, self._table_fields)
        )
        what = "a grouped table" if grouped_table else "a grouped stream"
        missing = [to_camel(f) for f in needed if getattr(self, f) is None]
        if missing:
            return f"a {self.type} of {what} needs {' and '.join(repr(m) for m in missing)}"
        extra = [to_camel(f) for f in forbidden if getattr(self, f) is not None]
        if extra:
            return f"a {self.type} of {what} takes no {' or '.join(repr(e) for e in extra)}"
        return None


class ReduceNode(_Aggregation):
    """Combines the values per key (Kafka's ``reduce``): on a grouped stream ``reducer(aggregate, value)``
    (the first value is the initial aggregate, ``KStreamReduce``); on a grouped table
    ``adder(aggregate, new_value)`` and ``subtractor(aggregate, old_value)`` (``KTableReduce``).

    Stream records with a null key or value are dropped (dropped-records metric).
    """

    type: Literal["reduce"] = "reduce"
    reducer: FunctionRef | None = None
    adder: FunctionRef | None = None
    subtractor: FunctionRef | None = None
    _stream_fields: ClassVar[tuple[str, ...]] = ("reducer",)


class AggregateNode(_Aggregation):
    """Folds the values per key into an aggregate starting at ``initializer()`` (Kafka's ``aggregate``): on a
    grouped stream ``aggregator(key, value, aggregate)`` (``KStreamAggregate``); on a grouped table
    ``adder(key, new_value, aggregate)`` and ``subtractor(key, old_value, aggregate)`` (``KTableAggregate``).

    The store's value serde holds the aggregate. Stream records with a null key or value are dropped.
    """

    type: Literal["aggregate"] = "aggregate"
    initializer: FunctionRef
    aggregator: FunctionRef | None = None
    adder: FunctionRef | None = None
    subtractor: FunctionRef | None = None
    _stream_fields: ClassVar[tuple[str, ...]] = ("aggregator",)


class CogroupAggregateNode(NodeBase):
    """One grouped stream of a cogroup (Kafka's ``KStreamAggregate`` of ``CogroupedStreamAggregateBuilder``): folds
    each record into the key's aggregate in the cogroup's key-value store ``store`` with this input's
    ``aggregator(key, value, aggregate)``, from ``initializer()`` when the key has none, and forwards
    ``Change(new, old)``. Records with a null key or value are dropped (dropped-records metric). Its only reader
    is the cogroup's ``cogroup_merge`` node, which names the same store."""

    type: Literal["cogroup_aggregate"] = "cogroup_aggregate"
    input: str
    store: str
    initializer: FunctionRef
    aggregator: FunctionRef
    output: ClassVar[str | None] = "table"
    requires_copartitioned_input: ClassVar[bool] = True

    def stores(self) -> list[str]:
        return [self.store]


class CogroupMergeNode(NodeBase):
    """The KTable of a cogroup (Kafka's ``KTablePassThrough`` of ``CogroupedStreamAggregateBuilder``): forwards every
    update of its ``inputs`` (the cogroup's ``cogroup_aggregate`` nodes, in the order the grouped streams joined the
    cogroup) unchanged; its value is the store ``store`` they share. A windowed cogroup
    (``CogroupedKStream.windowedBy``) reads ``windowed_aggregate`` nodes instead, of one window or session store and
    one window spec."""

    type: Literal["cogroup_merge"] = "cogroup_merge"
    inputs_: list[str] = Field(alias="inputs", min_length=1)
    store: str
    output: ClassVar[str | None] = "table"
    accepts: ClassVar[frozenset[str]] = frozenset({"table"})

    def inputs(self) -> list[str]:
        return list(self.inputs_)

    def stores(self) -> list[str]:
        return [self.store]

    def check_graph(self, nodes: Mapping[str, NodeBase], stores: Mapping[str, Any]) -> str | None:
        """Every input is a ``cogroup_aggregate`` of this store (a ``key_value`` store), or every input a
        ``windowed_aggregate`` of this store with the first input's windows and no ``emitStrategy`` (each input's
        processor would emit the shared store's closed windows)."""
        inputs = [nodes[name] for name in self.inputs_]
        windows = getattr(inputs[0], "windows", None)
        kind = "windowed_aggregate" if windows is not None else "cogroup_aggregate"
        for node in inputs:
            if node.type != kind or getattr(node, "store", None) != self.store:
                return f"input '{node.name}' must be a {kind} node of store '{self.store}'"
            if getattr(node, "windows", None) != windows:
                return f"input '{node.name}' must have the windows of '{inputs[0].name}'"
            if getattr(node, "emit_strategy", None) is not None:
                return f"input '{node.name}': a cogroup takes no emitStrategy (Kafka's cogrouped windows have none)"
        spec = stores.get(self.store)
        if kind == "cogroup_aggregate" and spec is not None and spec.type != "key_value":
            return f"store '{self.store}' must be a key_value store, not {spec.type}"
        return None
