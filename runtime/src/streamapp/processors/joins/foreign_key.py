"""The foreign-key table-table join (KIP-213): ``left.join(right, joiner, foreign_key_extractor=fn)``.

The left table's rows join the right table's row whose key is ``fn(left value)``. As in Kafka Streams
(``org.apache.kafka.streams.kstream.internals.foreignkeyjoin``) the two tables need not be co-partitioned; the
join is a protocol over two internal topics:

1. ``FkSubscriptionSendProcessor`` (the left table's sub-topology, Kafka's ``SubscriptionSendProcessorSupplier``):
   each left update sends *subscriptions* keyed by foreign key to the subscription registration topic, which is
   co-partitioned with the right table: a subscription for the new foreign key and, when the foreign key changed, a
   delete of the old one. Each carries an ``Instruction``, the murmur3 hash of the new left value and the left key.
2. ``FkSubscriptionJoinProcessor`` (the right table's sub-topology, Kafka's ``SubscriptionReceiveProcessorSupplier``
   + ``SubscriptionJoinProcessorSupplier`` + ``ForeignTableJoinProcessorSupplier``): keeps the subscriptions by
   ``(foreign key, left key)`` and answers each with the right value; a right update answers every subscription of
   its key. Answers (*responses*) go, keyed by left key, to the subscription response topic, co-partitioned with
   the left table, into the partition of the left record's task (the subscription's primary partition, Kafka's
   ``defaultForeignResponseSinkPartitioner``), whatever partitioner wrote the left table's topic.
3. ``FkResponseJoinProcessor`` (the left table's sub-topology, Kafka's ``ResponseJoinProcessorSupplier``): drops a
   response whose hash is not the hash of the current left value (the left row changed since: a newer response is
   on its way), else emits ``joiner(left, right)`` for the left key; a delete when the right value is absent and
   the join is inner, or the left row is gone.

Only the final joined table is guaranteed (KIP-213): intermediate results depend on how the two sub-topologies
interleave. The wire formats of subscriptions and responses are this runtime's own (``Subscription``,
``Response``), not Kafka's ``SubscriptionWrapperSerde`` bytes.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from streamapp.drop_reasons import NULL_KEY_OR_VALUE
from streamapp.murmur3 import hash128_bytes
from streamapp.processors.base import BuildContext, Change, FamilyBuilders, Processor, ProcessorMetrics, ToPartition
from streamapp.processors.joins.tables import Joiner, JoinProcessor
from streamapp.serdes import Serde, serde_for
from streamapp.state.stores import TypedKeyValueStore
from streamapp.state.window_store import BufferedRangeReader, LoggedBytesStore
from streamapp.topology.nodes.joins import FkResponseJoinNode, FkSubscriptionJoinNode, FkSubscriptionSendNode

__all__ = [
    "BUILDERS",
    "FkResponseJoinProcessor",
    "FkSubscriptionJoinProcessor",
    "FkSubscriptionSendProcessor",
    "Instruction",
    "Response",
    "Subscription",
    "combined_key",
]

log = logging.getLogger(__name__)

BUILDERS = FamilyBuilders("joins")

_VERSION = 0
_LENGTH = struct.Struct(">i")


class Instruction(IntEnum):
    """What the right side does with a subscription (Kafka's ``SubscriptionWrapper.Instruction``, same values)."""

    DELETE_KEY_AND_PROPAGATE = 0
    """Unsubscribe, and answer with no right value (the left row went, or its foreign key became null)."""
    DELETE_KEY_NO_PROPAGATE = 1
    """Unsubscribe the old foreign key of a row whose foreign key changed; no answer (the new one answers)."""
    PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE = 2
    """Subscribe and always answer, with ``None`` when the right table has no row (left joins, changed keys)."""
    PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE = 3
    """Subscribe and answer only when the right table has a row (an inner join's insert or same-key update)."""


@dataclass(frozen=True, slots=True)
class Subscription:
    """A subscription record's value: ``value_hash`` (16 bytes, ``None`` for a deleted left row), ``instruction``,
    ``primary_key`` (the left key, serialized) and ``primary_partition`` (the partition of the left record's task,
    where the response goes back: Kafka's ``SubscriptionWrapper`` version 1). Bytes: version, instruction, hash
    flag, [hash], 4-byte partition, primary key."""

    value_hash: bytes | None
    instruction: Instruction
    primary_key: bytes
    primary_partition: int

    def to_bytes(self) -> bytes:
        head = bytes((_VERSION, self.instruction, 0 if self.value_hash is None else 1))
        return head + (self.value_hash or b"") + _LENGTH.pack(self.primary_partition) + self.primary_key

    @classmethod
    def from_bytes(cls, data: bytes) -> Subscription:
        """ValueError for another version."""
        _check_version(data)
        instruction, has_hash = Instruction(data[1]), data[2] == 1
        offset = 19 if has_hash else 3
        partition = _LENGTH.unpack_from(data, offset)[0]
        return cls(data[3:19] if has_hash else None, instruction, data[offset + 4 :], partition)


@dataclass(frozen=True, slots=True)
class Response:
    """A response record's value: the subscription's ``value_hash`` and ``foreign_value`` (the right value,
    serialized; ``None``: no right row); it goes to the subscription's primary partition (``ToPartition``). Bytes:
    version, hash flag, [hash], value flag, [value]."""

    value_hash: bytes | None
    foreign_value: bytes | None

    def to_bytes(self) -> bytes:
        hashed = b"\x00" if self.value_hash is None else b"\x01" + self.value_hash
        valued = b"\x00" if self.foreign_value is None else b"\x01" + self.foreign_value
        return bytes((_VERSION,)) + hashed + valued

    @classmethod
    def from_bytes(cls, data: bytes) -> Response:
        """ValueError for another version."""
        _check_version(data)
        has_hash = data[1] == 1
        offset = 18 if has_hash else 2
        value_hash = data[2:18] if has_hash else None
        return cls(value_hash, data[offset + 1 :] if data[offset] == 1 else None)


def _check_version(data: bytes) -> None:
    if not data or data[0] != _VERSION:
        raise ValueError(f"foreign-key join record of unknown version {data[:1]!r} (expected {_VERSION})")


def combined_key(foreign_key: bytes, primary_key: bytes = b"") -> bytes:
    """The subscription store's key (Kafka's ``CombinedKeySchema``): 4-byte big-endian length of the foreign key,
    the foreign key, the left key. With the default ``primary_key`` it is the prefix of every subscription of
    ``foreign_key``."""
    return _LENGTH.pack(len(foreign_key)) + foreign_key + primary_key


def _prefix_end(prefix: bytes) -> bytes:
    """The smallest key after every key that starts with ``prefix`` (a combined-key prefix never is all 0xff)."""
    stripped = prefix.rstrip(b"\xff")
    return stripped[:-1] + bytes((stripped[-1] + 1,))


class FkSubscriptionSendProcessor:
    """Kafka's ``SubscriptionSendProcessorSupplier``: a left update ``Change(new, old)`` becomes subscriptions
    ``(foreign key bytes, Subscription bytes)``.

    Inner join: a new row subscribes its foreign key (``PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE``, or, when the foreign
    key changed, ``DELETE_KEY_NO_PROPAGATE`` to the old one then ``PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE`` to the
    new one); a null new foreign key is dropped (``null_key_or_value``) after ``DELETE_KEY_AND_PROPAGATE`` to the old
    one; a deleted row sends ``DELETE_KEY_AND_PROPAGATE`` to its old foreign key. Left join: nothing for a delete of
    an absent row; else ``DELETE_KEY_NO_PROPAGATE`` to a changed old key, then ``PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE``
    to the new key (``None`` for a delete or a null foreign key: the answer deletes or null-joins the row).
    """

    def __init__(
        self,
        extractor: Callable[[Any, Any], Any],
        left_join: bool,
        serdes: tuple[Serde, Serde, Serde],
        children: Sequence[Processor],
        metrics: ProcessorMetrics,
        name: str = "",
        partition: int = 0,
    ) -> None:
        """``extractor``: ``fn(left key, left value) -> foreign key``; ``serdes``: the left key's, the left value's
        (hashed) and the foreign key's; ``partition``: the task's (the left records')."""
        self.name = name
        self._partition = partition
        self._extractor = extractor
        self._left_join = left_join
        self._key_serde, self._value_serde, self._foreign_key_serde = serdes
        self._children = tuple(children)
        self._metrics = metrics

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        change = value if isinstance(value, Change) else Change(value, None)
        new, old = change.new_value, change.old_value
        if new is None and old is None and self._left_join:
            return  # an idempotent delete of a row that was not there
        old_fk = None if old is None else self._foreign_key(key, old)
        new_fk = None if new is None else self._foreign_key(key, new)
        value_hash = None if new is None else hash128_bytes(self._value_serde.serialize(new) or b"")
        primary_key = self._key_serde.serialize(key) or b""

        def send(foreign_key: bytes | None, instruction: Instruction) -> None:
            subscription = Subscription(value_hash, instruction, primary_key, self._partition).to_bytes()
            for child in self._children:
                child.process(foreign_key, subscription, timestamp)

        if self._left_join:
            if old_fk is not None and old_fk != new_fk:
                send(old_fk, Instruction.DELETE_KEY_NO_PROPAGATE)
            send(new_fk, Instruction.PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE)
        elif new is None:
            if old_fk is not None:
                send(old_fk, Instruction.DELETE_KEY_AND_PROPAGATE)
        elif new_fk is None:
            self._metrics.drop(NULL_KEY_OR_VALUE, self.name, "Skipping record due to null foreign key")
            if old_fk is not None:
                send(old_fk, Instruction.DELETE_KEY_AND_PROPAGATE)
        elif old_fk is not None and old_fk != new_fk:
            send(old_fk, Instruction.DELETE_KEY_NO_PROPAGATE)
            send(new_fk, Instruction.PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE)
        else:
            send(new_fk, Instruction.PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE)

    def _foreign_key(self, key: Any, value: Any) -> bytes | None:
        """The serialized foreign key of a left row (Kafka compares foreign keys by their bytes)."""
        foreign_key = self._extractor(key, value)
        return None if foreign_key is None else self._foreign_key_serde.serialize(foreign_key)


class FkSubscriptionJoinProcessor(JoinProcessor):
    """The right table's side: Kafka's ``SubscriptionReceiveProcessorSupplier`` and
    ``SubscriptionJoinProcessorSupplier`` (subscriptions, left input) and ``ForeignTableJoinProcessorSupplier``
    (right table updates).

    A subscription with a null foreign key is dropped (``null_key_or_value``) unless it is
    ``PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE``; the ``DELETE_*`` ones delete it from the subscription store, the others
    put it there. It is answered ``(left key bytes, Response bytes)`` with the right value
    (``DELETE_KEY_AND_PROPAGATE``: with ``None``; ``PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE``: only when there is one;
    ``DELETE_KEY_NO_PROPAGATE``: not at all) at the later of the subscription's and the right value's timestamps.
    A right update (null keys dropped) is written to the right store and answers every subscription of its key
    with its new value, at its timestamp.
    """

    def __init__(
        self,
        inputs: tuple[str, str],
        stores: tuple[LoggedBytesStore, TypedKeyValueStore],
        right_value_serde: Serde,
        children: Sequence[Processor],
        metrics: ProcessorMetrics,
        name: str = "",
    ) -> None:
        super().__init__(*inputs, children, metrics, name)
        self._subscriptions, self._right = stores
        self._scan = BufferedRangeReader(self._subscriptions)
        self._right_value_serde = right_value_serde

    def process_left(self, key: Any, value: Any, timestamp: int) -> None:
        subscription = Subscription.from_bytes(value)
        instruction = subscription.instruction
        if key is None and instruction != Instruction.PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE:
            self._drop("null foreign key")
            return
        found = None
        if key is not None:
            store_key = combined_key(key, subscription.primary_key)
            self._scan.note_write(combined_key(key), store_key)
            deleting = instruction in (Instruction.DELETE_KEY_AND_PROPAGATE, Instruction.DELETE_KEY_NO_PROPAGATE)
            self._subscriptions.put(store_key, None if deleting else value)
            found = self._right.get_raw_key(key)
        if instruction == Instruction.DELETE_KEY_NO_PROPAGATE:
            return
        if found is None:
            if instruction == Instruction.PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE:
                return
            self._respond(subscription, None, timestamp)
            return
        right_value, right_timestamp = found
        if instruction == Instruction.DELETE_KEY_AND_PROPAGATE:
            right_value = None
        self._respond(subscription, right_value, max(timestamp, right_timestamp))

    def process_right(self, key: Any, value: Any, timestamp: int) -> None:
        if key is None:
            self._drop("null key")
            return
        new = value.new_value if isinstance(value, Change) else value
        self._right.put(key, new, timestamp)
        prefix = combined_key(self._right.raw_key(key))
        for _, subscription in self._scan.range(prefix, prefix, _prefix_end(prefix)):
            self._respond(Subscription.from_bytes(subscription), new, timestamp)

    def _respond(self, subscription: Subscription, right_value: Any, timestamp: int) -> None:
        """Answer ``subscription``: keyed by its left key, to its primary partition."""
        foreign_value = None if right_value is None else self._right_value_serde.serialize(right_value)
        response = Response(subscription.value_hash, foreign_value).to_bytes()
        self._forward(subscription.primary_key, ToPartition(response, subscription.primary_partition), timestamp)


class FkResponseJoinProcessor(JoinProcessor):
    """The result: Kafka's ``ResponseJoinProcessorSupplier`` then the ``KTableSource`` of ``KTABLE-FK-JOIN-OUTPUT``.

    Left updates go to the left store (null keys dropped), and emit nothing. A response is stale, and dropped
    (logged at debug, not counted: Kafka's trace log), unless its hash is the murmur3 hash of the current left
    value (``None`` when the row is gone). Else the result is ``None`` (a delete) when the response has no right
    value and the join is inner or the left row is gone, otherwise ``joiner(left value or None, right value or
    None)``; it is written to the output store and forwarded as ``Change(result, previous result)`` at the
    response's timestamp.
    """

    def __init__(
        self,
        inputs: tuple[str, str],
        joiner: Joiner,
        left_join: bool,
        stores: tuple[TypedKeyValueStore, TypedKeyValueStore],
        serdes: tuple[Serde, Serde, Serde],
        children: Sequence[Processor],
        metrics: ProcessorMetrics,
        name: str = "",
    ) -> None:
        """``serdes``: the left key's and value's (the left store's), and the right value's."""
        super().__init__(*inputs, children, metrics, name)
        self._joiner = joiner
        self._left_join = left_join
        self._left, self._output = stores
        self._key_serde, self._value_serde, self._right_value_serde = serdes

    def process_left(self, key: Any, value: Any, timestamp: int) -> None:
        if key is None:
            self._drop("null key")
            return
        self._left.put(key, value.new_value if isinstance(value, Change) else value, timestamp)

    def process_right(self, key: Any, value: Any, timestamp: int) -> None:
        response = Response.from_bytes(value)
        current = self._left.get_raw_key(key)
        left_value = None if current is None else current[0]
        current_hash = None if left_value is None else hash128_bytes(self._value_serde.serialize(left_value) or b"")
        if response.value_hash != current_hash:
            log.debug("%s: dropping a foreign-key join response whose left value changed since", self.name)
            return
        if response.foreign_value is None and (not self._left_join or left_value is None):
            result = None
        else:
            right_value = self._right_value_serde.deserialize(response.foreign_value)
            result = self._joiner(left_value, right_value)
        primary_key = self._key_serde.deserialize(key)
        previous = self._output.get(primary_key)
        self._output.put(primary_key, result, timestamp)
        self._forward(primary_key, Change(result, previous), timestamp)


# -- builders (BUILDERS entries) -----------------------------------------------------------------------


@BUILDERS.builds(FkSubscriptionSendNode)
def build_fk_subscription_send(
    node: FkSubscriptionSendNode, children: Sequence[Processor], ctx: BuildContext
) -> Processor:
    key_serde, value_serde = ctx.store_serdes(node.left_store)
    foreign_key_serde = serde_for(node.foreign_key_serde, is_key=True)
    function = ctx.function(node.name, "foreign_key_extractor")
    extractor = function if node.extractor_takes_key else lambda key, value: function(value)
    return FkSubscriptionSendProcessor(
        extractor,
        node.join == "left",
        (key_serde, value_serde, foreign_key_serde),
        children,
        ctx.metrics,
        node.name,
        ctx.partition,
    )


@BUILDERS.builds(FkSubscriptionJoinNode)
def build_fk_subscription_join(
    node: FkSubscriptionJoinNode, children: Sequence[Processor], ctx: BuildContext
) -> Processor:
    subscription, right = node.inputs()
    return FkSubscriptionJoinProcessor(
        (subscription, right),
        (ctx.logged_store(node.subscription_store), ctx.store(node.right_store)),
        ctx.store_serdes(node.right_store)[1],
        children,
        ctx.metrics,
        node.name,
    )


@BUILDERS.builds(FkResponseJoinNode)
def build_fk_response_join(node: FkResponseJoinNode, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    key_serde, value_serde = ctx.store_serdes(node.left_store)
    return FkResponseJoinProcessor(
        (node.left, node.right),
        ctx.function(node.name, "joiner"),
        node.join == "left",
        (ctx.store(node.left_store), ctx.store(node.store)),
        (key_serde, value_serde, serde_for(node.right_value_serde)),
        children,
        ctx.metrics,
        node.name,
    )
