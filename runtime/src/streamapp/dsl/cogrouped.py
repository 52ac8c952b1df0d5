"""CogroupedKStream: several grouped streams folded into one aggregate per key (Kafka's ``CogroupedKStreamImpl``,
KIP-150).

``grouped.cogroup(aggregator)`` starts a cogroup; ``.cogroup(other_grouped, other_aggregator)`` adds a grouped stream
with its own ``fn(key, value, aggregate) -> aggregate``; ``.aggregate(initializer, ...)`` records, as Kafka's
``CogroupedStreamAggregateBuilder`` builds it: a ``repartition`` node for each grouped stream whose key changed
(named after its grouping, ``group_by(..., name=...)``, else after the store: topic
``<applicationId>-<that name>-repartition``), one ``cogroup_aggregate`` node per grouped stream
(``<name>-cogroup-agg-<i>``, else ``COGROUPKSTREAM-AGGREGATE-<n>``) and the ``cogroup_merge`` node whose KTable it
returns (``<name>-cogroup-merge``, else ``COGROUPKSTREAM-MERGE-<n>``), all over one key-value store (``store``, else
``<name>-store``, else ``COGROUPKSTREAM-AGGREGATE-STATE-STORE-<n>``).

``.windowed_by(windows)`` (Kafka's ``CogroupedKStream.windowedBy``: ``TimeWindowedCogroupedKStream``,
``SessionWindowedCogroupedKStream``, here one ``WindowedCogroupedKStream``) cuts the cogroup into time, sliding or
session windows: its ``aggregate`` records one ``windowed_aggregate`` per grouped stream (Kafka's
``KStreamWindowAggregate`` / ``KStreamSlidingWindowAggregate`` / ``KStreamSessionWindowAggregate``, each with its own
stream time) over one window (session) store, and the ``cogroup_merge`` whose windowed KTable it returns.

Adding a grouped stream that is already in the cogroup replaces its aggregator and keeps its place (Kafka keeps
them in a ``LinkedHashMap``). Two grouped streams that both need a repartition and would get one topic name (neither
grouping named) raise TopologyError: Kafka would register ``<store>-repartition`` twice and fail too.
"""

from __future__ import annotations

from typing import Any

from streamapp.dsl.builder import StreamsBuilder, UserFunction
from streamapp.dsl.grouped import KGroupedStream, aggregation_store
from streamapp.dsl.tables import KTable
from streamapp.dsl.windowed import add_window_store, window_spec, windowed_key_serde
from streamapp.dsl.windows import SessionWindows, SlidingWindows, TimeWindows
from streamapp.topology import TopologyError
from streamapp.topology.windows import WindowSpec

__all__ = ["CogroupedKStream", "WindowedCogroupedKStream"]

_STORE_PREFIX = "COGROUPKSTREAM-AGGREGATE-STATE-STORE-"


class CogroupedKStream:
    """Grouped streams with their aggregators, waiting for ``aggregate`` (Kafka's ``CogroupedKStream``)."""

    def __init__(self, grouped: KGroupedStream, aggregator: UserFunction) -> None:
        self._builder: StreamsBuilder = grouped._builder
        self.key_serde = grouped.key_serde
        self._groups: list[tuple[KGroupedStream, UserFunction]] = []
        self.cogroup(grouped, aggregator)

    def cogroup(self, grouped: KGroupedStream, aggregator: UserFunction) -> CogroupedKStream:
        """Add ``grouped`` with ``aggregator(key, value, aggregate) -> aggregate``; returns this cogroup (Kafka's
        ``CogroupedKStream.cogroup``). TypeError when ``grouped`` is not a ``KGroupedStream`` of this builder."""
        if not isinstance(grouped, KGroupedStream) or grouped._builder is not self._builder:
            raise TypeError("cogroup expects a KGroupedStream of the same StreamsBuilder")
        for i, (known, _) in enumerate(self._groups):
            if known is grouped:
                self._groups[i] = (grouped, aggregator)
                return self
        self._groups.append((grouped, aggregator))
        return self

    def aggregate(
        self,
        initializer: UserFunction,
        *,
        value_serde: str = "json",
        name: str | None = None,
        store: str | None = None,
    ) -> KTable:
        """Fold every grouped stream's records per key into one aggregate, from ``initializer()``, each with its own
        aggregator (Kafka's ``CogroupedKStream.aggregate``); ``value_serde``: the store's and the table's serde of the
        aggregate (Kafka's ``Materialized.withValueSerde``). Returns the cogroup's KTable."""
        store_name = aggregation_store(self._builder, name, store, _STORE_PREFIX)
        self._builder._add_store(store_name, self.key_serde, value_serde)
        return self._build("cogroup_aggregate", name, store_name, value_serde, self.key_serde, initializer=initializer)

    def windowed_by(self, windows: TimeWindows | SlidingWindows | SessionWindows) -> WindowedCogroupedKStream:
        """This cogroup cut into time, sliding or session ``windows`` (Kafka's ``CogroupedKStream.windowedBy``)."""
        return WindowedCogroupedKStream(self, window_spec(windows))

    def _build(
        self, node_type: str, name: str | None, store_name: str, value_serde: str, key_serde: str, **fields: Any
    ) -> KTable:
        """The repartitions, one ``node_type`` node per grouped stream with its aggregator and ``fields``, and the
        ``cogroup_merge`` over ``store_name``; returns the merge's KTable (keys of ``key_serde``)."""
        builder = self._builder
        upstreams = [self._upstream(grouped, store_name) for grouped, _ in self._groups]
        aggregates = [
            builder._add(
                node_type,
                None if name is None else f"{name}-cogroup-agg-{i}",
                "COGROUPKSTREAM-AGGREGATE-",
                input=upstream,
                store=store_name,
                aggregator=aggregator,
                **fields,
            )
            for i, (upstream, (_, aggregator)) in enumerate(zip(upstreams, self._groups, strict=True))
        ]
        merge = builder._add(
            "cogroup_merge",
            None if name is None else f"{name}-cogroup-merge",
            "COGROUPKSTREAM-MERGE-",
            inputs=aggregates,
            store=store_name,
        )
        return KTable(builder, merge, key_serde=key_serde, value_serde=value_serde)

    def _upstream(self, grouped: KGroupedStream, store_name: str) -> str:
        """The node the grouped stream's aggregation reads: a repartition node when its key changed."""
        if not grouped._key_changed:
            return grouped._node
        repartition = grouped._name or store_name
        if any(step.name == repartition for step in self._builder._steps):
            raise TopologyError(
                f"cogroup: two grouped streams would be repartitioned through '{repartition}-repartition'; name "
                "their groupings (group_by(..., name=...)) so that each gets its own repartition topic"
            )
        return self._builder._add_repartition(repartition, grouped._node, grouped.key_serde, grouped.value_serde)


class WindowedCogroupedKStream:
    """A cogroup cut into time, sliding or session windows (Kafka's ``TimeWindowedCogroupedKStream`` and
    ``SessionWindowedCogroupedKStream``); ``spec``: the windows."""

    def __init__(self, cogrouped: CogroupedKStream, spec: WindowSpec) -> None:
        self._cogrouped = cogrouped
        self.spec = spec

    def aggregate(
        self,
        initializer: UserFunction,
        merger: UserFunction | None = None,
        *,
        value_serde: str = "json",
        name: str | None = None,
        store: str | None = None,
        retention_ms: int | None = None,
    ) -> KTable:
        """Fold each grouped stream's records per key and window (session), from ``initializer()``, with its own
        aggregator; ``merger(key, agg1, agg2)`` joins the sessions a record bridges and is given for session windows
        only (Kafka's ``SessionWindowedCogroupedKStream.aggregate(initializer, merger)``; ValueError otherwise). The
        store's retention defaults to Kafka's minimum (``retention_ms`` may only be larger: ValueError)."""
        if (merger is not None) != (self.spec.type == "session"):
            raise ValueError("a session-windowed cogroup needs a merger, and only a session-windowed one takes it")
        functions = {"initializer": initializer} if merger is None else {"initializer": initializer, "merger": merger}
        cogrouped = self._cogrouped
        store_name = aggregation_store(cogrouped._builder, name, store, _STORE_PREFIX)
        add_window_store(cogrouped._builder, store_name, self.spec, cogrouped.key_serde, value_serde, retention_ms)
        windows = self.spec.model_dump(exclude_none=True)
        key_serde = windowed_key_serde(self.spec, cogrouped.key_serde)
        return cogrouped._build(
            "windowed_aggregate", name, store_name, value_serde, key_serde, windows=windows, **functions
        )
