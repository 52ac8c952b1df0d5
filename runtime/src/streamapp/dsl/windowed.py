"""Windowed grouped streams and ``suppress``: ``group_by_key().windowed_by(...)`` then count / reduce / aggregate.

Kafka Streams' ``TimeWindowedKStream`` (tumbling, hopping and sliding windows) and ``SessionWindowedKStream``.
Each aggregation records one windowed node (``streamapp.topology.nodes.windowed``) and its store, inserting a
repartition node first when the key changed (like ``KGroupedStream.count``), and returns a KTable whose keys are
``streamapp.windowed.Windowed``; its key serde is the windowed serde (``windowed:<key serde>:<size>`` or
``session_windowed:<key serde>``), so ``to_stream().to(topic)`` writes Kafka's windowed key layout.

Stores default to ``<name>-store`` (or a Kafka-style generated name) with retention ``windows.min_retention_ms()``
(Kafka's default: size + grace, 2 x time difference + grace, gap + grace); pass ``retention_ms`` to keep windows
longer (it must not be smaller: ValueError). User functions must be module-level (``build()`` raises
TopologyError otherwise, as for every DSL step).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Self

from streamapp.dsl.builder import StreamsBuilder, UserFunction
from streamapp.dsl.grouped import aggregation_store
from streamapp.dsl.windows import EmitStrategy, SessionWindows, SlidingWindows, Suppressed, TimeWindows
from streamapp.topology.windows import WindowSpec

if TYPE_CHECKING:
    from streamapp.dsl.grouped import KGroupedStream
    from streamapp.dsl.tables import KTable

__all__ = [
    "SessionWindowedKStream",
    "TimeWindowedKStream",
    "add_window_store",
    "suppress",
    "window_spec",
    "windowed_by",
    "windowed_key_serde",
]


def add_window_store(
    builder: StreamsBuilder, name: str, spec: WindowSpec, key_serde: str, value_serde: str, retention_ms: int | None
) -> None:
    """Declare the ``window`` (``session``) store ``name`` of an aggregation over ``spec``: retention
    ``retention_ms``, by default Kafka's ``spec.min_retention_ms()`` (ValueError when smaller), window size the
    window's."""
    minimum = spec.min_retention_ms()
    if retention_ms is not None and retention_ms < minimum:
        raise ValueError(f"retention ({retention_ms} ms) must be at least the window's size plus grace ({minimum} ms)")
    builder._add_store(name, key_serde, value_serde)
    extra: dict[str, Any] = {
        "type": spec.store_type(),
        "retention_ms": minimum if retention_ms is None else retention_ms,
    }
    if spec.type != "session":
        extra["window_size_ms"] = spec.size
    builder._stores[-1].update(extra)


def windowed_key_serde(spec: WindowSpec, key_serde: str) -> str:
    """The key serde of a windowed table: ``session_windowed:<key serde>`` or ``windowed:<key serde>:<size>``."""
    if spec.type == "session":
        return f"session_windowed:{key_serde}"
    return f"windowed:{key_serde}:{spec.size}"


def windowed_by(
    grouped: KGroupedStream, windows: TimeWindows | SlidingWindows | SessionWindows
) -> TimeWindowedKStream | SessionWindowedKStream:
    """``KGroupedStream.windowed_by``: the grouped stream cut into ``windows``."""
    spec = window_spec(windows)
    return SessionWindowedKStream(grouped, spec) if spec.type == "session" else TimeWindowedKStream(grouped, spec)


def window_spec(windows: TimeWindows | SlidingWindows | SessionWindows) -> WindowSpec:
    """The spec of what ``windowed_by`` takes; TypeError for anything else."""
    if not isinstance(windows, TimeWindows | SlidingWindows | SessionWindows):
        raise TypeError(
            f"windowed_by expects TimeWindows, SlidingWindows or SessionWindows, got {type(windows).__name__}"
        )
    return windows.spec()


class _WindowedKStream:
    """What time- and session-windowed streams share: store and node bookkeeping."""

    def __init__(self, grouped: KGroupedStream, spec: WindowSpec) -> None:
        self._grouped = grouped
        self._builder: StreamsBuilder = grouped._builder
        self.spec = spec
        self.key_serde = grouped.key_serde
        self.value_serde = grouped.value_serde
        self._emit_strategy: str | None = None

    def _aggregation(
        self,
        node_type: str,
        prefix: str,
        *,
        name: str | None,
        store: str | None,
        retention_ms: int | None,
        value_serde: str,
        functions: dict[str, UserFunction],
    ) -> KTable:
        from streamapp.dsl.tables import KTable

        builder = self._builder
        store_name = aggregation_store(builder, name, store, prefix + "STATE-STORE-")
        add_window_store(builder, store_name, self.spec, self.key_serde, value_serde, retention_ms)
        upstream = self._grouped._node
        if self._grouped._key_changed:
            upstream = builder._add_repartition(
                self._grouped._name or store_name, upstream, self.key_serde, self.value_serde
            )
        windows = self.spec.model_dump(exclude_none=True)
        if self._emit_strategy is not None:
            functions = {**functions, "emit_strategy": self._emit_strategy}
        node = builder._add(node_type, name, prefix, input=upstream, store=store_name, windows=windows, **functions)
        return KTable(builder, node, key_serde=windowed_key_serde(self.spec, self.key_serde), value_serde=value_serde)

    def emit_strategy(self, strategy: EmitStrategy) -> Self:
        """When the aggregation that follows forwards its results (Kafka's ``TimeWindowedKStream.emitStrategy`` /
        ``SessionWindowedKStream.emitStrategy``, KIP-825): ``EmitStrategy.on_window_update()`` (the default) or
        ``EmitStrategy.on_window_close()``, each window's (session's) final result once. Returns this stream, as Kafka
        does; the node records ``emitStrategy`` unless it is the default."""
        if not isinstance(strategy, EmitStrategy):
            raise TypeError(
                f"emit_strategy expects EmitStrategy.on_window_close() or .on_window_update(), got {strategy!r}"
            )
        self._emit_strategy = None if strategy.type == "on_window_update" else strategy.type
        return self

    def count(self, *, name: str | None = None, store: str | None = None, retention_ms: int | None = None) -> KTable:
        """Records per key and window (a session for session windows; ``long`` values)."""
        return self._aggregation(
            "windowed_count",
            "KSTREAM-AGGREGATE-",
            name=name,
            store=store,
            retention_ms=retention_ms,
            value_serde="long",
            functions={},
        )

    def reduce(
        self,
        reducer: UserFunction,
        *,
        name: str | None = None,
        store: str | None = None,
        retention_ms: int | None = None,
        value_serde: str | None = None,
    ) -> KTable:
        """``reducer(aggregate, value) -> aggregate`` per key and window; the first value starts it (merged sessions
        are reduced too)."""
        return self._aggregation(
            "windowed_reduce",
            "KSTREAM-REDUCE-",
            name=name,
            store=store,
            retention_ms=retention_ms,
            value_serde=value_serde or self.value_serde,
            functions={"reducer": reducer},
        )


class TimeWindowedKStream(_WindowedKStream):
    """A grouped stream cut into time (tumbling, hopping) or sliding windows (Kafka's ``TimeWindowedKStream``)."""

    def aggregate(
        self,
        initializer: UserFunction,
        aggregator: UserFunction,
        *,
        name: str | None = None,
        store: str | None = None,
        retention_ms: int | None = None,
        value_serde: str | None = None,
    ) -> KTable:
        """``aggregator(key, value, aggregate) -> aggregate`` per key and window, from ``initializer()``."""
        return self._aggregation(
            "windowed_aggregate",
            "KSTREAM-AGGREGATE-",
            name=name,
            store=store,
            retention_ms=retention_ms,
            value_serde=value_serde or self.value_serde,
            functions={"initializer": initializer, "aggregator": aggregator},
        )


class SessionWindowedKStream(_WindowedKStream):
    """A grouped stream cut into sessions (Kafka's ``SessionWindowedKStream``)."""

    def aggregate(
        self,
        initializer: UserFunction,
        aggregator: UserFunction,
        merger: UserFunction,
        *,
        name: str | None = None,
        store: str | None = None,
        retention_ms: int | None = None,
        value_serde: str | None = None,
    ) -> KTable:
        """``aggregator(key, value, agg)`` per key and session; ``merger(key, agg1, agg2)`` joins sessions a
        record bridges."""
        return self._aggregation(
            "windowed_aggregate",
            "KSTREAM-AGGREGATE-",
            name=name,
            store=store,
            retention_ms=retention_ms,
            value_serde=value_serde or self.value_serde,
            functions={"initializer": initializer, "aggregator": aggregator, "merger": merger},
        )


def suppress(table: KTable, suppressed: Suppressed) -> KTable:
    """``KTable.suppress``: a ``suppress`` node with its buffer store ``<name>-store`` (Kafka's naming)."""
    from streamapp.dsl.tables import KTable

    if not isinstance(suppressed, Suppressed):
        raise TypeError(
            "suppress expects Suppressed.until_window_closes(...) or Suppressed.until_time_limit(...), "
            f"got {type(suppressed).__name__}"
        )
    builder: StreamsBuilder = table._builder
    name = suppressed.name
    if name is not None:
        builder._claim(name)
    store_name = f"{name}-store" if name is not None else builder._new_name("KTABLE-SUPPRESS-STATE-STORE-")
    builder._add_store(store_name, table.key_serde, table.value_serde)
    node = builder._add(
        "suppress", name, "KTABLE-SUPPRESS-", input=table.node, store=store_name, **suppressed.node_fields()
    )
    return KTable(builder, node, key_serde=table.key_serde, value_serde=table.value_serde)
