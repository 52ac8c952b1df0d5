"""KGroupedStream: a stream grouped by key, ready for an aggregation (Kafka's ``KGroupedStreamImpl``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from streamapp.dsl.builder import StreamsBuilder, UserFunction
from streamapp.dsl.tables import KTable

if TYPE_CHECKING:
    from streamapp.dsl.cogrouped import CogroupedKStream
    from streamapp.dsl.windowed import SessionWindowedKStream, TimeWindowedKStream
    from streamapp.dsl.windows import SessionWindows, SlidingWindows, TimeWindows

__all__ = ["KGroupedStream", "KGroupedTable", "add_aggregation", "aggregation_store"]


def add_aggregation(
    builder: StreamsBuilder,
    upstream: str,
    node_type: str,
    *,
    name: str | None,
    store: str | None,
    repartition: str | None,
    repartition_needed: bool,
    key_serde: str,
    input_value_serde: str,
    value_serde: str,
    prefix: str,
    **functions: Any,
) -> KTable:
    """Record an aggregation node (count / reduce / aggregate) over ``upstream`` and its store; returns its
    KTable.

    The store is ``store``, else ``<name>-store``, else Kafka's ``KSTREAM-AGGREGATE-STATE-STORE-<n>``. With
    ``repartition_needed`` a repartition node comes first, named ``repartition`` (Kafka's ``Grouped.as``)
    or after the store, so its topic is ``<applicationId>-<that name>-repartition``.
    """
    store_name = aggregation_store(builder, name, store, "KSTREAM-AGGREGATE-STATE-STORE-")
    builder._add_store(store_name, key_serde, value_serde)
    if repartition_needed:
        upstream = builder._add_repartition(repartition or store_name, upstream, key_serde, input_value_serde)
    node = builder._add(node_type, name, prefix, input=upstream, store=store_name, **functions)
    return KTable(builder, node, key_serde=key_serde, value_serde=value_serde)


def aggregation_store(builder: StreamsBuilder, name: str | None, store: str | None, prefix: str) -> str:
    """The store of an aggregation: ``store``, else ``<name>-store``, else Kafka's generated ``<prefix><n>``; claims
    ``name`` first (TopologyError when a node has it)."""
    if name is not None:
        builder._claim(name)
    if store is not None:
        return store
    if name is not None:
        return f"{name}-store"
    return builder._new_name(prefix)


class KGroupedStream:
    """A stream grouped by key, ready for an aggregation (Kafka's ``KGroupedStream``)."""

    def __init__(
        self,
        builder: StreamsBuilder,
        node: str,
        *,
        name: str | None,
        key_serde: str,
        value_serde: str,
        key_changed: bool,
    ) -> None:
        self._builder = builder
        self._node = node
        self._name = name
        self.key_serde = key_serde
        self.value_serde = value_serde
        self._key_changed = key_changed

    def count(self, *, name: str | None = None, store: str | None = None) -> KTable:
        """Count records per key into key-value store ``store``; returns the KTable of counts.

        ``store`` defaults to ``<name>-store`` when ``name`` is given, else to a Kafka-style generated
        name. Records with a null key or value are dropped (as in Kafka Streams).
        """
        return self._aggregation("count", name, store, "long", "KSTREAM-AGGREGATE-")

    def reduce(self, reducer: UserFunction, *, name: str | None = None, store: str | None = None) -> KTable:
        """Combine the values per key with ``reducer(aggregate, value)`` (a key's first value starts it;
        Kafka's ``KGroupedStream.reduce``); the store holds values of this stream's value serde."""
        return self._aggregation("reduce", name, store, self.value_serde, "KSTREAM-REDUCE-", reducer=reducer)

    def aggregate(
        self,
        initializer: UserFunction,
        aggregator: UserFunction,
        *,
        value_serde: str = "json",
        name: str | None = None,
        store: str | None = None,
    ) -> KTable:
        """Fold the values per key: ``aggregator(key, value, aggregate)`` starting from ``initializer()``
        (Kafka's ``KGroupedStream.aggregate``); ``value_serde`` is the store's (and the table's) serde of the
        aggregate (Kafka's ``Materialized.withValueSerde``)."""
        return self._aggregation(
            "aggregate", name, store, value_serde, "KSTREAM-AGGREGATE-", initializer=initializer, aggregator=aggregator
        )

    def _aggregation(
        self, node_type: str, name: str | None, store: str | None, value_serde: str, prefix: str, **functions: Any
    ) -> KTable:
        return add_aggregation(
            self._builder,
            self._node,
            node_type,
            name=name,
            store=store,
            repartition=self._name if self._key_changed else None,
            repartition_needed=self._key_changed,
            key_serde=self.key_serde,
            input_value_serde=self.value_serde,
            value_serde=value_serde,
            prefix=prefix,
            **functions,
        )

    def cogroup(self, aggregator: UserFunction) -> CogroupedKStream:
        """Start a cogroup of this grouped stream with ``aggregator(key, value, aggregate) -> aggregate`` (Kafka's
        ``KGroupedStream.cogroup``, KIP-150); add other grouped streams with ``.cogroup(grouped, aggregator)`` and
        finish with ``.aggregate(initializer, ...)`` (``streamapp.dsl.cogrouped``)."""
        from streamapp.dsl.cogrouped import CogroupedKStream

        return CogroupedKStream(self, aggregator)

    def windowed_by(
        self, windows: TimeWindows | SlidingWindows | SessionWindows
    ) -> TimeWindowedKStream | SessionWindowedKStream:
        """This grouped stream cut into time, sliding or session ``windows`` (``streamapp.dsl.windows``), for a
        windowed count / reduce / aggregate (Kafka's ``KGroupedStream.windowedBy``)."""
        from streamapp.dsl.windowed import windowed_by

        return windowed_by(self, windows)


class KGroupedTable:
    """A table re-keyed by ``KTable.group_by``, ready for an aggregation with adder and subtractor (Kafka's
    ``KGroupedTableImpl``). Every aggregation repartitions first (Kafka always does for a grouped table)."""

    def __init__(
        self, builder: StreamsBuilder, node: str, *, name: str | None, key_serde: str, value_serde: str
    ) -> None:
        self._builder = builder
        self._node = node
        self._name = name
        self.key_serde = key_serde
        self.value_serde = value_serde

    def count(self, *, name: str | None = None, store: str | None = None) -> KTable:
        """Count the table's rows per new key: +1 for an added row, -1 for a removed one."""
        return self._aggregation("count", name, store, "long", "KTABLE-AGGREGATE-")

    def reduce(
        self,
        adder: UserFunction,
        subtractor: UserFunction,
        *,
        name: str | None = None,
        store: str | None = None,
    ) -> KTable:
        """Combine the rows per new key: ``adder(aggregate, new value)`` for an added row (its first row
        starts the aggregate), ``subtractor(aggregate, old value)`` for a removed one (``KTableReduce``)."""
        return self._aggregation(
            "reduce", name, store, self.value_serde, "KTABLE-REDUCE-", adder=adder, subtractor=subtractor
        )

    def aggregate(
        self,
        initializer: UserFunction,
        adder: UserFunction,
        subtractor: UserFunction,
        *,
        value_serde: str = "json",
        name: str | None = None,
        store: str | None = None,
    ) -> KTable:
        """Fold the rows per new key from ``initializer()``: ``adder(key, new value, aggregate)`` and
        ``subtractor(key, old value, aggregate)`` (``KTableAggregate``); ``value_serde``: the aggregate's."""
        return self._aggregation(
            "aggregate",
            name,
            store,
            value_serde,
            "KTABLE-AGGREGATE-",
            initializer=initializer,
            adder=adder,
            subtractor=subtractor,
        )

    def _aggregation(
        self, node_type: str, name: str | None, store: str | None, value_serde: str, prefix: str, **functions: Any
    ) -> KTable:
        return add_aggregation(
            self._builder,
            self._node,
            node_type,
            name=name,
            store=store,
            repartition=self._name,
            repartition_needed=True,
            key_serde=self.key_serde,
            input_value_serde=self.value_serde,
            value_serde=value_serde,
            prefix=prefix,
            **functions,
        )
