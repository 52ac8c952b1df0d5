"""Processors that choose where a record goes: split / branch, and a sink whose topic a function picks."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from streamapp.processors.base import BuildContext, Processor, RecordSender
from streamapp.processors.io import SinkProcessor, build_sink
from streamapp.serdes import Serde, serde_for
from streamapp.topology import NodeBase, SinkNode
from streamapp.topology.nodes.stateless import BranchNode, SplitNode

__all__ = [
    "BranchProcessor",
    "SplitProcessor",
    "TopicExtractorSinkProcessor",
    "build_any_sink",
    "build_branch",
    "build_split",
]


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


class TopicExtractorSinkProcessor(SinkProcessor):
    """A sink whose topic is ``extractor(key, value)`` per record (Kafka's ``TopicNameExtractor``).

    Raises ValueError (a processing error) when the extractor returns anything but a non-empty string.
    """

    def __init__(
        self, extractor: Callable[[Any, Any], Any], key_serde: Serde, value_serde: Serde, send: RecordSender
    ) -> None:
        super().__init__("", key_serde, value_serde, send)
        self._extractor = extractor

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        topic = self._extractor(key, value)
        if not isinstance(topic, str) or not topic:
            raise ValueError(f"topic extractor returned {topic!r}, not a topic name")
        self.topic = topic
        super().process(key, value, timestamp)


def build_split(node: NodeBase, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    assert isinstance(node, SplitNode)
    branches = [child for child in children if isinstance(child, BranchProcessor)]
    if len(branches) != len(children):
        raise TypeError(f"node '{node.name}': every child of a split must be a branch")
    return SplitProcessor(branches)


def build_branch(node: NodeBase, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    assert isinstance(node, BranchNode)
    predicate = ctx.function(node.name, "predicate") if node.predicate is not None else None
    return BranchProcessor(predicate, children)


def build_any_sink(node: NodeBase, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    """A sink to a fixed topic (``streamapp.processors.io``) or to the topic its extractor picks."""
    assert isinstance(node, SinkNode)
    if node.topic_extractor is None:
        return build_sink(node, children, ctx)
    return TopicExtractorSinkProcessor(
        ctx.function(node.name, "topic_extractor"), serde_for(node.key_serde), serde_for(node.value_serde), ctx.send
    )
