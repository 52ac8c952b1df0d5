"""The ``windowed`` family: windowed aggregations and suppression (the window specs are in
``streamapp.topology.windows``).

A record is *late* and dropped when its window is closed (the rules, with the window types, are in
``streamapp.topology.windows``).

Node types (output: a KTable whose keys are ``streamapp.windowed.Windowed``):

==================  ==========================================================  ===============================
type                parameters                                                  Kafka processor
==================  ==========================================================  ===============================
windowed_count      input, store, windows                                       KStreamWindowAggregate,
windowed_reduce     input, store, windows, reducer ``fn(agg, value) -> agg``    KStreamSlidingWindowAggregate,
windowed_aggregate  input, store, windows, initializer ``fn() -> agg``,         KStreamSessionWindowAggregate
                    aggregator ``fn(key, value, agg) -> agg``, merger
                    ``fn(key, agg1, agg2) -> agg`` (session windows only)
suppress            input (a windowed table), store, until: window_closes       KTableSuppressProcessor
==================  ==========================================================  ===============================

The store of a windowed aggregation is a ``window`` store (time and sliding windows) or a ``session`` store,
whose ``retentionMs`` must be at least the window's ``min_retention_ms()``. The store of a suppress node is a
``key_value`` store (the changelog of its buffer).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import model_validator

from streamapp.topology.nodes.base import FunctionRef, NodeBase
from streamapp.topology.windows import WindowSpec

__all__ = [
    "SuppressNode",
    "WindowedAggregateNode",
    "WindowedAggregationNode",
    "WindowedCountNode",
    "WindowedReduceNode",
    "suppression_grace_ms",
]


class WindowedAggregationNode(NodeBase):
    """Fields and rules shared by the windowed aggregations; a KStream in, a windowed KTable out.

    Records with a null key are dropped (and, for sliding windows, records with a null value), as are records
    with a negative timestamp (Kafka's timestamp extractor would refuse them); all count as dropped records.
    Each update forwards ``Change(new aggregate, old aggregate)`` keyed by ``Windowed(key, start, end)``.
    """

    input: str
    store: str
    windows: WindowSpec
    output: ClassVar[str | None] = "table"
    requires_copartitioned_input: ClassVar[bool] = True

    def stores(self) -> list[str]:
        return [self.store]

    def check_graph(self, nodes: Mapping[str, NodeBase], stores: Mapping[str, Any]) -> str | None:
        """The store must be a ``window`` store (``session`` for session windows) whose retention is at least
        ``windows.min_retention_ms()`` and, for a window store, whose window size is the window's size
        (Kafka's store materializers)."""
        store = stores.get(self.store)
        if store is None:
            return None  # reported by the store checks
        needed = self.windows.store_type()
        if store.type != needed:
            return f"store '{self.store}' must be a {needed} store for {self.windows.type} windows, not {store.type}"
        minimum = self.windows.min_retention_ms()
        if store.retention_ms < minimum:
            what = {"session": "gap", "sliding": "2 x time difference"}.get(self.windows.type, "size")
            return (
                f"store '{self.store}': retentionMs ({store.retention_ms}) must be at least the window's "
                f"{what} plus grace ({minimum})"
            )
        if needed == "window" and store.window_size_ms != self.windows.size:
            return (
                f"store '{self.store}': windowSizeMs ({store.window_size_ms}) must be the window's "
                f"{'time difference' if self.windows.type == 'sliding' else 'size'} ({self.windows.size})"
            )
        if needed == "window" and store.retain_duplicates:
            return f"store '{self.store}': a windowed aggregation's store must not retain duplicates"
        return None


class WindowedCountNode(WindowedAggregationNode):
    """Counts records per key and window; the store's value serde is ``long``."""

    type: Literal["windowed_count"] = "windowed_count"


class WindowedReduceNode(WindowedAggregationNode):
    """Combines the values of a key and window with ``reducer(aggregate, value) -> aggregate``; the first value
    of a window is its aggregate (Kafka's ``aggregatorForReducer``; sessions merge with the reducer too)."""

    type: Literal["windowed_reduce"] = "windowed_reduce"
    reducer: FunctionRef


class WindowedAggregateNode(WindowedAggregationNode):
    """Folds the values of a key and window: ``initializer() -> agg`` then ``aggregator(key, value, agg) -> agg``.

    Session windows also need ``merger(key, agg1, agg2) -> agg`` to combine sessions a record bridges; other
    windows must not set it.
    """

    type: Literal["windowed_aggregate"] = "windowed_aggregate"
    initializer: FunctionRef
    aggregator: FunctionRef
    merger: FunctionRef | None = None

    @model_validator(mode="after")
    def _check_merger(self) -> WindowedAggregateNode:
        if self.windows.type == "session" and self.merger is None:
            raise ValueError("a session-windowed aggregate needs 'merger' (fn(key, agg1, agg2) -> agg)")
        if self.windows.type != "session" and self.merger is not None:
            raise ValueError(f"'merger' applies only to session windows, not {self.windows.type} windows")
        return self


class SuppressNode(NodeBase):
    """Holds back a windowed table's updates and forwards only each window's final result once the window
    closes (Kafka's ``Suppressed.untilWindowCloses`` with an unbounded buffer, ``KTableSuppressProcessor``).

    A buffered update of window ``w`` is forwarded when ``w.end <= streamTime - closeGrace``, where
    ``closeGrace`` is the upstream window's ``close_grace_ms()`` and stream time the largest timestamp the node
    has seen. Tombstones of final results are dropped. The buffer lives in the ``key_value`` store ``store``
    (logged, so it survives failover).
    """

    type: Literal["suppress"] = "suppress"
    input: str
    store: str
    until: Literal["window_closes"] = "window_closes"
    accepts: ClassVar[frozenset[str]] = frozenset({"table"})
    output: ClassVar[str | None] = "table"

    def stores(self) -> list[str]:
        return [self.store]

    def check_graph(self, nodes: Mapping[str, NodeBase], stores: Mapping[str, Any]) -> str | None:
        """A windowed aggregation must be upstream (through table operations), and the buffer store must be
        a ``key_value`` store."""
        try:
            suppression_grace_ms(nodes, self.name)
        except ValueError as exc:
            return f"suppress(until_window_closes): {exc}"
        store = stores.get(self.store)
        if store is not None and store.type != "key_value":
            return f"store '{self.store}' must be a key_value store (the suppression buffer), not {store.type}"
        return None


def suppression_grace_ms(nodes: Mapping[str, Any], name: str) -> int:
    """The close grace (ms) a suppress node ``name`` waits for: that of the windowed aggregation upstream.

    Walks the inputs through table operations (Kafka's ``GraphGraceSearchUtil.findAndVerifyWindowGrace``,
    taking the maximum over several parents). ``nodes`` maps node names to node models. Raises ValueError
    when a path reaches a source without passing a windowed aggregation.
    """
    node = nodes[name]
    chain: list[str] = [name]

    def search(current: Any) -> int:
        if isinstance(current, WindowedAggregationNode):
            return current.windows.close_grace_ms()
        chain.append(current.name)
        parents = current.inputs()
        if not parents:
            raise ValueError(
                "window close time is only defined for windowed computations; got " + " -> ".join(reversed(chain))
            )
        return max(search(nodes[parent]) for parent in parents)

    return max(search(nodes[parent]) for parent in node.inputs())
