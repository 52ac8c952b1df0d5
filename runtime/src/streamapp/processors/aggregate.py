"""Aggregations over a key-value store: count."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from streamapp.processors.base import BuildContext, Change, Processor, ProcessorMetrics
from streamapp.state.stores import TypedKeyValueStore
from streamapp.topology import CountNode, NodeBase

__all__ = ["build_count"]

log = logging.getLogger(__name__)


class CountProcessor:
    """Counts records per key in its store; forwards ``(key, Change(new count, old count))`` per counted record.

    Records with a null key or a null value are skipped and counted as dropped, as Kafka Streams'
    ``KStreamAggregate`` does. The input must already be partitioned by the key (a repartition upstream
    when the key changed), so each key's count lives in exactly one task.
    """

    def __init__(self, store: TypedKeyValueStore, children: Sequence[Processor], metrics: ProcessorMetrics) -> None:
        self._store = store
        self._children = tuple(children)
        self._metrics = metrics

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        if key is None or value is None:
            self._metrics.dropped_records += 1
            log.debug("Skipped record with null key or value in count on store %s", self._store.name)
            return
        old = self._store.get(key)
        change = Change((old or 0) + 1, old)
        self._store.put(key, change.new_value)
        for child in self._children:
            child.process(key, change, timestamp)


def build_count(node: NodeBase, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    assert isinstance(node, CountNode)
    return CountProcessor(ctx.store(node.store), children, ctx.metrics)
