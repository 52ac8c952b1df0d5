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

import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from streamapp.serdes import SERDE_NAMES

_FUNCTION_REF = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


def _check_function_ref(value: str) -> str:
    if not _FUNCTION_REF.match(value):
        raise ValueError(f"must be a function reference 'package.module:function', got '{value}'")
    return value


FunctionRef = Annotated[str, AfterValidator(_check_function_ref)]
"""A user function referenced by import path: ``"package.module:qualname"``."""

SerdeName = Annotated[str, Field(min_length=1)]


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


def _check_serde(value: str) -> str:
    if value not in SERDE_NAMES:
        raise ValueError(f"unknown serde '{value}'; known serdes: {', '.join(SERDE_NAMES)}")
    return value


class NodeBase(_Model):
    """Fields every node has. ``type`` is the discriminator; subclasses narrow it to one literal."""

    name: str
    type: str

    produces_table: ClassVar[bool] = False
    """True for nodes whose output is a KTable (changelog stream of a store), e.g. ``count``."""
    accepts_table: ClassVar[bool] = False
    """True for nodes whose input must be a KTable (``to_stream``); all others need a KStream."""
    changes_key: ClassVar[bool] = False
    """True when the node's output key differs from its input key (repartition needed before grouping)."""
    requires_copartitioned_input: ClassVar[bool] = False
    """True for stateful nodes that need their input partitioned by the current key (``count``)."""

    def inputs(self) -> list[str]:
        """Names of the upstream nodes (empty for a source). Multi-input nodes (merge, join) override."""
        upstream = getattr(self, "input", None)
        return [upstream] if upstream else []

    def stores(self) -> list[str]:
        """Names of the state stores this node reads or writes."""
        return []

    def functions(self) -> dict[str, str]:
        """User-function references of this node, by parameter name."""
        return {}


class SourceNode(NodeBase):
    """Reads the records of one or more external topics."""

    type: Literal["source"] = "source"
    topics: list[str] = Field(min_length=1)
    key_serde: SerdeName = "bytes"
    value_serde: SerdeName = "bytes"

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
    """Counts records per key in a key-value store; emits ``(key, new count)`` per input record.

    Records with a null key are dropped (Kafka Streams does the same). The output is a KTable.
    """

    type: Literal["count"] = "count"
    input: str
    store: str
    produces_table: ClassVar[bool] = True
    requires_copartitioned_input: ClassVar[bool] = True

    def stores(self) -> list[str]:
        return [self.store]


class ToStreamNode(NodeBase):
    """Turns a KTable's updates into a KStream of ``(key, new value)`` records."""

    type: Literal["to_stream"] = "to_stream"
    input: str
    accepts_table: ClassVar[bool] = True


class SinkNode(NodeBase):
    """Writes every record to an external topic, partitioned by murmur2 of the serialized key."""

    type: Literal["sink"] = "sink"
    input: str
    topic: str
    key_serde: SerdeName = "bytes"
    value_serde: SerdeName = "bytes"

    _serdes = field_validator("key_serde", "value_serde")(_check_serde)


Node = SourceNode | FilterNode | MapValuesNode | SelectKeyNode | RepartitionNode | CountNode | ToStreamNode | SinkNode

NODE_TYPES: dict[str, type[NodeBase]] = {
    "source": SourceNode,
    "filter": FilterNode,
    "map_values": MapValuesNode,
    "select_key": SelectKeyNode,
    "repartition": RepartitionNode,
    "count": CountNode,
    "to_stream": ToStreamNode,
    "sink": SinkNode,
}
"""The closed set of core node types, by their ``type`` value."""


class StoreSpec(_Model):
    """A state store owned by the node(s) that name it.

    Its changelog topic is ``<applicationId>-<name>-changelog`` (compacted), with one partition per task of
    the sub-topology that owns it.
    """

    name: str
    type: Literal["key_value"] = "key_value"
    key_serde: SerdeName = "bytes"
    value_serde: SerdeName = "bytes"

    _serdes = field_validator("key_serde", "value_serde")(_check_serde)


def repartition_topic_suffix(node_name: str) -> str:
    """``<node>-repartition``: the repartition topic's name without the application id."""
    return f"{node_name}-repartition"


def changelog_topic_suffix(store_name: str) -> str:
    """``<store>-changelog``: the changelog topic's name without the application id."""
    return f"{store_name}-changelog"


def node_to_dict(node: NodeBase) -> dict[str, Any]:
    """The camelCase document form of a node (``None`` fields left out)."""
    return node.model_dump(by_alias=True, exclude_none=True, mode="json")
