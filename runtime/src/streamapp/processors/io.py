"""Where records enter and leave a task: source, sink and repartition.

A ``repartition`` node plays two roles (``streamapp.topology.subtopologies``): in the sub-topology that
writes it, it is a sink to ``<applicationId>-<name>-repartition`` keyed by the new key (the producer's
murmur2 partitioner picks the partition from the serialized key, as Kafka Streams' default partitioner
does); in the sub-topologies that read it, it is a source of that topic.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from streamapp.processors.base import BuildContext, Processor, RecordSender
from streamapp.serdes import Serde, serde_for
from streamapp.topology import NodeBase, RepartitionNode, SinkNode, SourceNode

__all__ = ["RecordSerializationError", "SourceProcessor", "build_repartition", "build_sink", "build_source"]


class SourceProcessor:
    """Deserializes a consumed record's key and value bytes and forwards them.

    The task uses the two halves separately (Kafka's ``RecordDeserializer`` then ``SourceNode``): ``deserialize``
    when the record reaches the head of its partition queue (its timestamp extractor may read the value, and a
    failure goes to the deserialization exception handler), ``forward`` when it is processed.
    """

    def __init__(self, key_serde: Serde, value_serde: Serde, children: Sequence[Processor]) -> None:
        self._key_serde = key_serde
        self._value_serde = value_serde
        self._children = tuple(children)

    def deserialize(self, key: bytes | None, value: bytes | None) -> tuple[Any, Any]:
        """The typed key and value. Raises the serde's error (SerdeError / ValueError)."""
        return self._key_serde.deserialize(key), self._value_serde.deserialize(value)

    def forward(self, key: Any, value: Any, timestamp: int) -> None:
        """Pass an already deserialized record to the children."""
        for child in self._children:
            child.process(key, value, timestamp)

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        typed_key, typed_value = self.deserialize(key, value)
        self.forward(typed_key, typed_value, timestamp)


class RecordSerializationError(ValueError):
    """A sink could not serialize a record (handled by the production exception handler, as Kafka's
    ``ProductionExceptionHandler.handleSerializationException``)."""


class SinkProcessor:
    """Serializes a record and sends it to ``topic``, partitioned by murmur2 of the serialized key."""

    def __init__(self, topic: str, key_serde: Serde, value_serde: Serde, send: RecordSender) -> None:
        self.topic = topic
        self._key_serde = key_serde
        self._value_serde = value_serde
        self._send = send

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        try:
            raw_key, raw_value = self._key_serde.serialize(key), self._value_serde.serialize(value)
        except Exception as exc:
            raise RecordSerializationError(f"cannot serialize a record for topic {self.topic}: {exc}") from exc
        self._send(self.topic, raw_key, raw_value, timestamp)


def build_source(node: NodeBase, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    assert isinstance(node, SourceNode)
    topic = node.topics[0]  # Schema Registry serdes: the writer schema comes from each record's schema id
    return SourceProcessor(serde_for(node.key_serde, topic, is_key=True), serde_for(node.value_serde, topic), children)


def build_sink(node: NodeBase, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    assert isinstance(node, SinkNode) and node.topic is not None  # a topicExtractor sink: processors.routing
    key_serde, value_serde = serde_for(node.key_serde, node.topic, is_key=True), serde_for(node.value_serde, node.topic)
    return SinkProcessor(node.topic, key_serde, value_serde, ctx.send)


def build_repartition(node: NodeBase, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    assert isinstance(node, RepartitionNode)
    topic = ctx.topic_of(node.name)
    key_serde, value_serde = serde_for(node.key_serde, topic, is_key=True), serde_for(node.value_serde, topic)
    if node.name in ctx.source_nodes:
        return SourceProcessor(key_serde, value_serde, children)
    return SinkProcessor(topic, key_serde, value_serde, ctx.send)
