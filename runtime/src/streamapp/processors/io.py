"""The ``io`` family's processors: where records enter and leave a task.

- ``source``: deserializes consumed records; ``table``: also materializes them in the table's store and
  forwards ``Change(new, old)`` (Kafka's ``KTableSource``); ``to_table``: the same on a stream's typed records
  (Kafka's ``KStream.toTable``).
- ``sink``: serializes and sends to the node's topic, or to the topic its ``topicExtractor`` picks per record; a
  ``ToPartition`` value goes to the partition it names.
- ``repartition`` plays two roles (``streamapp.topology.subtopologies``): in the sub-topology that writes it,
  it is a sink to ``<applicationId>-<name>-repartition`` keyed by the new key (the producer's murmur2
  partitioner picks the partition from the serialized key, as Kafka Streams' default partitioner does); in the
  sub-topologies that read it, it is a source of that topic. A grouped table's repartition carries both values
  of a ``Change`` (``ChangeSerde``, Kafka's ``ChangedSerializer``).
- ``global_table``: no task processor (the global consumer updates its store).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from streamapp.drop_reasons import LATE, NULL_KEY_OR_VALUE
from streamapp.processors.base import (
    BuildContext,
    Change,
    FamilyBuilders,
    Processor,
    ProcessorMetrics,
    RecordContext,
    RecordSender,
    ToPartition,
    forward_on_flush,
)
from streamapp.serdes import Serde, SerdeError, serde_for
from streamapp.state.stores import TypedKeyValueStore
from streamapp.state.versioned import PUT_RETURN_CODE_NOT_PUT, VersionedKeyValueStore
from streamapp.topology.nodes.io import (
    GlobalTableNode,
    RepartitionNode,
    SinkNode,
    SourceNode,
    TableSourceNode,
    ToTableNode,
)

__all__ = [
    "BUILDERS",
    "ChangeSerde",
    "NullKeyFilter",
    "RecordSerializationError",
    "SinkProcessor",
    "SourceProcessor",
    "StreamToTableProcessor",
    "TableSourceProcessor",
    "TopicExtractorSinkProcessor",
]

log = logging.getLogger(__name__)

BUILDERS = FamilyBuilders("io")


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
    """Serializes a record with the sink's own serdes (Kafka's ``Produced``, whatever types flow upstream) and
    sends it to ``topic``, partitioned by murmur2 of the serialized key, with the headers of ``record_context``
    (the record being processed, or the one a flushed cache entry or suppressed update came from: Kafka's
    ``SinkNode`` writes ``record.headers()``).

    ``node`` / ``parent``: the sink's name and the node whose output it writes, named by a serialization error.
    """

    def __init__(
        self,
        topic: str,
        key_serde: Serde,
        value_serde: Serde,
        send: RecordSender,
        *,
        node: str | None = None,
        parent: str | None = None,
        record_context: RecordContext | None = None,
    ) -> None:
        self.topic = topic
        self._key_serde = key_serde
        self._value_serde = value_serde
        self._send = send
        self._node = node
        self._parent = parent
        self._context = record_context if record_context is not None else RecordContext()

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        if type(value) is ToPartition:
            self._send_to(value.partition, key, value.value, timestamp)
            return
        try:
            raw_key, raw_value = self._key_serde.serialize(key), self._value_serde.serialize(value)
        except Exception as exc:
            raise RecordSerializationError(self._mismatch(key, value, exc)) from exc
        headers = self._context.headers
        if headers:
            self._send(self.topic, raw_key, raw_value, timestamp, headers=headers)
        else:
            self._send(self.topic, raw_key, raw_value, timestamp)

    def _send_to(self, partition: int, key: Any, value: Any, timestamp: int) -> None:
        """Send to ``partition`` (a ``ToPartition`` value, ``streamapp.processors.base``)."""
        try:
            raw_key, raw_value = self._key_serde.serialize(key), self._value_serde.serialize(value)
        except Exception as exc:
            raise RecordSerializationError(self._mismatch(key, value, exc)) from exc
        self._send(
            self.topic, raw_key, raw_value, timestamp, headers=self._context.headers or None, partition=partition
        )

    def _mismatch(self, key: Any, value: Any, exc: Exception) -> str:
        """Kafka's ``SinkNode`` ClassCastException message: the topic, the serdes, the actual types, which
        part failed, the node that produced the record, and where to put the right serde."""
        try:
            self._key_serde.serialize(key)
            part = "value"
        except Exception:
            part = "key"
        where = f"sink '{self._node}' " if self._node else ""
        producer = f" produced by node '{self._parent}'" if self._parent else ""
        return (
            f"{where}cannot serialize the {part} of a record{producer} for topic {self.topic}: a serializer "
            f"(key: {self._key_serde.name} / value: {self._value_serde.name}) is not compatible with the actual "
            f"key or value type (key type: {type(key).__name__} / value type: {type(value).__name__}): {exc}. "
            "Give the sink its serdes (to(..., key_serde=..., value_serde=...), Kafka's Produced), or the step "
            "that changed the type its key_serde= / value_serde= (without one a step keeps its input's serde; "
            "Kafka Streams would take default.key.serde / default.value.serde: docs/serdes.md)"
        )


class TopicExtractorSinkProcessor(SinkProcessor):
    """A sink whose topic is ``extractor(key, value)`` per record (Kafka's ``TopicNameExtractor``).

    Raises ValueError (a processing error) when the extractor returns anything but a non-empty string.
    """

    def __init__(
        self,
        extractor: Callable[[Any, Any], Any],
        key_serde: Serde,
        value_serde: Serde,
        send: RecordSender,
        *,
        node: str | None = None,
        parent: str | None = None,
        record_context: RecordContext | None = None,
    ) -> None:
        super().__init__("", key_serde, value_serde, send, node=node, parent=parent, record_context=record_context)
        self._extractor = extractor

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        topic = self._extractor(key, value)
        if not isinstance(topic, str) or not topic:
            raise ValueError(f"topic extractor returned {topic!r}, not a topic name")
        self.topic = topic
        super().process(key, value, timestamp)


class TableSourceProcessor(SourceProcessor):
    """Materializes a topic as a table in ``store`` and forwards ``Change(new, old)`` (Kafka's ``KTableSource``).

    A null key is dropped (dropped-records metric); a null value deletes the key. Deserialization is the
    plain source's (``deserialize`` / ``forward`` halves, see ``SourceProcessor``).
    """

    def __init__(
        self,
        key_serde: Serde,
        value_serde: Serde,
        store: TypedKeyValueStore,
        children: Sequence[Processor],
        metrics: ProcessorMetrics,
        node: str = "",
    ) -> None:
        super().__init__(key_serde, value_serde, children)
        self._store = store
        self._metrics = metrics
        self._node = node or store.name
        self._cached = forward_on_flush(store, self._children)

    def forward(self, key: Any, value: Any, timestamp: int) -> None:
        if key is None:
            store = f"store=[{self._store.name}]"
            self._metrics.drop(NULL_KEY_OR_VALUE, self._node, "Skipping record due to null key", store)
            return
        raw_key = self._store.raw_key(key)  # serialized once for the read and the write
        found = self._store.get_raw_key(raw_key)
        old = None if found is None else found[0]
        self._store.put_raw_key(raw_key, value, timestamp)
        if self._cached:  # the record cache forwards on flush (Kafka's KTableSource with caching on)
            return
        change = Change(value, old)
        for child in self._children:
            child.process(key, change, timestamp)


class VersionedTableSourceProcessor(SourceProcessor):
    """A table materialized in a ``versioned`` store (Kafka's ``KTableSource`` over a ``VersionedKeyValueStore``,
    KIP-914).

    A null key is dropped; otherwise the record is put as the version at its timestamp (a null value: a tombstone
    version) and ``Change(new, latest value before the put)`` is forwarded, an out-of-order update too (Kafka
    forwards it with ``isLatest`` false; the only nodes a versioned table feeds here, ``to_stream`` and the
    stream-table join, treat both alike). A record older than the history retention is not put and not forwarded
    (Kafka's ``PUT_RETURN_CODE_NOT_PUT``), counted as dropped (reason ``late``, Kafka's store records its
    dropped-records sensor). Never cached (Kafka's versioned stores have no caching layer).
    """

    def __init__(
        self, serdes: tuple[Serde, Serde], store: VersionedKeyValueStore, children: Sequence[Processor], **drops: Any
    ) -> None:
        """``serdes``: the topic's key and value serdes; ``drops``: ``metrics`` (``ProcessorMetrics``) and
        ``node`` (this node's name), which count and name dropped records."""
        super().__init__(*serdes, children)
        self._store = store
        self._metrics: ProcessorMetrics = drops["metrics"]
        self._node: str = drops.get("node") or store.name

    def forward(self, key: Any, value: Any, timestamp: int) -> None:
        store = f"store=[{self._store.name}]"
        if key is None:
            self._metrics.drop(NULL_KEY_OR_VALUE, self._node, "Skipping record due to null key", store)
            return
        latest = self._store.get(key)
        if self._store.put(key, value, timestamp) == PUT_RETURN_CODE_NOT_PUT:
            self._metrics.drop(LATE, self._node, "Skipping record for expired put", store)
            return
        change = Change(value, None if latest is None else latest.value)
        for child in self._children:
            child.process(key, change, timestamp)


class StreamToTableProcessor(TableSourceProcessor):
    """A stream materialized as a table (Kafka's ``KStream.toTable``, KIP-523, which puts a ``KTableSource`` on the
    stream): ``TableSourceProcessor.forward`` on records that arrive typed from the stream's last node, so there is
    nothing to deserialize (the serdes it is built with are never used)."""

    process = TableSourceProcessor.forward


class ChangeSerde:
    """Serializes a ``Change`` in Kafka's ``ChangedSerializer`` layout, around an inner value serde:

    ``old bytes + 0x00`` | ``new bytes + 0x01`` | ``zigzag varint(len(new)) + new + old + 0x02``.
    A change with both values ``None`` cannot be serialized (SerdeError); ``None`` bytes deserialize to ``None``.
    """

    def __init__(self, inner: Serde) -> None:
        self._inner = inner
        self.name = f"change({inner.name})"

    def serialize(self, obj: Any) -> bytes | None:
        if obj is None:
            return None
        if not isinstance(obj, Change):
            raise SerdeError(f"grouped-table repartition expects a Change, got {type(obj).__name__}")
        new = self._inner.serialize(obj.new_value) if obj.new_value is not None else None
        old = self._inner.serialize(obj.old_value) if obj.old_value is not None else None
        if new is not None and old is not None:
            return _zigzag_varint(len(new)) + new + old + b"\x02"
        if new is not None:
            return new + b"\x01"
        if old is not None:
            return old + b"\x00"
        raise SerdeError("both old and new values of a Change are null; nothing to serialize")

    def deserialize(self, data: bytes | None) -> Any:
        if data is None:
            return None
        if not data:
            raise SerdeError("empty Change record")
        flag, body = data[-1], data[:-1]
        if flag == 0:
            return Change(None, self._inner.deserialize(body))
        if flag == 1:
            return Change(self._inner.deserialize(body), None)
        if flag == 2:
            length, start = _read_zigzag_varint(body)
            new, old = body[start : start + length], body[start + length :]
            return Change(self._inner.deserialize(new), self._inner.deserialize(old))
        raise SerdeError(f"unknown Change encoding flag {flag}")


def _zigzag_varint(value: int) -> bytes:
    encoded = (value << 1) ^ (value >> 31)
    out = bytearray()
    while encoded & ~0x7F:
        out.append((encoded & 0x7F) | 0x80)
        encoded >>= 7
    out.append(encoded)
    return bytes(out)


def _read_zigzag_varint(data: bytes) -> tuple[int, int]:
    """``(value, bytes read)`` of a zigzag varint at the start of ``data``; SerdeError when truncated."""
    raw = shift = 0
    for i, byte in enumerate(data[:5]):
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (raw >> 1) ^ -(raw & 1), i + 1
        shift += 7
    raise SerdeError("malformed varint length in a Change record")


@BUILDERS.builds(SourceNode)
def build_source(node: SourceNode, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    topic = node.topics[0]  # Schema Registry serdes: the writer schema comes from each record's schema id
    return SourceProcessor(serde_for(node.key_serde, topic, is_key=True), serde_for(node.value_serde, topic), children)


@BUILDERS.builds(TableSourceNode)
def build_table_source(node: TableSourceNode, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    topic = node.topics[0]
    key_serde, value_serde = serde_for(node.key_serde, topic, is_key=True), serde_for(node.value_serde, topic)
    if ctx.store_type(node.store) == "versioned":
        versioned = ctx.versioned_store(node.store)
        return VersionedTableSourceProcessor(
            (key_serde, value_serde), versioned, children, metrics=ctx.metrics, node=node.name
        )
    return TableSourceProcessor(key_serde, value_serde, ctx.store(node.store), children, ctx.metrics, node.name)


@BUILDERS.builds(ToTableNode)
def build_to_table(node: ToTableNode, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    typed = serde_for("bytes")  # the records arrive typed: nothing is deserialized
    return StreamToTableProcessor(typed, typed, ctx.store(node.store), children, ctx.metrics, node.name)


@BUILDERS.builds(SinkNode)
def build_sink(node: SinkNode, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    """A sink to a fixed topic, or to the topic its extractor picks per record."""
    if node.topic_extractor is not None:
        return TopicExtractorSinkProcessor(
            ctx.function(node.name, "topic_extractor"),
            serde_for(node.key_serde),
            serde_for(node.value_serde),
            ctx.send,
            node=node.name,
            parent=node.input,
            record_context=ctx.record_context,
        )
    assert node.topic is not None  # exactly one of topic and topicExtractor is set (SinkNode)
    key_serde, value_serde = serde_for(node.key_serde, node.topic, is_key=True), serde_for(node.value_serde, node.topic)
    return SinkProcessor(
        node.topic,
        key_serde,
        value_serde,
        ctx.send,
        node=node.name,
        parent=node.input,
        record_context=ctx.record_context,
    )


@BUILDERS.builds(RepartitionNode)
def build_repartition(node: RepartitionNode, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    """The sink or the source of the repartition topic; of a grouped table, its values are ``Change`` records
    (``ChangeSerde``). With ``dropNullKeys`` the sink side drops null-key records (``NullKeyFilter``)."""
    topic = ctx.topic_of(node.name)
    key_serde = serde_for(node.key_serde, topic, is_key=True)
    value_serde: Serde = serde_for(node.value_serde, topic)
    if ctx.kind_of(node.input) == "grouped_table":
        value_serde = ChangeSerde(value_serde)
    if node.name in ctx.source_nodes:
        return SourceProcessor(key_serde, value_serde, children)
    sink = SinkProcessor(
        topic, key_serde, value_serde, ctx.send, node=node.name, parent=node.input, record_context=ctx.record_context
    )
    return NullKeyFilter(sink) if node.drop_null_keys else sink


class NullKeyFilter:
    """Forwards to ``sink`` only the records whose key is not null: the ``key != null`` filter Kafka Streams puts in
    front of a DSL repartition topic (``KStreamFilter``: a filtered record is neither forwarded nor counted in
    dropped-records)."""

    def __init__(self, sink: Processor) -> None:
        self._sink = sink

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        if key is not None:
            self._sink.process(key, value, timestamp)


@BUILDERS.builds(GlobalTableNode)
def build_global_table(node: GlobalTableNode, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    """A ``global_table`` has no processor in a task (the global consumer updates its store); building one
    is a bug in the caller."""
    raise TypeError(f"node '{node.name}': a global_table belongs to no sub-topology and has no task processor")
