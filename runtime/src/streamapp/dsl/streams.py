"""KStream: the fluent record-stream DSL over a StreamsBuilder (KGroupedStream and KTable live next door).

Each method records one or more core nodes (``streamapp.topology.nodes``) and returns the next handle.
Serdes are tracked along the chain: a step without an explicit serde keeps the current one, also when its
function changes the type (so pass ``key_serde=`` to ``select_key``/``group_by`` when the new key has another type,
``value_serde=`` to ``map_values`` & co. or to the sink). Kafka Streams would take ``default.key.serde`` /
``default.value.serde`` there instead; docs/adr/0010-serdes-after-type-changing-steps.md says why we keep the
upstream serde, and a sink that cannot write a value names the node that produced it.

Null keys: a repartition drops them before its topic unless a join that takes null keys is downstream, decided
when the topology is built (``streamapp.dsl.repartitions``, Kafka's KIP-962 rule).

Repartitioning follows Kafka Streams: a key-changing step (``select_key``, ``group_by``) marks the stream,
and the next grouping inserts a ``repartition`` node named after the grouping (``Grouped.as``), else after
the count's store, so its topic is ``<applicationId>-<name>-repartition``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from streamapp.dsl.builder import StreamsBuilder, UserFunction
from streamapp.dsl.grouped import KGroupedStream
from streamapp.dsl.tables import KTable
from streamapp.topology import TopologyError

if TYPE_CHECKING:
    from streamapp.dsl.branched import BranchedKStream

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

    def filter_not(self, predicate: UserFunction, *, name: str | None = None) -> KStream:
        """Drop the records for which ``predicate(key, value)`` is true (Kafka's ``filterNot``)."""
        node = self._builder._add("filter_not", name, "KSTREAM-FILTER-", input=self.node, predicate=predicate)
        return self._next(node)

    def map(
        self,
        mapper: UserFunction,
        *,
        name: str | None = None,
        key_serde: str | None = None,
        value_serde: str | None = None,
    ) -> KStream:
        """Replace each record by ``mapper(key, value) -> (key, value)``; a later grouping repartitions."""
        node = self._builder._add("map", name, "KSTREAM-MAP-", input=self.node, mapper=mapper)
        return self._next(node, key_serde=key_serde, value_serde=value_serde, key_changed=True)

    def flat_map(
        self,
        mapper: UserFunction,
        *,
        name: str | None = None,
        key_serde: str | None = None,
        value_serde: str | None = None,
    ) -> KStream:
        """Replace each record by the pairs of ``mapper(key, value) -> iterable of (key, value)``; re-keys."""
        node = self._builder._add("flat_map", name, "KSTREAM-FLATMAP-", input=self.node, mapper=mapper)
        return self._next(node, key_serde=key_serde, value_serde=value_serde, key_changed=True)

    def flat_map_values(
        self, mapper: UserFunction, *, name: str | None = None, value_serde: str | None = None
    ) -> KStream:
        """Replace each record by ``(key, v)`` for every ``v`` of ``mapper(value)``; keeps the key."""
        node = self._builder._add("flat_map_values", name, "KSTREAM-FLATMAPVALUES-", input=self.node, mapper=mapper)
        return self._next(node, value_serde=value_serde)

    def peek(self, action: UserFunction, *, name: str | None = None) -> KStream:
        """Call ``action(key, value)`` for each record (a side effect) and pass the record on."""
        node = self._builder._add("peek", name, "KSTREAM-PEEK-", input=self.node, action=action)
        return self._next(node)

    def foreach(self, action: UserFunction, *, name: str | None = None) -> None:
        """Call ``action(key, value)`` for each record (a terminal step)."""
        self._builder._add("foreach", name, "KSTREAM-FOREACH-", input=self.node, action=action)

    def split(self, *, name: str | None = None) -> BranchedKStream:
        """Route records to branches (Kafka's ``split(Named.as(name))``): chain ``.branch(predicate,
        name=...)`` calls and end with ``.default_branch()`` or ``.no_default_branch()``, which return the
        branches as ``{<split name><branch name or index>: KStream}``."""
        from streamapp.dsl.branched import BranchedKStream

        node = self._builder._add("split", name, "KSTREAM-BRANCH-", input=self.node)
        return BranchedKStream(self, node)

    def repartition(
        self,
        *,
        name: str | None = None,
        partitions: int | None = None,
        key_serde: str | None = None,
        value_serde: str | None = None,
    ) -> KStream:
        """Write to and read back from ``<applicationId>-<name>-repartition`` (Kafka's ``repartition``,
        ``Repartitioned.as(name).withNumberOfPartitions(partitions)``): partitions the stream by its current
        key, with ``partitions`` partitions (default: the upstream source topics' maximum)."""
        node = self._builder._add(
            "repartition",
            name,
            "KSTREAM-REPARTITION-",
            input=self.node,
            key_serde=key_serde or self.key_serde,
            value_serde=value_serde or self.value_serde,
            partitions=partitions,
        )
        return self._next(node, key_serde=key_serde, value_serde=value_serde, key_changed=False)

    def process(
        self,
        processor: UserFunction,
        *,
        stores: Sequence[str] = (),
        name: str | None = None,
        key_serde: str | None = None,
        value_serde: str | None = None,
    ) -> KStream:
        """Run a Processor API processor (a ``streamapp.processor.Processor`` subclass, module-level) on each
        record, with the state stores named in ``stores`` (declare them with ``builder.add_state_store``).
        Its output counts as re-keyed (Kafka's ``KStream.process``)."""
        node = self._processor_node("process", "KSTREAM-PROCESSOR-", processor, stores, name)
        return self._next(node, key_serde=key_serde, value_serde=value_serde, key_changed=True)

    def to_table(self, store: str | None = None, *, name: str | None = None, value_serde: str | None = None) -> KTable:
        """This stream as a KTable (Kafka's ``KStream.toTable``, KIP-523): each record upserts its key, a null value
        deletes it, a null key is dropped. Materialized in key-value store ``store`` (default ``<name>-store``, else
        ``KSTREAM-TOTABLE-STATE-STORE-<n>``) with its own changelog, like ``StreamsBuilder.table``.

        A re-keyed stream is repartitioned first, through ``<applicationId>-<store>-repartition`` (Kafka names that
        topic after the toTable processor; streamapp after the store, as for an aggregation)."""
        builder = self._builder
        node_name = name if name is not None else builder._new_name("KSTREAM-TOTABLE-")
        store_name = store or (
            f"{name}-store" if name is not None else builder._new_name("KSTREAM-TOTABLE-STATE-STORE-")
        )
        key_serde, value_serde = self.key_serde, value_serde or self.value_serde
        source = self.node
        if self.key_changed:
            source = builder._add(
                "repartition", store_name, "", input=self.node, key_serde=key_serde, value_serde=value_serde
            )
        builder._claim(node_name)
        builder._add_store(store_name, key_serde, value_serde)
        builder._add("to_table", node_name, "", input=source, store=store_name)
        return KTable(builder, node_name, key_serde=key_serde, value_serde=value_serde)

    def process_values(
        self,
        processor: UserFunction,
        *,
        stores: Sequence[str] = (),
        name: str | None = None,
        value_serde: str | None = None,
    ) -> KStream:
        """Run a ``streamapp.processor.FixedKeyProcessor`` (module-level class) on each record, with the state stores
        named in ``stores`` (Kafka's ``KStream.processValues``, KIP-820): it forwards ``record.with_value(...)``
        copies and cannot change keys, so the stream keeps its partitioning (no repartition before a grouping)."""
        node = self._processor_node("process_values", "KSTREAM-PROCESSVALUES-", processor, stores, name)
        return self._next(node, value_serde=value_serde)

    def _processor_node(
        self, node_type: str, prefix: str, processor: UserFunction, stores: Sequence[str], name: str | None
    ) -> str:
        return self._builder._add(node_type, name, prefix, input=self.node, processor=processor, stores=list(stores))

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
        grace_ms: int | None = None,
    ) -> KStream:
        """Inner join (``streamapp.dsl.joins``): with a KStream ``join(other, joiner, windows)`` (JoinWindows),
        with a KTable ``join(table, joiner)``, with a GlobalKTable ``join(global_table, key_selector, joiner)``.
        ``joiner(left value, right value)``; a re-keyed stream is repartitioned first. ``grace_ms``: Kafka's
        ``Joined.withGracePeriod`` (KIP-923) for a join with a versioned KTable."""
        from streamapp.dsl.joins import stream_join

        return stream_join(
            self, other, "inner", *args, name=name, store=store, value_serde=value_serde, grace_ms=grace_ms
        )

    def left_join(
        self,
        other: Any,
        *args: Any,
        name: str | None = None,
        store: str | None = None,
        value_serde: str | None = None,
        grace_ms: int | None = None,
    ) -> KStream:
        """Left join: like ``join``, and every record of this stream without a partner is joined with ``None``."""
        from streamapp.dsl.joins import stream_join

        return stream_join(
            self, other, "left", *args, name=name, store=store, value_serde=value_serde, grace_ms=grace_ms
        )

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
        topic: str | Callable[..., Any] | None = None,
        *,
        topic_extractor: UserFunction | None = None,
        name: str | None = None,
        key_serde: str | None = None,
        value_serde: str | None = None,
    ) -> None:
        """Write every record to ``topic`` (a terminal step), or to the topic ``topic_extractor(key, value)``
        names per record (Kafka's ``TopicNameExtractor``; a function may also be passed as ``topic``).
        Extracted topics must exist. Raises TopologyError unless exactly one of them is given."""
        if callable(topic):
            topic, topic_extractor = None, topic
        if (topic is None) == (topic_extractor is None):
            raise TopologyError("to(): pass a topic name or a topic_extractor function, not both or neither")
        self._builder._add(
            "sink",
            name,
            "KSTREAM-SINK-",
            input=self.node,
            topic=topic,
            topic_extractor=topic_extractor,
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
