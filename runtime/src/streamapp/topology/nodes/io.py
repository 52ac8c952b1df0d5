"""The ``io`` family: where records enter and leave a topology (Kafka's source and sink nodes).

=============  =====================================================  ======================================
type           parameters                                             semantics (Kafka Streams class)
=============  =====================================================  ======================================
source         topics, keySerde, valueSerde, timestampExtractor       records of the topics (SourceNode)
table          topics: [t], store, keySerde, valueSerde               KTable from a topic (KTableSource)
to_table       input (a stream), store                                KTable from a stream (KStream.toTable,
                                                                      KIP-523; KTableSource)
sink           input, topic | topicExtractor, keySerde, valueSerde    writes to an external topic (SinkNode)
repartition    input, keySerde, valueSerde, partitions (optional),    through topic
               dropNullKeys (optional)                                ``<applicationId>-<name>-repartition``
global_table   topic, store, keySerde, valueSerde (no inputs)         GlobalKTable (GlobalKTableImpl)
=============  =====================================================  ======================================

A ``global_table`` belongs to no sub-topology: every worker reads all partitions of its topic into a global
store (no changelog: the topic is the changelog), bootstrapped before any task processes; only a
``stream_global_join`` reads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from streamapp.topology.document import SerdeName, check_serde
from streamapp.topology.errors import TopologyError
from streamapp.topology.names import check_name
from streamapp.topology.nodes.base import (
    GLOBAL_TABLE_KIND,
    FunctionRef,
    NodeBase,
    repartition_topic_suffix,
    store_type_problem,
)
from streamapp.topology.timestamps import TimestampExtractorSpec

__all__ = [
    "GlobalTableNode",
    "RepartitionNode",
    "SinkNode",
    "SourceNode",
    "TableSourceNode",
    "ToTableNode",
]


class SourceNode(NodeBase):
    """Reads the records of one or more external topics. ``timestampExtractor`` (optional): where each record's
    event time comes from (``streamapp.topology.timestamps``; default the record timestamp)."""

    type: Literal["source"] = "source"
    topics: list[str] = Field(min_length=1)
    key_serde: SerdeName = "bytes"
    value_serde: SerdeName = "bytes"
    timestamp_extractor: TimestampExtractorSpec | None = None

    _serdes = field_validator("key_serde", "value_serde")(check_serde)


class TableSourceNode(SourceNode):
    """A KTable read from one topic (Kafka's ``StreamsBuilder.table``, ``KTableSource``), materialized in
    key-value store ``store``.

    Per record: a null key is dropped (dropped-records metric); a null value (tombstone) deletes the key;
    forwards ``Change(new, old)`` with the store's previous value. The store has its own changelog
    ``<applicationId>-<store>-changelog`` (Kafka's behaviour without ``topology.optimization=all``, which would
    reuse the source topic as the changelog; we do not).

    With a ``versioned`` store (KIP-889/914, Kafka's ``Materialized.as(versionedStoreSupplier)``) each record is
    put as the version at its timestamp, out-of-order updates included, and forwarded unless it is older than
    the history retention (``streamapp.processors.io.VersionedTableSourceProcessor``). Such a table feeds only
    ``to_stream`` and ``stream_table_join`` nodes (``VERSIONED_TABLE_CHILDREN``): the versioned semantics of
    Kafka's table filters, mappers, table joins and re-groupings (``isLatest``) are not implemented, so they are
    refused rather than run with latest-value semantics.
    """

    type: Literal["table"] = "table"  # type: ignore[assignment]
    topics: list[str] = Field(min_length=1, max_length=1)
    store: str
    output: ClassVar[str | None] = "table"

    def stores(self) -> list[str]:
        return [self.store]

    def check_graph(self, nodes: Mapping[str, NodeBase], stores: Mapping[str, Any]) -> str | None:
        spec = stores.get(self.store)
        if spec is None or spec.type == "key_value":
            return None
        if spec.type != "versioned":
            return store_type_problem(spec, "key_value")
        for other in nodes.values():
            if self.name in other.inputs() and other.type not in VERSIONED_TABLE_CHILDREN:
                return (
                    f"{other.type} node '{other.name}' reads versioned table '{self.name}'; a versioned table feeds "
                    f"only {' and '.join(sorted(VERSIONED_TABLE_CHILDREN))} nodes"
                )
        return None


VERSIONED_TABLE_CHILDREN = frozenset({"to_stream", "stream_table_join"})
"""Node types that may read a versioned table (``TableSourceNode``)."""


class ToTableNode(NodeBase):
    """A KTable of a stream (Kafka's ``KStream.toTable``, KIP-523: a ``KTableSource`` on the stream), materialized in
    key-value store ``store``. Per record, as ``table``: a null key is dropped (dropped-records metric); a null value
    deletes the key; forwards ``Change(new, old)`` with the store's previous value. Its input must be partitioned by
    its key: the DSL puts a ``repartition`` in front of a re-keyed stream (``KStream.to_table``)."""

    type: Literal["to_table"] = "to_table"
    input: str
    store: str
    requires_copartitioned_input: ClassVar[bool] = True
    accepts: ClassVar[frozenset[str]] = frozenset({"stream"})
    output: ClassVar[str | None] = "table"

    def stores(self) -> list[str]:
        return [self.store]


class SinkNode(NodeBase):
    """Writes every record to an external topic, partitioned by murmur2 of the serialized key.

    The topic is ``topic``, or per record ``topicExtractor(key, value) -> topic name`` (Kafka's
    ``TopicNameExtractor``; such topics must exist, they are not in ``sink_topics()``). Exactly one is set.
    """

    type: Literal["sink"] = "sink"
    input: str
    output: ClassVar[str | None] = None
    topic: str | None = None
    topic_extractor: FunctionRef | None = None
    key_serde: SerdeName = "bytes"
    value_serde: SerdeName = "bytes"

    _serdes = field_validator("key_serde", "value_serde")(check_serde)

    @model_validator(mode="after")
    def _one_topic(self) -> SinkNode:
        if (self.topic is None) == (self.topic_extractor is None):
            raise ValueError("set exactly one of 'topic' and 'topicExtractor'")
        return self


class RepartitionNode(NodeBase):
    """Writes to and reads back from the internal topic ``<applicationId>-<name>-repartition``.

    It ends the upstream sub-topology (as its sink) and starts the downstream one (as its source).
    ``partitions`` fixes the topic's partition count; without it the count is the maximum partition count
    of the upstream sub-topology's source topics (Kafka Streams' rule).

    ``dropNullKeys``: records with a null key are dropped before the repartition topic (not written, not counted
    as dropped records), as by the filter Kafka Streams puts in front of a DSL repartition topic
    (``KStreamImpl.createRepartitionedSource``, turned into ``key != null`` by
    ``InternalStreamsBuilder.rewriteRepartitionNodes`` unless a join that takes null keys is downstream, KIP-962).
    The DSL sets it to true by that rule (``streamapp.dsl.repartitions``); absent or false: every record is written.
    """

    type: Literal["repartition"] = "repartition"
    input: str
    output: ClassVar[str | None] = "input"
    accepts: ClassVar[frozenset[str]] = frozenset({"stream", "grouped_table"})
    key_serde: SerdeName = "bytes"
    value_serde: SerdeName = "bytes"
    partitions: int | None = Field(default=None, ge=1)
    drop_null_keys: bool | None = None
    internal_topic: str | None = None
    """The topic's name without the application id, when it is not ``<name>-repartition``: the foreign-key join's
    ``<name>-subscription-registration-topic`` and ``<name>-subscription-response-topic`` (Kafka's
    ``KTableImpl.doJoinOnForeignKey``)."""

    _serdes = field_validator("key_serde", "value_serde")(check_serde)

    @property
    def topic_suffix(self) -> str:
        """The repartition topic name without the application id prefix."""
        return self.internal_topic if self.internal_topic is not None else repartition_topic_suffix(self.name)

    def check_graph(self, nodes: Mapping[str, NodeBase], stores: Mapping[str, Any]) -> str | None:
        if self.internal_topic is None:
            return None
        try:
            check_name("topic", self.internal_topic)
        except TopologyError as exc:
            return str(exc)
        for other in nodes.values():
            if (
                other.name != self.name
                and isinstance(other, RepartitionNode)
                and other.topic_suffix == self.topic_suffix
            ):
                return f"internalTopic '{self.internal_topic}' is also the topic of repartition node '{other.name}'"
        return None


class GlobalTableNode(NodeBase):
    """A GlobalKTable: the latest value per key of every partition of ``topic``, in global store ``store``.

    Kafka's ``StreamsBuilder.globalTable``. A null key is skipped, a null value deletes the key.
    """

    type: Literal["global_table"] = "global_table"
    topic: str
    store: str
    key_serde: SerdeName = "bytes"
    value_serde: SerdeName = "bytes"
    output: ClassVar[str | None] = GLOBAL_TABLE_KIND
    accepts: ClassVar[frozenset[str]] = frozenset()

    _serdes = field_validator("key_serde", "value_serde")(check_serde)

    def stores(self) -> list[str]:
        return [self.store]

    def check_graph(self, nodes: Mapping[str, NodeBase], stores: Mapping[str, Any]) -> str | None:
        try:
            check_name("topic", self.topic)
        except TopologyError as exc:
            return str(exc)
        for other in nodes.values():
            if other.name == self.name:
                continue
            if self.topic in _topics_read(other):
                return f"topic '{self.topic}' is already read by {other.type} node '{other.name}'"
            if self.store in other.stores():
                return f"global store '{self.store}' is also used by node '{other.name}'; join the global table instead"
        spec = stores.get(self.store)
        if spec is not None:
            problem = store_type_problem(spec, "key_value")
            if problem is None and (spec.key_serde, spec.value_serde) != (self.key_serde, self.value_serde):
                problem = (
                    f"store '{self.store}' has serdes {spec.key_serde}/{spec.value_serde} but the global table's "
                    f"topic has {self.key_serde}/{self.value_serde}"
                )
            return problem
        return None


def _topics_read(node: NodeBase) -> list[str]:
    """External topics a node reads (source and table nodes: ``topics``; a global table: ``topic``)."""
    topics = getattr(node, "topics", None)
    if isinstance(topics, list):
        return topics
    topic = getattr(node, "topic", None)
    return [topic] if isinstance(node, GlobalTableNode) and isinstance(topic, str) else []
