"""KStream: the fluent record-stream DSL over a StreamsBuilder (KGroupedStream and KTable live next door).

Each method records one or more core nodes (``streamapp.topology.nodes``) and returns the next handle.
Serdes are tracked along the chain: a step without an explicit serde keeps the current one (so pass
``key_serde=`` to ``select_key``/``group_by`` when the new key has another type).

Repartitioning follows Kafka Streams: a key-changing step (``select_key``, ``group_by``) marks the stream,
and the next grouping inserts a ``repartition`` node named after the grouping (``Grouped.as``), else after
the count's store, so its topic is ``<applicationId>-<name>-repartition``.
"""

from __future__ import annotations

from typing import Any

from streamapp.dsl.builder import StreamsBuilder, UserFunction
from streamapp.dsl.grouped import KGroupedStream
from streamapp.dsl.tables import KTable

__all__ = ["KGroupedStream", "KStream", "KTable"]


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

    def merge(self, other: KStream, *, name: str | None = None) -> KStream:
        """The records of this stream and ``other`` as one stream (Kafka's ``KStream.merge``).

        Keeps this stream's serdes; the result counts as re-keyed when either input is. Both streams must
        come from co-partitioned topics (else the topology is rejected when partition counts are known).
        """
        node = self._builder._add("merge", name, "KSTREAM-MERGE-", inputs=[self.node, other.node])
        return self._next(node, key_changed=self.key_changed or other.key_changed)

    def join(
        self,
        other: Any,
        *args: Any,
        name: str | None = None,
        store: str | None = None,
        value_serde: str | None = None,
    ) -> KStream:
        """Inner join (``streamapp.dsl.joins``): with a KStream ``join(other, joiner, windows)`` (JoinWindows),
        with a KTable ``join(table, joiner)``, with a GlobalKTable ``join(global_table, key_selector, joiner)``.
        ``joiner(left value, right value)``; a re-keyed stream is repartitioned first."""
        from streamapp.dsl.joins import stream_join

        return stream_join(self, other, "inner", *args, name=name, store=store, value_serde=value_serde)

    def left_join(
        self,
        other: Any,
        *args: Any,
        name: str | None = None,
        store: str | None = None,
        value_serde: str | None = None,
    ) -> KStream:
        """Left join: like ``join``, and every record of this stream without a partner is joined with ``None``."""
        from streamapp.dsl.joins import stream_join

        return stream_join(self, other, "left", *args, name=name, store=store, value_serde=value_serde)

    def outer_join(
        self,
        other: Any,
        *args: Any,
        name: str | None = None,
        store: str | None = None,
        value_serde: str | None = None,
    ) -> KStream:
        """Outer stream-stream join ``outer_join(other, joiner, windows)``: unmatched records of either side
        are joined with ``None`` once their window closed."""
        from streamapp.dsl.joins import stream_join

        return stream_join(self, other, "outer", *args, name=name, store=store, value_serde=value_serde)

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
