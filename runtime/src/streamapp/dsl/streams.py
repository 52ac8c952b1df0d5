"""KStream, KGroupedStream and KTable: the fluent DSL over a StreamsBuilder.

Each method records one or more core nodes (``streamapp.topology.nodes``) and returns the next handle.
Serdes are tracked along the chain: a step without an explicit serde keeps the current one (so pass
``key_serde=`` to ``select_key``/``group_by`` when the new key has another type).

Repartitioning follows Kafka Streams: a key-changing step (``select_key``, ``group_by``) marks the stream,
and the next grouping inserts a ``repartition`` node named after the grouping (``Grouped.as``), else after
the count's store, so its topic is ``<applicationId>-<name>-repartition``.
"""

from __future__ import annotations

from streamapp.dsl.builder import StreamsBuilder, UserFunction


class KStream:
    """A record stream: every record is an independent event."""

    def __init__(
        self, builder: StreamsBuilder, node: str, *, key_serde: str, value_serde: str, key_changed: bool
    ) -> None:
        self._builder = builder
        self.node = node
        """Name of the node whose output this stream is."""
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.key_changed = key_changed
        """True when the key changed since the last source or repartition (a grouping must repartition)."""

    def filter(self, predicate: UserFunction, *, name: str | None = None) -> KStream:
        """Keep the records for which ``predicate(key, value)`` is true."""
        node = self._builder._add("filter", name, "KSTREAM-FILTER-", input=self.node, predicate=predicate)
        return self._next(node)

    def map_values(self, mapper: UserFunction, *, name: str | None = None, value_serde: str | None = None) -> KStream:
        """Replace each value by ``mapper(value)``; keeps the key, so no repartition is needed."""
        node = self._builder._add("map_values", name, "KSTREAM-MAPVALUES-", input=self.node, mapper=mapper)
        return self._next(node, value_serde=value_serde)

    def select_key(self, mapper: UserFunction, *, name: str | None = None, key_serde: str | None = None) -> KStream:
        """Replace each key by ``mapper(key, value)``; a later grouping repartitions."""
        node = self._builder._add("select_key", name, "KSTREAM-KEY-SELECT-", input=self.node, mapper=mapper)
        return self._next(node, key_serde=key_serde, key_changed=True)

    def group_by(
        self,
        selector: UserFunction,
        *,
        name: str | None = None,
        key_serde: str | None = None,
        value_serde: str | None = None,
    ) -> KGroupedStream:
        """Group by a new key ``selector(key, value)``: ``select_key`` then ``group_by_key``.

        With ``name`` (Kafka's ``Grouped.as``) the select_key node is ``<name>-key`` and the repartition
        node (and topic suffix) is ``<name>``.
        """
        rekeyed = self.select_key(selector, name=f"{name}-key" if name is not None else None, key_serde=key_serde)
        return rekeyed.group_by_key(name=name, value_serde=value_serde)

    def group_by_key(
        self, *, name: str | None = None, key_serde: str | None = None, value_serde: str | None = None
    ) -> KGroupedStream:
        """Group by the current key; repartitions first if the key changed (``name`` names the repartition)."""
        return KGroupedStream(
            self._builder,
            self.node,
            name=name,
            key_serde=key_serde or self.key_serde,
            value_serde=value_serde or self.value_serde,
            key_changed=self.key_changed,
        )

    def to(
        self,
        topic: str,
        *,
        name: str | None = None,
        key_serde: str | None = None,
        value_serde: str | None = None,
    ) -> None:
        """Write every record to ``topic`` (a terminal step)."""
        self._builder._add(
            "sink",
            name,
            "KSTREAM-SINK-",
            input=self.node,
            topic=topic,
            key_serde=key_serde or self.key_serde,
            value_serde=value_serde or self.value_serde,
        )

    def _next(
        self,
        node: str,
        *,
        key_serde: str | None = None,
        value_serde: str | None = None,
        key_changed: bool | None = None,
    ) -> KStream:
        return KStream(
            self._builder,
            node,
            key_serde=key_serde or self.key_serde,
            value_serde=value_serde or self.value_serde,
            key_changed=self.key_changed if key_changed is None else key_changed,
        )


class KGroupedStream:
    """A stream grouped by key, ready for an aggregation (issue 2: ``count``)."""

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
        name. Records with a null key are dropped (as in Kafka Streams).
        """
        if name is not None:
            self._builder._claim(name)
        if store is not None:
            store_name = store
        elif name is not None:
            store_name = f"{name}-store"
        else:
            store_name = self._builder._new_name("KSTREAM-AGGREGATE-STATE-STORE-")
        self._builder._add_store(store_name, self.key_serde, "long")
        upstream = self._node
        if self._key_changed:
            upstream = self._builder._add(
                "repartition",
                self._name or store_name,
                "KSTREAM-REPARTITION-",
                input=upstream,
                key_serde=self.key_serde,
                value_serde=self.value_serde,
            )
        node = self._builder._add("count", name, "KSTREAM-AGGREGATE-", input=upstream, store=store_name)
        return KTable(self._builder, node, key_serde=self.key_serde, value_serde="long")


class KTable:
    """A changelog stream: the latest value per key (here: the output of an aggregation)."""

    def __init__(self, builder: StreamsBuilder, node: str, *, key_serde: str, value_serde: str) -> None:
        self._builder = builder
        self.node = node
        self.key_serde = key_serde
        self.value_serde = value_serde

    def to_stream(self, *, name: str | None = None) -> KStream:
        """The table's updates as a KStream of ``(key, new value)`` records."""
        node = self._builder._add("to_stream", name, "KTABLE-TOSTREAM-", input=self.node)
        return KStream(self._builder, node, key_serde=self.key_serde, value_serde=self.value_serde, key_changed=False)
