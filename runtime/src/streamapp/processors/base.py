"""What every processor is and what it may use from its task while it is built.

A processor receives ``(key, value, timestamp)`` (timestamp in epoch ms) and forwards zero or more
records to its children, synchronously, depth first, like Kafka Streams' ``ProcessorNode``. Source
processors receive the raw key and value bytes of a consumed record.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from streamapp.state.stores import TypedKeyValueStore

__all__ = ["BuildContext", "Processor", "ProcessorMetrics", "RecordSender"]


class Processor(Protocol):
    """One node of a task's processor graph."""

    def process(self, key: Any, value: Any, timestamp: int) -> None: ...


class RecordSender(Protocol):
    """Sends a serialized record to a topic; without ``partition`` the key's murmur2 hash picks it."""

    def __call__(self, topic: str, key: bytes | None, value: bytes | None, timestamp: int) -> None: ...


@dataclass
class ProcessorMetrics:
    """Counters the processors of one task update."""

    dropped_records: int = 0
    """Records skipped by rule (null key or value into an aggregation), Kafka Streams' dropped-records."""


@dataclass
class BuildContext:
    """What the task offers its processors at build time.

    ``source_nodes``: names of the nodes that act as sources in this sub-topology (source nodes and the
    repartition nodes it reads). ``functions``: resolved user functions, ``{node: {parameter: callable}}``.
    ``topic_of``: resolves a repartition node name to its topic. ``store``: the typed view of a store.
    """

    application_id: str
    partition: int
    source_nodes: set[str]
    functions: dict[str, dict[str, Callable[..., Any]]]
    topic_of: Callable[[str], str]
    store: Callable[[str], TypedKeyValueStore]
    send: RecordSender
    metrics: ProcessorMetrics = field(default_factory=ProcessorMetrics)

    def function(self, node: str, parameter: str) -> Callable[..., Any]:
        """The resolved user function of ``node``'s ``parameter``; KeyError if it was not resolved."""
        return self.functions[node][parameter]
