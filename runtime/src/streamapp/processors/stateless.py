"""Record-at-a-time processors without state: filter, map_values, select_key, merge, to_stream."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from streamapp.processors.base import BuildContext, Change, Processor
from streamapp.topology import FilterNode, MapValuesNode, MergeNode, NodeBase, SelectKeyNode, ToStreamNode

__all__ = ["build_filter", "build_map_values", "build_merge", "build_select_key", "build_to_stream"]


class FilterProcessor:
    """Forwards the records for which ``predicate(key, value)`` is truthy."""

    def __init__(self, predicate: Callable[[Any, Any], Any], children: Sequence[Processor]) -> None:
        self._predicate = predicate
        self._children = tuple(children)

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        if self._predicate(key, value):
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


def build_filter(node: NodeBase, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    assert isinstance(node, FilterNode)
    return FilterProcessor(ctx.function(node.name, "predicate"), children)


def build_map_values(node: NodeBase, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    assert isinstance(node, MapValuesNode)
    return MapValuesProcessor(ctx.function(node.name, "mapper"), children)


def build_select_key(node: NodeBase, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    assert isinstance(node, SelectKeyNode)
    return SelectKeyProcessor(ctx.function(node.name, "mapper"), children)


def build_to_stream(node: NodeBase, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    assert isinstance(node, ToStreamNode)
    return ToStreamProcessor(children)


def build_merge(node: NodeBase, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    assert isinstance(node, MergeNode)
    return ForwardProcessor(children)
