"""The ``stateless`` family's processors: record-at-a-time operators without state.

filter, filter_not, map, map_values, select_key, flat_map, flat_map_values, peek, foreach, merge, to_stream,
split and branch. Each follows the Kafka Streams processor named in its docstring. ``filter`` /
``filter_not`` / ``map_values`` of a table transform both values of each ``Change(new, old)``
(``TableFilterProcessor``, ``TableMapValuesProcessor``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from streamapp.processors.base import BuildContext, Change, FamilyBuilders, ForwardProcessor, Processor
from streamapp.topology.nodes.stateless import (
    BranchNode,
    FilterNode,
    FilterNotNode,
    FlatMapNode,
    FlatMapValuesNode,
    ForeachNode,
    MapNode,
    MapValuesNode,
    MergeNode,
    PeekNode,
    SelectKeyNode,
    SplitNode,
    ToStreamNode,
)

__all__ = [
    "BUILDERS",
    "BranchProcessor",
    "FilterProcessor",
    "FlatMapProcessor",
    "FlatMapValuesProcessor",
    "ForwardProcessor",
    "MapProcessor",
    "MapValuesProcessor",
    "PeekProcessor",
    "SelectKeyProcessor",
    "SplitProcessor",
    "TableFilterProcessor",
    "TableMapValuesProcessor",
    "ToStreamProcessor",
]

BUILDERS = FamilyBuilders("stateless")


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


class ToStreamProcessor:
    """Forwards ``(key, change.new_value)`` of each table update: a tombstone when the key was deleted
    (Kafka's ``KTableImpl.toStream``)."""

    def __init__(self, children: Sequence[Processor]) -> None:
        self._children = tuple(children)

    def process(self, key: Any, value: Change, timestamp: int) -> None:
        for child in self._children:
            child.process(key, value.new_value, timestamp)


class TableFilterProcessor:
    """Filters both values of a change: a value failing ``keep(key, value)`` becomes ``None``; a change whose
    two values end up ``None`` is not forwarded (Kafka's ``KTableFilter`` with old values sent)."""

    def __init__(self, keep: Callable[[Any, Any], bool], children: Sequence[Processor]) -> None:
        self._keep = keep
        self._children = tuple(children)

    def process(self, key: Any, value: Change, timestamp: int) -> None:
        new = value.new_value if value.new_value is not None and self._keep(key, value.new_value) else None
        old = value.old_value if value.old_value is not None and self._keep(key, value.old_value) else None
        if new is None and old is None:
            return
        change = Change(new, old)
        for child in self._children:
            child.process(key, change, timestamp)


class TableMapValuesProcessor:
    """Maps both values of a change with ``mapper(value)``; ``None`` stays ``None`` (Kafka's
    ``KTableMapValues``)."""

    def __init__(self, mapper: Callable[[Any], Any], children: Sequence[Processor]) -> None:
        self._mapper = mapper
        self._children = tuple(children)

    def process(self, key: Any, value: Change, timestamp: int) -> None:
        new = self._mapper(value.new_value) if value.new_value is not None else None
        old = self._mapper(value.old_value) if value.old_value is not None else None
        change = Change(new, old)
        for child in self._children:
            child.process(key, change, timestamp)


class BranchProcessor:
    """One branch of a split: ``matches(key, value)`` tells the split whether the record is this branch's
    (always true for the default branch); ``process`` forwards it to the branch's children."""

    def __init__(self, predicate: Callable[[Any, Any], Any] | None, children: Sequence[Processor]) -> None:
        self._predicate = predicate
        self._children = tuple(children)

    def matches(self, key: Any, value: Any) -> bool:
        return self._predicate is None or bool(self._predicate(key, value))

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        for child in self._children:
            child.process(key, value, timestamp)


class SplitProcessor:
    """Sends each record to the first branch (description order) that matches; drops it when none does
    (Kafka's ``KStreamBranch``: predicates evaluated in order, at most one child gets the record)."""

    def __init__(self, branches: Sequence[BranchProcessor]) -> None:
        self._branches = tuple(branches)

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        for branch in self._branches:
            if branch.matches(key, value):
                branch.process(key, value, timestamp)
                return


def _pair(result: Any, operation: str) -> tuple[Any, Any]:
    if not isinstance(result, tuple | list) or len(result) != 2:
        raise TypeError(f"{operation} mapper must return a (key, value) pair, got {result!r}")
    return result[0], result[1]


@BUILDERS.builds(FilterNode, FilterNotNode)
def build_filter(node: FilterNode | FilterNotNode, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    """``filter`` and ``filter_not``, of a stream or of a table."""
    predicate = ctx.function(node.name, "predicate")
    if ctx.kind_of(node.input) != "table":
        return FilterProcessor(predicate, children, negate=isinstance(node, FilterNotNode))
    if isinstance(node, FilterNotNode):
        return TableFilterProcessor(lambda k, v: not predicate(k, v), children)
    return TableFilterProcessor(lambda k, v: bool(predicate(k, v)), children)


@BUILDERS.builds(MapNode)
def build_map(node: MapNode, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    return MapProcessor(ctx.function(node.name, "mapper"), children)


@BUILDERS.builds(MapValuesNode)
def build_map_values(node: MapValuesNode, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    if ctx.kind_of(node.input) == "table":
        return TableMapValuesProcessor(ctx.function(node.name, "mapper"), children)
    return MapValuesProcessor(ctx.function(node.name, "mapper"), children)


@BUILDERS.builds(SelectKeyNode)
def build_select_key(node: SelectKeyNode, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    return SelectKeyProcessor(ctx.function(node.name, "mapper"), children)


@BUILDERS.builds(FlatMapNode)
def build_flat_map(node: FlatMapNode, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    return FlatMapProcessor(ctx.function(node.name, "mapper"), children)


@BUILDERS.builds(FlatMapValuesNode)
def build_flat_map_values(node: FlatMapValuesNode, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    return FlatMapValuesProcessor(ctx.function(node.name, "mapper"), children)


@BUILDERS.builds(PeekNode, ForeachNode)
def build_peek(node: PeekNode | ForeachNode, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    """``peek`` and ``foreach`` (which has no children)."""
    return PeekProcessor(ctx.function(node.name, "action"), children)


@BUILDERS.builds(MergeNode)
def build_merge(node: MergeNode, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    return ForwardProcessor(children)


@BUILDERS.builds(ToStreamNode)
def build_to_stream(node: ToStreamNode, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    return ToStreamProcessor(children)


@BUILDERS.builds(SplitNode)
def build_split(node: SplitNode, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    branches = [child for child in children if isinstance(child, BranchProcessor)]
    if len(branches) != len(children):
        raise TypeError(f"node '{node.name}': every child of a split must be a branch")
    return SplitProcessor(branches)


@BUILDERS.builds(BranchNode)
def build_branch(node: BranchNode, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    predicate = ctx.function(node.name, "predicate") if node.predicate is not None else None
    return BranchProcessor(predicate, children)
