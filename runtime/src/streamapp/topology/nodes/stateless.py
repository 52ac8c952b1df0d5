"""The ``stateless`` family: record-at-a-time operators that keep no state (Kafka's ``KStream`` / ``KTable``
operators without a store).

===============  ==================================================  =====================================
type             parameters                                          semantics (Kafka Streams class)
===============  ==================================================  =====================================
filter           input, predicate ``fn(key, value) -> bool``         keeps records where fn is true
filter_not       input, predicate                                    drops records where fn is true
map              input, mapper ``fn(k, v) -> (k, v)``                new record (KStreamMap)
map_values       input, mapper ``fn(value) -> value``                new value, same key
select_key       input, mapper ``fn(key, value) -> key``             new key, same value
flat_map         input, mapper ``fn(k, v) -> [(k, v), ...]``         0..n records (KStreamFlatMap)
flat_map_values  input, mapper ``fn(v) -> [v, ...]``                 0..n values, same key
peek             input, action ``fn(k, v)``                          side effect, forwards unchanged
foreach          input, action ``fn(k, v)``                          side effect, terminal
merge            inputs: [a, b, ...]                                 union of streams (KStream.merge)
to_stream        input (a table)                                     the table's changes as a stream
split / branch   split: input; branch: input (a split), predicate    first matching branch (KStreamBranch)
                 (none = default branch, last)
===============  ==================================================  =====================================

``filter``, ``filter_not`` and ``map_values`` work on streams and tables (a table's output is a table of
``Change`` values). Function references are ``"module:qualname"`` strings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field

from streamapp.topology.nodes.base import FunctionRef, NodeBase

__all__ = [
    "BranchNode",
    "FilterNode",
    "FilterNotNode",
    "FlatMapNode",
    "FlatMapValuesNode",
    "ForeachNode",
    "MapNode",
    "MapValuesNode",
    "MergeNode",
    "PeekNode",
    "SelectKeyNode",
    "SplitNode",
    "ToStreamNode",
]


class _StreamOrTableNode(NodeBase):
    """A one-input operator that works on a stream and on a table; it outputs the kind of its input."""

    input: str
    output: ClassVar[str | None] = "input"
    accepts: ClassVar[frozenset[str]] = frozenset({"stream", "table"})


class FilterNode(_StreamOrTableNode):
    """Keeps the records for which ``predicate(key, value)`` is truthy."""

    type: Literal["filter"] = "filter"
    predicate: FunctionRef


class FilterNotNode(_StreamOrTableNode):
    """Keeps the records for which ``predicate(key, value)`` is falsy (Kafka's ``KStream.filterNot``, a
    ``KStreamFilter`` with ``filterNot=true``; on a table ``KTableFilter``)."""

    type: Literal["filter_not"] = "filter_not"
    predicate: FunctionRef


class MapNode(NodeBase):
    """Replaces each record by ``mapper(key, value) -> (new_key, new_value)`` (Kafka's ``KStreamMap``).

    The key may change, so a later grouping or join repartitions.
    """

    type: Literal["map"] = "map"
    input: str
    mapper: FunctionRef
    changes_key: ClassVar[bool] = True


class MapValuesNode(_StreamOrTableNode):
    """Replaces each value by ``mapper(value)``; the key (and so the partitioning) is unchanged."""

    type: Literal["map_values"] = "map_values"
    mapper: FunctionRef


class SelectKeyNode(NodeBase):
    """Replaces each key by ``mapper(key, value)``; a later grouping needs a repartition."""

    type: Literal["select_key"] = "select_key"
    input: str
    mapper: FunctionRef
    changes_key: ClassVar[bool] = True


class FlatMapNode(NodeBase):
    """Replaces each record by the records of ``mapper(key, value) -> iterable of (key, value)``, zero or
    more, in order (Kafka's ``KStreamFlatMap``). The key may change."""

    type: Literal["flat_map"] = "flat_map"
    input: str
    mapper: FunctionRef
    changes_key: ClassVar[bool] = True


class FlatMapValuesNode(NodeBase):
    """Replaces each record by ``(key, v)`` for every ``v`` of ``mapper(value) -> iterable of values``
    (Kafka's ``KStreamFlatMapValues``); the key, and so the partitioning, is unchanged."""

    type: Literal["flat_map_values"] = "flat_map_values"
    input: str
    mapper: FunctionRef


class PeekNode(NodeBase):
    """Calls ``action(key, value)`` for each record and forwards it unchanged (Kafka's ``KStreamPeek``)."""

    type: Literal["peek"] = "peek"
    input: str
    action: FunctionRef


class ForeachNode(NodeBase):
    """Calls ``action(key, value)`` for each record; a terminal node (Kafka's ``KStream.foreach``)."""

    type: Literal["foreach"] = "foreach"
    input: str
    action: FunctionRef
    output: ClassVar[str | None] = None


class MergeNode(NodeBase):
    """Forwards the records of every input stream unchanged (Kafka's ``KStream.merge``, ``KStreamPassThrough``).

    ``inputs`` lists at least two streams, in order. No ordering across inputs is guaranteed beyond each
    input's own order. The merged stream counts as re-keyed when any input is (a grouping repartitions).
    A sub-topology with a merge must have co-partitioned sources (all its source topics have one partition
    count): every task reads partition ``p`` of each of them.
    """

    type: Literal["merge"] = "merge"
    inputs_: list[str] = Field(alias="inputs", min_length=2)

    def inputs(self) -> list[str]:
        return list(self.inputs_)


class ToStreamNode(NodeBase):
    """Turns a KTable's updates into a KStream of ``(key, new value)`` records (a tombstone ``(key, None)``
    when the key was deleted), Kafka's ``KTableImpl.toStream``."""

    type: Literal["to_stream"] = "to_stream"
    input: str
    accepts: ClassVar[frozenset[str]] = frozenset({"table"})


class SplitNode(NodeBase):
    """Routes each record to the first of its ``branch`` children (in description order) whose predicate
    holds; a branch without a predicate (the default branch, last) takes the rest; a record no branch
    takes is dropped (Kafka's ``KStream.split``, ``KStreamBranch``). Every child must be a ``branch`` node."""

    type: Literal["split"] = "split"
    input: str

    def check_graph(self, nodes: Mapping[str, NodeBase], stores: Mapping[str, Any]) -> str | None:
        children = [node for node in nodes.values() if self.name in node.inputs()]
        for child in children:
            if not isinstance(child, BranchNode):
                return f"child '{child.name}' is a {child.type} node; every child of a split must be a branch node"
        defaults = [child.name for child in children if isinstance(child, BranchNode) and child.predicate is None]
        if len(defaults) > 1:
            return f"branches {', '.join(repr(d) for d in defaults)} have no predicate; only one default branch"
        if defaults and children[-1].name != defaults[0]:
            return f"default branch '{defaults[0]}' (no predicate) must be the last branch"
        return None


class BranchNode(NodeBase):
    """One output of a ``split``: the records for which ``predicate(key, value)`` holds and no earlier branch
    took; without ``predicate`` it is the default branch (Kafka's ``Branched`` / ``defaultBranch``)."""

    type: Literal["branch"] = "branch"
    input: str
    predicate: FunctionRef | None = None

    def check_graph(self, nodes: Mapping[str, NodeBase], stores: Mapping[str, Any]) -> str | None:
        upstream = nodes[self.input]
        if not isinstance(upstream, SplitNode):
            return f"a branch node's input must be a split node, but '{upstream.name}' is a {upstream.type} node"
        return None
