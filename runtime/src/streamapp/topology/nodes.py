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
count         input, store                                           KTable: emits (key, new count)
to_stream     input (a table)                                        the table's changes as a stream
sink          input, topic, keySerde, valueSerde                     writes to an external topic
============  =====================================================  ==============================
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

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
from streamapp.topology.joins import (
    GlobalTableNode,
    StreamGlobalJoinNode,
    StreamStreamJoinNode,
    StreamTableJoinNode,
    TableTableJoinNode,
)
from streamapp.topology.stream_nodes import MergeNode
from streamapp.topology.timestamps import TimestampExtractorSpec
from streamapp.topology.windows import SuppressNode, WindowedAggregateNode, WindowedCountNode, WindowedReduceNode

__all__ = [
    "NODE_TYPES",
    "CountNode",
    "FilterNode",
    "FunctionRef",
    "Kind",
    "MapValuesNode",
    "MergeNode",
    "Node",
    "NodeBase",
    "RepartitionNode",
    "SelectKeyNode",
    "SerdeName",
    "SinkNode",
    "SourceNode",
    "StoreSpec",
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


class FilterNode(NodeBase):
    """Keeps the records for which ``predicate(key, value)`` is truthy."""

    type: Literal["filter"] = "filter"
    input: str
    predicate: FunctionRef

    def functions(self) -> dict[str, str]:
        return {"predicate": self.predicate}


class MapValuesNode(NodeBase):
    """Replaces each value by ``mapper(value)``; the key (and so the partitioning) is unchanged."""

    type: Literal["map_values"] = "map_values"
    input: str
    mapper: FunctionRef

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
    """Writes every record to an external topic, partitioned by murmur2 of the serialized key."""

    type: Literal["sink"] = "sink"
    input: str
    output: ClassVar[str | None] = None
    topic: str
    key_serde: SerdeName = "bytes"
    value_serde: SerdeName = "bytes"

    _serdes = field_validator("key_serde", "value_serde")(_check_serde)


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
