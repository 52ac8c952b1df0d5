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

Adding a grouped stream that is already in the cogroup replaces its aggregator and keeps its place (Kafka keeps
them in a ``LinkedHashMap``). Two grouped streams that both need a repartition and would get one topic name (neither
grouping named) raise TopologyError: Kafka would register ``<store>-repartition`` twice and fail too.
"""

from __future__ import annotations

from streamapp.dsl.builder import StreamsBuilder, UserFunction
from streamapp.dsl.grouped import KGroupedStream, aggregation_store
from streamapp.dsl.tables import KTable
from streamapp.topology import TopologyError

__all__ = ["CogroupedKStream"]


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
        builder = self._builder
        store_name = aggregation_store(builder, name, store, "COGROUPKSTREAM-AGGREGATE-STATE-STORE-")
        builder._add_store(store_name, self.key_serde, value_serde)
        upstreams = [self._upstream(grouped, store_name) for grouped, _ in self._groups]
        aggregates = [
            builder._add(
                "cogroup_aggregate",
                None if name is None else f"{name}-cogroup-agg-{i}",
                "COGROUPKSTREAM-AGGREGATE-",
                input=upstream,
                store=store_name,
                initializer=initializer,
                aggregator=aggregator,
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
        return KTable(builder, merge, key_serde=self.key_serde, value_serde=value_serde)

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
