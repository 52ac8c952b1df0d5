"""Window specifications and the windowed node types of a topology description.

Window specs (all times in milliseconds, camelCase in documents):

=========  ===========================================  ===========================================================
type       fields                                       windows of a record at time ``t`` (Kafka class)
=========  ===========================================  ===========================================================
tumbling   sizeMs, graceMs                              ``[s, s + size)`` with ``s = t - t % size`` (``TimeWindows``,
                                                        advance = size)
hopping    sizeMs, advanceMs (<= sizeMs), graceMs       every ``[s, s + size)`` with ``s`` a multiple of advance,
                                                        ``s >= 0`` and ``s <= t < s + size`` (``TimeWindows``)
sliding    timeDifferenceMs, graceMs                    ``[s, s + timeDifference]`` (inclusive) windows created at
                                                        record times (``SlidingWindows``)
session    gapMs, graceMs                               ``[first, last]`` of records no more than gap apart
                                                        (``SessionWindows``)
=========  ===========================================  ===========================================================

A record is *late* and dropped (counted in ``dropped-records``) when its window is closed: for time windows
when ``windowEnd + grace <= streamTime``, for sliding windows when ``windowEnd + grace < streamTime`` (the end is
inclusive), for session windows when ``sessionEnd + gap + grace < streamTime`` (KAFKA-12718), where stream time
is the largest record timestamp the processor has seen (Kafka's ``observedStreamTime``).

Join windows (``JoinWindowsSpec``: beforeMs, afterMs, graceMs; Kafka's ``JoinWindows``) are used by the
stream-stream join nodes (``streamapp.topology.joins``).

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

from pydantic import Field, model_validator

from streamapp.topology.node_base import DescriptionModel, FunctionRef, NodeBase

__all__ = [
    "WINDOW_NODE_TYPES",
    "JoinWindowsSpec",
    "SuppressNode",
    "WindowSpec",
    "WindowType",
    "WindowedAggregateNode",
    "WindowedAggregationNode",
    "WindowedCountNode",
    "WindowedReduceNode",
    "suppression_grace_ms",
]

WindowType = Literal["tumbling", "hopping", "sliding", "session"]

_FIELDS_BY_TYPE: dict[str, tuple[set[str], set[str]]] = {
    # type: (required fields, allowed optional fields) besides graceMs
    "tumbling": ({"size_ms"}, {"advance_ms"}),
    "hopping": ({"size_ms", "advance_ms"}, set()),
    "sliding": ({"time_difference_ms"}, set()),
    "session": ({"gap_ms"}, set()),
}


class WindowSpec(DescriptionModel):
    """How a grouped stream is cut into windows; all durations in milliseconds.

    Raises ValueError (a TopologyError when parsed in a description) naming the field for a missing or
    extra field for the type, a non-positive size/advance/gap, an advance larger than the size, or a
    negative time difference or grace.
    """

    type: WindowType
    size_ms: int | None = None
    advance_ms: int | None = None
    time_difference_ms: int | None = None
    gap_ms: int | None = None
    grace_ms: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _check_fields(self) -> WindowSpec:
        required, optional = _FIELDS_BY_TYPE[self.type]
        given = {
            name
            for name in ("size_ms", "advance_ms", "time_difference_ms", "gap_ms")
            if getattr(self, name) is not None
        }
        for name in sorted(required - given):
            raise ValueError(f"a {self.type} window needs '{_camel(name)}'")
        for name in sorted(given - required - optional):
            raise ValueError(f"'{_camel(name)}' does not apply to a {self.type} window")
        if self.size_ms is not None and self.size_ms <= 0:
            raise ValueError(f"'sizeMs' must be larger than zero, got {self.size_ms}")
        if self.advance_ms is not None and self.size_ms is not None:
            if self.type == "tumbling" and self.advance_ms != self.size_ms:
                raise ValueError("a tumbling window advances by its size; use type hopping for another advanceMs")
            if not 0 < self.advance_ms <= self.size_ms:
                raise ValueError(
                    f"'advanceMs' must be larger than zero and at most sizeMs ({self.size_ms}), got {self.advance_ms}"
                )
        if self.time_difference_ms is not None and self.time_difference_ms < 0:
            raise ValueError(f"'timeDifferenceMs' must not be negative, got {self.time_difference_ms}")
        if self.gap_ms is not None and self.gap_ms <= 0:
            raise ValueError(f"'gapMs' must be larger than zero, got {self.gap_ms}")
        return self

    # -- derived values ----------------------------------------------------------------------------

    @property
    def is_time_window(self) -> bool:
        """Tumbling or hopping (Kafka's ``TimeWindows``)."""
        return self.type in ("tumbling", "hopping")

    @property
    def advance(self) -> int:
        """Hop of a time window in ms (= size for tumbling); ValueError for sliding and session windows."""
        if not self.is_time_window:
            raise ValueError(f"a {self.type} window has no advance")
        return self.advance_ms if self.advance_ms is not None else self.size

    @property
    def size(self) -> int:
        """Length of a time window, or the time difference of a sliding window, in ms (``end - start``);
        ValueError for session windows, whose length varies."""
        if self.type == "sliding":
            assert self.time_difference_ms is not None
            return self.time_difference_ms
        if self.type == "session":
            raise ValueError("a session window has no fixed size")
        assert self.size_ms is not None
        return self.size_ms

    def windows_for(self, timestamp: int) -> list[tuple[int, int]]:
        """``[(start, end)]`` of the time windows containing ``timestamp`` (ms), oldest first.

        Kafka's ``TimeWindows.windowsFor``: starts are multiples of the advance, never negative, so a
        negative timestamp has no window. ValueError for sliding and session windows.
        """
        size, advance = self.size, self.advance
        start = (max(0, timestamp - size + advance) // advance) * advance
        windows: list[tuple[int, int]] = []
        while start <= timestamp:
            windows.append((start, start + size))
            start += advance
        return windows

    def close_grace_ms(self) -> int:
        """How long after a window's end it stays open, in ms: the grace, plus the gap for session windows.

        This is the ``suppress(until_window_closes)`` wait (Kafka's ``GraphGraceSearchUtil``).
        """
        if self.type == "session":
            assert self.gap_ms is not None
            return self.grace_ms + self.gap_ms
        return self.grace_ms

    def min_retention_ms(self) -> int:
        """The smallest legal store retention, in ms; also the default (Kafka's store materializers):
        size + grace (time windows), 2 x time difference + grace (sliding), gap + grace (session)."""
        if self.type == "sliding":
            return 2 * self.size + self.grace_ms
        if self.type == "session":
            assert self.gap_ms is not None
            return self.gap_ms + self.grace_ms
        return self.size + self.grace_ms

    def store_type(self) -> Literal["window", "session"]:
        """The store type this window needs: ``session`` for session windows, else ``window``."""
        return "session" if self.type == "session" else "window"


class JoinWindowsSpec(DescriptionModel):
    """Kafka's ``JoinWindows``: a record at ``t`` joins records of the other side in ``[t - before, t + after]``.

    All in ms; ``before + after >= 0`` and ``grace >= 0`` (ValueError otherwise). A join store keeps
    ``size + grace`` ms (``store_retention_ms``), with window size ``before + after`` and duplicates retained.
    """

    before_ms: int
    after_ms: int
    grace_ms: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _check_interval(self) -> JoinWindowsSpec:
        if self.before_ms + self.after_ms < 0:
            raise ValueError("the window interval (beforeMs + afterMs) must not be negative")
        return self

    @property
    def size(self) -> int:
        """``before + after`` in ms (Kafka's ``JoinWindows.size()``)."""
        return self.before_ms + self.after_ms

    def store_retention_ms(self) -> int:
        """Retention of the join's window stores: ``size + grace`` ms (Kafka's ``KStreamImplJoin``)."""
        return self.size + self.grace_ms


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

    def functions(self) -> dict[str, str]:
        return {"reducer": self.reducer}


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

    def functions(self) -> dict[str, str]:
        refs = {"initializer": self.initializer, "aggregator": self.aggregator}
        if self.merger is not None:
            refs["merger"] = self.merger
        return refs


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


WINDOW_NODE_TYPES: dict[str, type[NodeBase]] = {
    "windowed_count": WindowedCountNode,
    "windowed_reduce": WindowedReduceNode,
    "windowed_aggregate": WindowedAggregateNode,
    "suppress": SuppressNode,
}
"""The windowed node types, by their ``type`` value (registered into ``streamapp.topology.nodes.NODE_TYPES``)."""


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


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)
