"""The closed set of core node types and state stores of a topology description.

Every DSL operation lowers to one of these node types; the runtime (``streamapp.processors``) and later
the replay implement exactly this set. A node names its upstream node in ``input`` (sources have none).
Keys in documents are camelCase (``keySerde``); attributes are snake_case (``key_serde``).

Node types and their parameters (function references are ``"module:qualname"`` strings):

============  =====================================================  ==============================
type          parameters                                             semantics
============  =====================================================  ==============================
source        topics, keySerde, valueSerde                           records of the topics
filter        input, predicate ``fn(key, value) -> bool``            keeps records where fn is true
map_values    input, mapper ``fn(value) -> value``                   new value, same key
select_key    input, mapper ``fn(key, value) -> key``                new key, same value
repartition   input, keySerde, valueSerde, partitions (optional)     through topic
                                                                     ``<applicationId>-<name>-repartition``
count         input, store                                           KTable of counts (Change values)
to_stream     input (a table)                                        the table's changes as a stream
sink          input, topic | topicExtractor, keySerde, valueSerde    writes to an external topic
============  =====================================================  ==============================

Issue-3 additions (``streamapp.topology.stream_nodes``, ``.table_nodes``; joins and windows in their modules):

===============  ==================================================  =====================================
type             parameters                                          semantics (Kafka Streams class)
===============  ==================================================  =====================================
merge            inputs: [a, b, ...]                                 union of streams (KStream.merge)
filter_not       input, predicate                                    drops records where fn is true
map              input, mapper ``fn(k, v) -> (k, v)``                new record (KStreamMap)
flat_map         input, mapper ``fn(k, v) -> [(k, v), ...]``         0..n records (KStreamFlatMap)
flat_map_values  input, mapper ``fn(v) -> [v, ...]``                 0..n values, same key
peek             input, action ``fn(k, v)``                          side effect, forwards unchanged
foreach          input, action ``fn(k, v)``                          side effect, terminal
split / branch   split: input; branch: input (a split), predicate    first matching branch (KStreamBranch)
                 (none = default branch, last)
process          input, processor ``module:Class``, stores           Processor API node
table            topics: [t], store, keySerde, valueSerde            KTable from a topic (KTableSource)
group_by         input (table), selector ``fn(k, v) -> (k, v)``      KTableRepartitionMap
reduce           input, store, reducer | adder + subtractor          KStreamReduce / KTableReduce
aggregate        input, store, initializer, aggregator | adder +     KStreamAggregate / KTableAggregate
                 subtractor
===============  ==================================================  =====================================

``filter``, ``filter_not`` and ``map_values`` work on streams and tables (a table's output is a table of
``Change`` values); ``count`` / ``reduce`` / ``aggregate`` on grouped streams and grouped tables.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from streamapp.topology.joins import (
    GlobalTableNode,
    StreamGlobalJoinNode,
    StreamStreamJoinNode,
    StreamTableJoinNode,
    TableTableJoinNode,
)
from streamapp.topology.node_base import (
    DescriptionModel,
    FunctionRef,
    Kind,
    NodeBase,
    SerdeName,
    changelog_topic_suffix,
    node_to_dict,
    repartition_topic_suffix,
)
from streamapp.topology.node_base import check_serde as _check_serde
from streamapp.topology.stream_nodes import (
    BranchNode,
    FilterNotNode,
    FlatMapNode,
    FlatMapValuesNode,
    ForeachNode,
    MapNode,
    MergeNode,
    PeekNode,
    ProcessNode,
    SplitNode,
)
from streamapp.topology.table_nodes import AggregateNode, GroupByNode, ReduceNode
from streamapp.topology.timestamps import TimestampExtractorSpec
from streamapp.topology.windows import SuppressNode, WindowedAggregateNode, WindowedCountNode, WindowedReduceNode

__all__ = [
    "NODE_TYPES",
    "AggregateNode",
    "BranchNode",
    "CountNode",
    "FilterNode",
    "FilterNotNode",
    "FlatMapNode",
    "FlatMapValuesNode",
    "ForeachNode",
    "FunctionRef",
    "GroupByNode",
    "Kind",
    "MapNode",
    "MapValuesNode",
    "MergeNode",
    "Node",
    "NodeBase",
    "PeekNode",
    "ProcessNode",
    "ReduceNode",
    "RepartitionNode",
    "SelectKeyNode",
    "SerdeName",
    "SinkNode",
    "SourceNode",
    "SplitNode",
    "StoreSpec",
    "TableSourceNode",
    "ToStreamNode",
    "changelog_topic_suffix",
    "node_to_dict",
    "repartition_topic_suffix",
]


class SourceNode(NodeBase):
    """Reads the records of one or more external topics. ``timestampExtractor`` (optional): where each record's
    event time comes from (``streamapp.topology.timestamps``; default the record timestamp)."""

    type: Literal["source"] = "source"
    topics: list[str] = Field(min_length=1)
    key_serde: SerdeName = "bytes"
    value_serde: SerdeName = "bytes"
    timestamp_extractor: TimestampExtractorSpec | None = None

    _serdes = field_validator("key_serde", "value_serde")(_check_serde)


class TableSourceNode(SourceNode):
    """A KTable read from one topic (Kafka's ``StreamsBuilder.table``, ``KTableSource``), materialized in
    key-value store ``store``.

    Per record: a null key is dropped (dropped-records metric); a null value (tombstone) deletes the key;
    forwards ``Change(new, old)`` with the store's previous value. The store has its own changelog
    ``<applicationId>-<store>-changelog`` (Kafka's behaviour without ``topology.optimization=all``, which would
    reuse the source topic as the changelog; we do not).
    """

    type: Literal["table"] = "table"  # type: ignore[assignment]
    topics: list[str] = Field(min_length=1, max_length=1)
    store: str
    output: ClassVar[str | None] = "table"

    def stores(self) -> list[str]:
        return [self.store]


class FilterNode(NodeBase):
    """Keeps the records for which ``predicate(key, value)`` is truthy."""

    type: Literal["filter"] = "filter"
    input: str
    predicate: FunctionRef
    output: ClassVar[str | None] = "input"
    accepts: ClassVar[frozenset[str]] = frozenset({"stream", "table"})

    def functions(self) -> dict[str, str]:
        return {"predicate": self.predicate}


class MapValuesNode(NodeBase):
    """Replaces each value by ``mapper(value)``; the key (and so the partitioning) is unchanged."""

    type: Literal["map_values"] = "map_values"
    input: str
    mapper: FunctionRef
    output: ClassVar[str | None] = "input"
    accepts: ClassVar[frozenset[str]] = frozenset({"stream", "table"})

    def functions(self) -> dict[str, str]:
        return {"mapper": self.mapper}


class SelectKeyNode(NodeBase):
    """Replaces each key by ``mapper(key, value)``; a later grouping needs a repartition."""

    type: Literal["select_key"] = "select_key"
    input: str
    mapper: FunctionRef
    changes_key: ClassVar[bool] = True

    def functions(self) -> dict[str, str]:
        return {"mapper": self.mapper}


class RepartitionNode(NodeBase):
    """Writes to and reads back from the internal topic ``<applicationId>-<name>-repartition``.

    It ends the upstream sub-topology (as its sink) and starts the downstream one (as its source).
    ``partitions`` fixes the topic's partition count; without it the count is the maximum partition count
    of the upstream sub-topology's source topics (Kafka Streams' rule).
    """

    type: Literal["repartition"] = "repartition"
    input: str
    output: ClassVar[str | None] = "input"
    accepts: ClassVar[frozenset[str]] = frozenset({"stream", "grouped_table"})
    key_serde: SerdeName = "bytes"
    value_serde: SerdeName = "bytes"
    partitions: int | None = Field(default=None, ge=1)

    _serdes = field_validator("key_serde", "value_serde")(_check_serde)

    @property
    def topic_suffix(self) -> str:
        """The repartition topic name without the application id prefix."""
        return repartition_topic_suffix(self.name)


class CountNode(NodeBase):
    """Counts records per key in a key-value store; the output is a KTable of counts.

    Emits ``Change(new count, old count)`` per counted record (old ``None`` for a new key). Records with a
    null key or value are dropped and counted in the dropped-records metric (Kafka's ``KStreamAggregate``).
    """

    type: Literal["count"] = "count"
    input: str
    store: str
    output: ClassVar[str | None] = "table"
    accepts: ClassVar[frozenset[str]] = frozenset({"stream", "grouped_table"})
    requires_copartitioned_input: ClassVar[bool] = True

    def stores(self) -> list[str]:
        return [self.store]


class ToStreamNode(NodeBase):
    """Turns a KTable's updates into a KStream of ``(key, new value)`` records (a tombstone ``(key, None)``
    when the key was deleted), Kafka's ``KTableImpl.toStream``."""

    type: Literal["to_stream"] = "to_stream"
    input: str
    accepts: ClassVar[frozenset[str]] = frozenset({"table"})


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

    _serdes = field_validator("key_serde", "value_serde")(_check_serde)

    @model_validator(mode="after")
    def _one_topic(self) -> SinkNode:
        if (self.topic is None) == (self.topic_extractor is None):
            raise ValueError("set exactly one of 'topic' and 'topicExtractor'")
        return self

    def functions(self) -> dict[str, str]:
        return {"topic_extractor": self.topic_extractor} if self.topic_extractor is not None else {}


Node = (
    SourceNode
    | FilterNode
    | MapValuesNode
    | SelectKeyNode
    | RepartitionNode
    | CountNode
    | ToStreamNode
    | SinkNode
    | MergeNode
    | FilterNotNode
    | MapNode
    | FlatMapNode
    | FlatMapValuesNode
    | PeekNode
    | ForeachNode
    | SplitNode
    | BranchNode
    | ProcessNode
    | TableSourceNode
    | GroupByNode
    | ReduceNode
    | AggregateNode
    | GlobalTableNode
    | StreamGlobalJoinNode
    | StreamTableJoinNode
    | TableTableJoinNode
    | StreamStreamJoinNode
    | WindowedCountNode
    | WindowedReduceNode
    | WindowedAggregateNode
    | SuppressNode
)

NODE_TYPES: dict[str, type[NodeBase]] = {
    "source": SourceNode,
    "filter": FilterNode,
    "map_values": MapValuesNode,
    "select_key": SelectKeyNode,
    "repartition": RepartitionNode,
    "count": CountNode,
    "to_stream": ToStreamNode,
    "sink": SinkNode,
    "merge": MergeNode,
    "filter_not": FilterNotNode,
    "map": MapNode,
    "flat_map": FlatMapNode,
    "flat_map_values": FlatMapValuesNode,
    "peek": PeekNode,
    "foreach": ForeachNode,
    "split": SplitNode,
    "branch": BranchNode,
    "process": ProcessNode,
    "table": TableSourceNode,
    "group_by": GroupByNode,
    "reduce": ReduceNode,
    "aggregate": AggregateNode,
    "global_table": GlobalTableNode,
    "stream_global_join": StreamGlobalJoinNode,
    "stream_table_join": StreamTableJoinNode,
    "table_table_join": TableTableJoinNode,
    "stream_stream_join": StreamStreamJoinNode,
    "windowed_count": WindowedCountNode,
    "windowed_reduce": WindowedReduceNode,
    "windowed_aggregate": WindowedAggregateNode,
    "suppress": SuppressNode,
}
"""The closed set of core node types, by their ``type`` value."""


class StoreSpec(DescriptionModel):
    """A state store owned by the node(s) that name it.

    Its changelog topic is ``<applicationId>-<name>-changelog`` (compacted), with one partition per task of
    the sub-topology that owns it.

    ``window`` and ``session`` stores (``streamapp.state.window_store`` / ``session_store``) need
    ``retentionMs`` (how long windows are kept after the store's stream time passes them, ms); their
    changelogs are ``compact,delete`` with ``retention.ms`` = retention + 1 day. A window store also has
    ``windowSizeMs`` (the ``end - start`` of its windows) and may ``retainDuplicates`` (join buffers).
    """

    name: str
    type: Literal["key_value", "window", "session"] = "key_value"
    key_serde: SerdeName = "bytes"
    value_serde: SerdeName = "bytes"
    retention_ms: int | None = Field(default=None, ge=1)
    window_size_ms: int | None = Field(default=None, ge=0)
    retain_duplicates: bool | None = None

    _serdes = field_validator("key_serde", "value_serde")(_check_serde)

    @model_validator(mode="after")
    def _check_windowed_fields(self) -> StoreSpec:
        if self.type == "key_value":
            extra = [f for f in ("retention_ms", "window_size_ms", "retain_duplicates") if getattr(self, f) is not None]
            if extra:
                raise ValueError(f"'{to_camel(extra[0])}' applies only to window and session stores")
        elif self.retention_ms is None:
            raise ValueError(f"a {self.type} store needs 'retentionMs'")
        if self.type == "window" and self.window_size_ms is None:
            raise ValueError("a window store needs 'windowSizeMs'")
        if self.type == "session" and (self.window_size_ms is not None or self.retain_duplicates is not None):
            raise ValueError("'windowSizeMs' and 'retainDuplicates' apply only to window stores")
        return self
