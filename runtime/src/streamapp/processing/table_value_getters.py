"""How a stream-table join reads the table it joins: through the table's value getter (Kafka's ``KTableValueGetter``).

Kafka's ``KStreamKTableJoinProcessor`` looks each stream record's key up with the table's value getter, which reads
the table's materialized store *through the record cache* (``KTableSourceValueGetterSupplier``,
``KTableAggregateValueGetter``; ``KTableFilter`` / ``KTableMapValues`` apply their function on top of their
parent's getter). A table update is therefore visible to the join as soon as its task processed it, whether or not
the cache has flushed it yet.

streamapp's join keeps its own copy of the table (``StreamTableJoinNode.store``), written from the ``Change``s the
table forwards. Without the cache that copy is always current; with it, a cached table forwards only when its cache
is flushed (commit, eviction), so the copy lags behind and an inner join drops, and a left join nulls, every stream
record of a key whose table update still waits in the cache (issue 22: 1,518 and 3,807 flights lost in the
latest counts, with two stream threads). ``join_table_view`` gives such a join a view of its store whose ``get`` is
the table's value getter; the copy is still written (its store and changelog stay as they were).

A getter exists for a table whose value comes from a cached key-value store of the task, directly (``table``,
``to_table``, ``count``, ``reduce``, ``aggregate``, a cogroup's ``cogroup_merge``) or through ``filter`` /
``filter_not`` / ``map_values`` of such a table. Any other table (a table-table join, a suppressed table, or any
table while the cache is off) keeps the join's copy, which is current whenever no cache lies between the two.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from streamapp.serdes import Serde
from streamapp.state.stores import BytesKeyValueStore, TypedKeyValueStore
from streamapp.topology import TopologyDescription
from streamapp.topology.nodes.aggregate import AggregateNode, CogroupMergeNode, CountNode, ReduceNode
from streamapp.topology.nodes.io import TableSourceNode, ToTableNode
from streamapp.topology.nodes.joins import StreamTableJoinNode
from streamapp.topology.nodes.stateless import FilterNode, FilterNotNode, MapValuesNode

__all__ = ["JoinTableView", "ValueGetter", "join_tables", "table_value_getter"]

ValueGetter = Callable[[Any], Any]
"""``get(key) -> value`` of a table (``None``: no value for the key), Kafka's ``KTableValueGetter.get``."""

_MATERIALIZED = (TableSourceNode, ToTableNode, CountNode, ReduceNode, AggregateNode, CogroupMergeNode)


def join_tables(description: TopologyDescription, nodes: list[str]) -> dict[str, str]:
    """Per stream-table join among ``nodes`` (a sub-topology's), its store and the table node it joins."""
    members = set(nodes)
    return {
        node.store: node.right
        for node in description.nodes
        if isinstance(node, StreamTableJoinNode) and node.name in members
    }


def table_value_getter(
    description: TopologyDescription,
    table: str,
    store: Callable[[str], TypedKeyValueStore],
    functions: Mapping[str, Mapping[str, Callable[..., Any]]],
) -> ValueGetter | None:
    """The value getter of table node ``table`` when its value comes from a *cached* store of the task (see the
    module docstring), else ``None``. ``store`` is the task's typed store by name (a cached store reads its cache
    first); ``functions`` the resolved user functions by node and parameter."""
    node = description.node(table)
    if isinstance(node, CogroupMergeNode) and description.store(node.store).type != "key_value":
        return None  # a windowed cogroup's table
    if isinstance(node, _MATERIALIZED):
        typed = store(node.store)
        return typed.get if typed.cached else None
    if isinstance(node, (FilterNode, FilterNotNode, MapValuesNode)):
        if description.output_kinds().get(node.input) != "table":
            return None
        parent = table_value_getter(description, node.input, store, functions)
        if parent is None:
            return None
        if isinstance(node, MapValuesNode):
            return _mapped(parent, functions[node.name]["mapper"])
        return _filtered(parent, functions[node.name]["predicate"], negate=isinstance(node, FilterNotNode))
    return None


def _filtered(parent: ValueGetter, predicate: Callable[[Any, Any], Any], *, negate: bool) -> ValueGetter:
    """Kafka's ``KTableFilter.KTableFilterValueGetter``: the parent's value if it passes, else ``None``."""

    def get(key: Any) -> Any:
        value = parent(key)
        if value is None or bool(predicate(key, value)) == negate:
            return None
        return value

    return get


def _mapped(parent: ValueGetter, mapper: Callable[[Any], Any]) -> ValueGetter:
    """Kafka's ``KTableMapValues.KTableMapValuesValueGetter``: the parent's value mapped (``None`` stays ``None``)."""

    def get(key: Any) -> Any:
        value = parent(key)
        return None if value is None else mapper(value)

    return get


class JoinTableView(TypedKeyValueStore):
    """A stream-table join's store as the join uses it: writes (the table's forwarded changes) go to the store,
    ``get`` asks the table's value getter."""

    def __init__(self, inner: BytesKeyValueStore, key_serde: Serde, value_serde: Serde, getter: ValueGetter) -> None:
        super().__init__(inner, key_serde, value_serde)
        self._getter = getter

    def get(self, key: Any) -> Any:
        return self._getter(key)
