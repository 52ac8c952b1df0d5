"""KTable processors: the table source, filter / map_values of a table, a table's group_by, and the
repartition of a grouped table (whose records carry both values of a ``Change``).

Every value these processors receive and forward is a ``Change(new_value, old_value)``; ``None`` means
absent. Tables always carry old values (Kafka's ``sendOldValues``), so a filter that rejects both values
forwards nothing instead of a defensive tombstone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from streamapp.processors.base import BuildContext, Change, Processor, ProcessorMetrics
from streamapp.processors.io import SinkProcessor, SourceProcessor, build_repartition
from streamapp.serdes import Serde, SerdeError, serde_for
from streamapp.state.stores import TypedKeyValueStore
from streamapp.topology import NodeBase, RepartitionNode
from streamapp.topology.nodes.aggregate import GroupByNode
from streamapp.topology.nodes.io import TableSourceNode
from streamapp.topology.nodes.stateless import FilterNode, FilterNotNode, MapValuesNode

__all__ = [
    "ChangeSerde",
    "GroupByProcessor",
    "TableFilterProcessor",
    "TableMapValuesProcessor",
    "TableSourceProcessor",
    "build_group_by",
    "build_grouped_table_repartition",
    "build_table_filter",
    "build_table_map_values",
    "build_table_source",
]

log = logging.getLogger(__name__)


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
    ) -> None:
        super().__init__(key_serde, value_serde, children)
        self._store = store
        self._metrics = metrics

    def forward(self, key: Any, value: Any, timestamp: int) -> None:
        if key is None:
            self._metrics.dropped_records += 1
            log.warning("Skipping record due to null key (table store %s)", self._store.name)
            return
        old = self._store.get(key)
        self._store.put(key, value)
        change = Change(value, old)
        for child in self._children:
            child.process(key, change, timestamp)


class TableFilterProcessor:
    """Filters both values of a change: a value failing ``keep(key, value)`` becomes ``None``; a change whose
    two values end up ``None`` is not forwarded (Kafka's ``KTableFilter`` with old values sent)."""

    def __init__(self, keep: Callable[[Any, Any], bool], children: Sequence[Processor]) -> None:
        self._keep = keep
        self._children = tuple(children)

    def process(self, key: Any, value: Change, timestamp: int) -> None:
        new = value.new_value if value.new_value is not None and self._keep(key, value.new_value) else None
        old = value.old_value if value.old_value is not None and self._keep(key, value.old_value) else None
        if new is None and old is None:
            return
        change = Change(new, old)
        for child in self._children:
            child.process(key, change, timestamp)


class TableMapValuesProcessor:
    """Maps both values of a change with ``mapper(value)``; ``None`` stays ``None`` (Kafka's
    ``KTableMapValues``)."""

    def __init__(self, mapper: Callable[[Any], Any], children: Sequence[Processor]) -> None:
        self._mapper = mapper
        self._children = tuple(children)

    def process(self, key: Any, value: Change, timestamp: int) -> None:
        new = self._mapper(value.new_value) if value.new_value is not None else None
        old = self._mapper(value.old_value) if value.old_value is not None else None
        change = Change(new, old)
        for child in self._children:
            child.process(key, change, timestamp)


class GroupByProcessor:
    """Re-keys a table update by ``selector(key, value) -> (new_key, new_value)`` (Kafka's
    ``KTableRepartitionMap``).

    Both pairs on one key: one ``Change(new', old')``; otherwise ``Change(None, old')`` under the old key
    first, then ``Change(new', None)`` under the new key. Pairs with a null key or value are skipped.
    Raises ValueError for a null input key (a table key is never null).
    """

    def __init__(self, selector: Callable[[Any, Any], tuple[Any, Any]], children: Sequence[Processor]) -> None:
        self._selector = selector
        self._children = tuple(children)

    def process(self, key: Any, value: Change, timestamp: int) -> None:
        if key is None:
            raise ValueError("record key for the grouping KTable must not be null")
        new_pair = self._pair(key, value.new_value)
        old_pair = self._pair(key, value.old_value)
        if new_pair is not None and old_pair is not None and new_pair[0] == old_pair[0]:
            self._forward(new_pair[0], Change(new_pair[1], old_pair[1]), timestamp)
            return
        if old_pair is not None:
            self._forward(old_pair[0], Change(None, old_pair[1]), timestamp)
        if new_pair is not None:
            self._forward(new_pair[0], Change(new_pair[1], None), timestamp)

    def _pair(self, key: Any, value: Any) -> tuple[Any, Any] | None:
        if value is None:
            return None
        new_key, new_value = self._selector(key, value)
        if new_key is None or new_value is None:
            return None
        return new_key, new_value

    def _forward(self, key: Any, change: Change, timestamp: int) -> None:
        for child in self._children:
            child.process(key, change, timestamp)


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


def build_table_source(node: NodeBase, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    assert isinstance(node, TableSourceNode)
    topic = node.topics[0]
    key_serde, value_serde = serde_for(node.key_serde, topic, is_key=True), serde_for(node.value_serde, topic)
    return TableSourceProcessor(key_serde, value_serde, ctx.store(node.store), children, ctx.metrics)


def build_table_filter(node: NodeBase, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    """A filter / filter_not of a table."""
    assert isinstance(node, FilterNode | FilterNotNode)
    predicate = ctx.function(node.name, "predicate")
    if isinstance(node, FilterNotNode):
        return TableFilterProcessor(lambda k, v: not predicate(k, v), children)
    return TableFilterProcessor(lambda k, v: bool(predicate(k, v)), children)


def build_table_map_values(node: NodeBase, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    assert isinstance(node, MapValuesNode)
    return TableMapValuesProcessor(ctx.function(node.name, "mapper"), children)


def build_group_by(node: NodeBase, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    assert isinstance(node, GroupByNode)
    return GroupByProcessor(ctx.function(node.name, "selector"), children)


def build_grouped_table_repartition(node: NodeBase, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    """A repartition node: of a grouped table, its values are ``Change`` records (``ChangeSerde``); of a
    stream, the plain repartition of ``streamapp.processors.io``."""
    assert isinstance(node, RepartitionNode)
    if ctx.kind_of(node.input) != "grouped_table":
        return build_repartition(node, children, ctx)
    topic = ctx.topic_of(node.name)
    key_serde, value_serde = (
        serde_for(node.key_serde, topic, is_key=True),
        ChangeSerde(serde_for(node.value_serde, topic)),
    )
    if node.name in ctx.source_nodes:
        return SourceProcessor(key_serde, value_serde, children)
    return SinkProcessor(topic, key_serde, value_serde, ctx.send)
