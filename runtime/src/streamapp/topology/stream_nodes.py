"""KStream node types beyond the walking skeleton's set: merge, and the record-at-a-time operators.

Parameters are camelCase in documents; function references are ``"module:qualname"`` strings. Each class
names the Kafka Streams processor whose behaviour it follows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field

from streamapp.topology.node_base import FunctionRef, NodeBase

__all__ = [
    "BranchNode",
    "FilterNotNode",
    "FlatMapNode",
    "FlatMapValuesNode",
    "ForeachNode",
    "MapNode",
    "MergeNode",
    "PeekNode",
    "ProcessNode",
    "SplitNode",
]


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


class FilterNotNode(NodeBase):
    """Keeps the records for which ``predicate(key, value)`` is falsy (Kafka's ``KStream.filterNot``, a
    ``KStreamFilter`` with ``filterNot=true``; on a table ``KTableFilter``)."""

    type: Literal["filter_not"] = "filter_not"
    input: str
    predicate: FunctionRef
    output: ClassVar[str | None] = "input"
    accepts: ClassVar[frozenset[str]] = frozenset({"stream", "table"})

    def functions(self) -> dict[str, str]:
        return {"predicate": self.predicate}


class MapNode(NodeBase):
    """Replaces each record by ``mapper(key, value) -> (new_key, new_value)`` (Kafka's ``KStreamMap``).

    The key may change, so a later grouping or join repartitions.
    """

    type: Literal["map"] = "map"
    input: str
    mapper: FunctionRef
    changes_key: ClassVar[bool] = True

    def functions(self) -> dict[str, str]:
        return {"mapper": self.mapper}


class FlatMapNode(NodeBase):
    """Replaces each record by the records of ``mapper(key, value) -> iterable of (key, value)``, zero or
    more, in order (Kafka's ``KStreamFlatMap``). The key may change."""

    type: Literal["flat_map"] = "flat_map"
    input: str
    mapper: FunctionRef
    changes_key: ClassVar[bool] = True

    def functions(self) -> dict[str, str]:
        return {"mapper": self.mapper}


class FlatMapValuesNode(NodeBase):
    """Replaces each record by ``(key, v)`` for every ``v`` of ``mapper(value) -> iterable of values``
    (Kafka's ``KStreamFlatMapValues``); the key, and so the partitioning, is unchanged."""

    type: Literal["flat_map_values"] = "flat_map_values"
    input: str
    mapper: FunctionRef

    def functions(self) -> dict[str, str]:
        return {"mapper": self.mapper}


class PeekNode(NodeBase):
    """Calls ``action(key, value)`` for each record and forwards it unchanged (Kafka's ``KStreamPeek``)."""

    type: Literal["peek"] = "peek"
    input: str
    action: FunctionRef

    def functions(self) -> dict[str, str]:
        return {"action": self.action}


class ForeachNode(NodeBase):
    """Calls ``action(key, value)`` for each record; a terminal node (Kafka's ``KStream.foreach``)."""

    type: Literal["foreach"] = "foreach"
    input: str
    action: FunctionRef
    output: ClassVar[str | None] = None

    def functions(self) -> dict[str, str]:
        return {"action": self.action}


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

    def functions(self) -> dict[str, str]:
        return {"predicate": self.predicate} if self.predicate is not None else {}

    def check_graph(self, nodes: Mapping[str, NodeBase], stores: Mapping[str, Any]) -> str | None:
        upstream = nodes[self.input]
        if not isinstance(upstream, SplitNode):
            return f"a branch node's input must be a split node, but '{upstream.name}' is a {upstream.type} node"
        return None


class ProcessNode(NodeBase):
    """A Processor API node: an instance of ``processor`` (a ``streamapp.processor.Processor`` subclass,
    ``"module:Class"``) per task, with access to the state stores named in ``stores`` (Kafka's
    ``KStream.process``). It may forward any key, so its output counts as re-keyed."""

    type: Literal["process"] = "process"
    input: str
    processor: FunctionRef
    stores_: list[str] = Field(default_factory=list, alias="stores")
    changes_key: ClassVar[bool] = True

    def stores(self) -> list[str]:
        return list(self.stores_)

    def functions(self) -> dict[str, str]:
        return {"processor": self.processor}
