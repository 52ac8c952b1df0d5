"""Record-at-a-time processors without state: filter, filter_not, map, map_values, flat_map,
flat_map_values, select_key, peek, foreach, merge, to_stream.

Each follows the Kafka Streams processor named in its docstring. Builders of ``filter`` / ``filter_not`` /
``map_values`` pick the table variant (``streamapp.processors.tables``) when the input is a table.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from streamapp.processors.base import BuildContext, Change, Processor
from streamapp.processors.tables import build_table_filter, build_table_map_values
from streamapp.topology import FilterNode, MapValuesNode, MergeNode, NodeBase, SelectKeyNode, ToStreamNode
from streamapp.topology.nodes.stateless import (
    FilterNotNode,
    FlatMapNode,
    FlatMapValuesNode,
    ForeachNode,
    MapNode,
    PeekNode,
)

__all__ = [
    "FilterProcessor",
    "FlatMapProcessor",
    "FlatMapValuesProcessor",
    "MapProcessor",
    "MapValuesProcessor",
    "PeekProcessor",
    "SelectKeyProcessor",
    "ToStreamProcessor",
    "build_filter",
    "build_flat_map",
    "build_flat_map_values",
    "build_map",
    "build_map_values",
    "build_merge",
    "build_peek",
    "build_select_key",
    "build_to_stream",
]


class FilterProcessor:
    """Forwards the records for which ``predicate(key, value)`` is truthy, or falsy with ``negate``
    (Kafka's ``KStreamFilter``, ``filterNot``)."""

    def __init__(
        self, predicate: Callable[[Any, Any], Any], children: Sequence[Processor], *, negate: bool = False
    ) -> None:
        self._predicate = predicate
        self._children = tuple(children)
        self._negate = negate

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        if bool(self._predicate(key, value)) != self._negate:
            for child in self._children:
                child.process(key, value, timestamp)


class MapProcessor:
    """Forwards ``mapper(key, value) -> (new_key, new_value)`` (Kafka's ``KStreamMap``).

    Raises TypeError when the mapper does not return a pair.
    """

    def __init__(self, mapper: Callable[[Any, Any], Any], children: Sequence[Processor]) -> None:
        self._mapper = mapper
        self._children = tuple(children)

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        new_key, new_value = _pair(self._mapper(key, value), "map")
        for child in self._children:
            child.process(new_key, new_value, timestamp)


class FlatMapProcessor:
    """Forwards every ``(key, value)`` pair of ``mapper(key, value)``, in order (Kafka's ``KStreamFlatMap``);
    ``None`` counts as no records."""

    def __init__(self, mapper: Callable[[Any, Any], Any], children: Sequence[Processor]) -> None:
        self._mapper = mapper
        self._children = tuple(children)

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        for pair in self._mapper(key, value) or ():
            new_key, new_value = _pair(pair, "flat_map")
            for child in self._children:
                child.process(new_key, new_value, timestamp)


class FlatMapValuesProcessor:
    """Forwards ``(key, v)`` for every ``v`` of ``mapper(value)``, in order (Kafka's ``KStreamFlatMapValues``);
    ``None`` counts as no values."""

    def __init__(self, mapper: Callable[[Any], Any], children: Sequence[Processor]) -> None:
        self._mapper = mapper
        self._children = tuple(children)

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        for new_value in self._mapper(value) or ():
            for child in self._children:
                child.process(key, new_value, timestamp)


class PeekProcessor:
    """Calls ``action(key, value)`` and forwards the record unchanged (Kafka's ``KStreamPeek``); ``foreach``
    is a peek without children."""

    def __init__(self, action: Callable[[Any, Any], Any], children: Sequence[Processor]) -> None:
        self._action = action
        self._children = tuple(children)

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        self._action(key, value)
        for child in self._children:
            child.process(key, value, timestamp)


class MapValuesProcessor:
    """Forwards ``(key, mapper(value))``."""

    def __init__(self, mapper: Callable[[Any], Any], children: Sequence[Processor]) -> None:
        self._mapper = mapper
        self._children = tuple(children)

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        new_value = self._mapper(value)
        for child in self._children:
            child.process(key, new_value, timestamp)


class SelectKeyProcessor:
    """Forwards ``(mapper(key, value), value)``."""

    def __init__(self, mapper: Callable[[Any, Any], Any], children: Sequence[Processor]) -> None:
        self._mapper = mapper
        self._children = tuple(children)

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        new_key = self._mapper(key, value)
        for child in self._children:
            child.process(new_key, value, timestamp)


class ForwardProcessor:
    """Forwards every record unchanged (``merge``: Kafka's ``KStreamPassThrough``)."""

    def __init__(self, children: Sequence[Processor]) -> None:
        self._children = tuple(children)

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        for child in self._children:
            child.process(key, value, timestamp)


class ToStreamProcessor:
    """Forwards ``(key, change.new_value)`` of each table update: a tombstone when the key was deleted
    (Kafka's ``KTableImpl.toStream``)."""

    def __init__(self, children: Sequence[Processor]) -> None:
        self._children = tuple(children)

    def process(self, key: Any, value: Change, timestamp: int) -> None:
        for child in self._children:
            child.process(key, value.new_value, timestamp)


def _pair(result: Any, operation: str) -> tuple[Any, Any]:
    if not isinstance(result, tuple | list) or len(result) != 2:
        raise TypeError(f"{operation} mapper must return a (key, value) pair, got {result!r}")
    return result[0], result[1]


def build_filter(node: NodeBase, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    """``filter`` and ``filter_not``, of a stream or of a table."""
    assert isinstance(node, FilterNode | FilterNotNode)
    if ctx.kind_of(node.input) == "table":
        return build_table_filter(node, children, ctx)
    return FilterProcessor(ctx.function(node.name, "predicate"), children, negate=isinstance(node, FilterNotNode))


def build_map_values(node: NodeBase, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    assert isinstance(node, MapValuesNode)
    if ctx.kind_of(node.input) == "table":
        return build_table_map_values(node, children, ctx)
    return MapValuesProcessor(ctx.function(node.name, "mapper"), children)


def build_map(node: NodeBase, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    assert isinstance(node, MapNode)
    return MapProcessor(ctx.function(node.name, "mapper"), children)


def build_flat_map(node: NodeBase, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    assert isinstance(node, FlatMapNode)
    return FlatMapProcessor(ctx.function(node.name, "mapper"), children)


def build_flat_map_values(node: NodeBase, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    assert isinstance(node, FlatMapValuesNode)
    return FlatMapValuesProcessor(ctx.function(node.name, "mapper"), children)


def build_peek(node: NodeBase, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    """``peek`` and ``foreach`` (which has no children)."""
    assert isinstance(node, PeekNode | ForeachNode)
    return PeekProcessor(ctx.function(node.name, "action"), children)


def build_select_key(node: NodeBase, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    assert isinstance(node, SelectKeyNode)
    return SelectKeyProcessor(ctx.function(node.name, "mapper"), children)


def build_to_stream(node: NodeBase, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    assert isinstance(node, ToStreamNode)
    return ToStreamProcessor(children)


def build_merge(node: NodeBase, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    assert isinstance(node, MergeNode)
    return ForwardProcessor(children)
