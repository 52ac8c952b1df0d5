"""The ``windowed`` family: windowed aggregations and suppression (the window specs are in
``streamapp.topology.windows``).

A record is *late* and dropped when its window is closed (the rules, with the window types, are in
``streamapp.topology.windows``).

Node types (output: a KTable whose keys are ``streamapp.windowed.Windowed``):

==================  ==========================================================  ===============================
type                parameters                                                  Kafka processor
==================  ==========================================================  ===============================
windowed_count      input, store, windows, emitStrategy (optional)              KStreamWindowAggregate,
windowed_reduce     input, store, windows, reducer ``fn(agg, value) -> agg``    KStreamSlidingWindowAggregate,
windowed_aggregate  input, store, windows, initializer ``fn() -> agg``,         KStreamSessionWindowAggregate
                    aggregator ``fn(key, value, agg) -> agg``, merger
                    ``fn(key, agg1, agg2) -> agg`` (session windows only)
suppress            input (a table), store, until: window_closes | time_limit,  KTableSuppressProcessor
                    timeLimitMs, maxRecords, maxBytes, whenFull
==================  ==========================================================  ===============================

``emitStrategy`` (Kafka's ``EmitStrategy``, KIP-825): left out, or ``on_window_update``, every update of a window is
forwarded (behind the record cache: when the cache flushes it); ``on_window_close`` (as Kafka's
``KStreamWindowAggregate`` / ``KStreamSlidingWindowAggregate`` / ``KStreamSessionWindowAggregate`` with
``StrategyType.ON_WINDOW_CLOSE``)
forwards each window's final aggregate once, when stream time passes its end plus grace
(``WindowedAggregationNode``).

The store of a windowed aggregation is a ``window`` store (time and sliding windows) or a ``session`` store,
whose ``retentionMs`` must be at least the window's ``min_retention_ms()``. The store of a suppress node is a
``key_value`` store (the changelog of its buffer).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

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

    ``emit_strategy`` (``emitStrategy``): ``None`` (left out of the document) or ``"on_window_update"`` forwards
    every update; ``"on_window_close"`` forwards nothing per update and, after each record, every window of the
    store with ``end <= streamTime - grace`` not forwarded before, as ``Change(aggregate, None)`` at the window's
    timestamp, by window start then serialized key (Kafka's ``KStreamWindowAggregate`` with
    ``EmitStrategy.onWindowClose()``, KIP-825, over its time-ordered window store; ``KStreamSlidingWindowAggregate``
    and ``KStreamSessionWindowAggregate`` for sliding and session windows, sessions by end).
    """

    input: str
    store: str
    windows: WindowSpec
    emit_strategy: Literal["on_window_update", "on_window_close"] | None = None
    output: ClassVar[str | None] = "table"
    requires_copartitioned_input: ClassVar[bool] = True

    @property
    def emits_on_window_close(self) -> bool:
        """Whether the node forwards only final results (``emit_strategy == "on_window_close"``)."""
        return self.emit_strategy == "on_window_close"

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
    """Holds back a table's updates (Kafka's ``KTable#suppress``, ``KTableSuppressProcessor``), one buffered
    update per key (later updates of a key replace the buffered one, keeping its prior value).

    - ``until: window_closes`` (``Suppressed.untilWindowCloses``): each window's final result only. An update of
      window ``w`` is buffered under ``w.end`` and forwarded when ``w.end <= streamTime - closeGrace``
      (``closeGrace``: the upstream windowed aggregation's ``close_grace_ms()``); final tombstones are dropped.
      The buffer must be strict (``whenFull: shut_down``), as Kafka's ``StrictBufferConfig``.
    - ``until: time_limit`` (``Suppressed.untilTimeLimit``): any table; an update is buffered under its record
      timestamp and forwarded when ``timestamp <= streamTime - timeLimitMs`` (ms, >= 0); tombstones are
      forwarded.

    Stream time is the largest record timestamp the node has seen. Buffer bounds (Kafka's ``BufferConfig``):
    ``maxRecords`` (keys buffered) and ``maxBytes`` (``SuppressionBuffer.size_bytes``), ``None`` = unbounded.
    When a bound is exceeded after a record, ``whenFull: shut_down`` (the default) fails the record (the task's
    processing exception handler decides, as in Kafka 4), ``emit_early`` forwards the oldest updates until the
    buffer fits.
    The buffer lives in the ``key_value`` store ``store`` (logged, so it survives failover).
    """

    type: Literal["suppress"] = "suppress"
    input: str
    store: str
    until: Literal["window_closes", "time_limit"] = "window_closes"
    time_limit_ms: int | None = Field(default=None, ge=0)
    max_records: int | None = Field(default=None, ge=0)
    max_bytes: int | None = Field(default=None, ge=0)
    when_full: Literal["shut_down", "emit_early"] | None = None
    """What a full buffer does; ``None`` (left out of the document) is ``shut_down``."""
    accepts: ClassVar[frozenset[str]] = frozenset({"table"})
    output: ClassVar[str | None] = "table"

    @model_validator(mode="after")
    def _check_until(self) -> SuppressNode:
        if self.until == "time_limit" and self.time_limit_ms is None:
            raise ValueError("suppress until time_limit needs 'timeLimitMs'")
        if self.until == "window_closes" and self.time_limit_ms is not None:
            raise ValueError("'timeLimitMs' applies only to suppress until time_limit")
        if self.until == "window_closes" and self.when_full == "emit_early":
            raise ValueError(
                "suppress until window_closes needs a strict buffer (whenFull: shut_down): emitting early would "
                "forward results that are not final (Kafka's StrictBufferConfig)"
            )
        return self

    def stores(self) -> list[str]:
        return [self.store]

    def check_graph(self, nodes: Mapping[str, NodeBase], stores: Mapping[str, Any]) -> str | None:
        """For ``window_closes`` a windowed aggregation must be upstream (through table operations); the buffer
        store must be a ``key_value`` store."""
        if self.until == "window_closes":
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
