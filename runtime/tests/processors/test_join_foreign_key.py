"""The foreign-key join's processors (``streamapp.processors.joins.foreign_key``), one at a time, wired by hand
where the driver would go through the two internal topics: Kafka's ``SubscriptionSendProcessorSupplier``,
``SubscriptionReceive/JoinProcessorSupplier``, ``ForeignTableJoinProcessorSupplier`` and
``ResponseJoinProcessorSupplier``. The race the hash check exists for (a response for a left value that changed
since) cannot happen on the driver, which processes each record to the end; it is made here."""

from __future__ import annotations

from typing import Any

import pytest
from join_helpers import Collect, logged, pair
from streamapp.drop_reasons import NULL_KEY_OR_VALUE
from streamapp.kafka.types import TopicPartition
from streamapp.murmur3 import hash128_bytes
from streamapp.processors.base import Change, ProcessorMetrics
from streamapp.processors.joins.foreign_key import (
    FkResponseJoinProcessor,
    FkSubscriptionJoinProcessor,
    FkSubscriptionSendProcessor,
    Instruction,
    Response,
    Subscription,
    combined_key,
)
from streamapp.serdes import serde_for
from streamapp.state.memory import InMemoryKeyValueStore
from streamapp.state.stores import TypedKeyValueStore
from streamapp.state.timestamped import TimestampedChangeLoggingKeyValueStore

STRING, JSON = serde_for("string"), serde_for("json")


def typed(name: str) -> TypedKeyValueStore:
    """A timestamped store, as the task opens the join's table stores (``TIMESTAMPED_NODE_TYPES``)."""
    inner = TimestampedChangeLoggingKeyValueStore(
        InMemoryKeyValueStore(name), TopicPartition(f"{name}-c", 0), lambda: 0
    )
    return TypedKeyValueStore(inner, STRING, JSON)


def customer_of(order: Any) -> Any:
    return order.get("customer")


def send(left_join: bool) -> tuple[FkSubscriptionSendProcessor, Collect, ProcessorMetrics]:
    out, metrics = Collect(), ProcessorMetrics()
    serdes = (STRING, JSON, STRING)
    processor = FkSubscriptionSendProcessor(lambda k, v: customer_of(v), left_join, serdes, [out], metrics, "send", 5)
    return processor, out, metrics


def sent(out: Collect) -> list[tuple[Any, Instruction, bytes | None]]:
    """``(foreign key, instruction, hash)`` of each subscription sent."""
    return [
        (None if key is None else key.decode(), sub.instruction, sub.value_hash)
        for key, value, _ in out.records
        for sub in [Subscription.from_bytes(value)]
    ]


def value_hash(value: Any) -> bytes:
    return hash128_bytes(JSON.serialize(value) or b"")


OLD, NEW = {"customer": "c1"}, {"customer": "c2"}


def test_inner_send_unsubscribes_a_changed_foreign_key_and_asks_the_new_one_to_answer_even_without_a_match() -> None:
    processor, out, _ = send(left_join=False)
    processor.process("o1", Change(OLD, None), 1)
    processor.process("o1", Change({**OLD, "n": 2}, OLD), 2)  # same foreign key
    processor.process("o1", Change(NEW, {**OLD, "n": 2}), 3)

    assert sent(out) == [
        ("c1", Instruction.PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE, value_hash(OLD)),
        ("c1", Instruction.PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE, value_hash({**OLD, "n": 2})),
        ("c1", Instruction.DELETE_KEY_NO_PROPAGATE, value_hash(NEW)),
        ("c2", Instruction.PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE, value_hash(NEW)),
    ]
    subscriptions = {Subscription.from_bytes(value) for _, value, _ in out.records}
    assert {(sub.primary_key, sub.primary_partition) for sub in subscriptions} == {(b"o1", 5)}


def test_inner_send_drops_a_null_foreign_key_after_deleting_the_old_subscription_and_deletes_on_tombstones() -> None:
    processor, out, metrics = send(left_join=False)
    processor.process("o1", Change({"customer": None}, OLD), 1)
    processor.process("o2", Change({"customer": None}, None), 2)
    processor.process("o3", Change(None, NEW), 3)
    processor.process("o4", Change(None, None), 4)

    assert sent(out) == [
        ("c1", Instruction.DELETE_KEY_AND_PROPAGATE, value_hash({"customer": None})),
        ("c2", Instruction.DELETE_KEY_AND_PROPAGATE, None),
    ]
    assert metrics.dropped[NULL_KEY_OR_VALUE] == 2


def test_left_send_always_asks_for_an_answer_with_a_null_foreign_key_for_deletes_and_missing_keys() -> None:
    processor, out, metrics = send(left_join=True)
    processor.process("o1", Change({"customer": None}, OLD), 1)
    processor.process("o2", Change(None, NEW), 2)
    processor.process("o3", Change(None, None), 3)  # nothing to delete: nothing sent
    processor.process("o4", Change(NEW, NEW), 4)

    assert sent(out) == [
        ("c1", Instruction.DELETE_KEY_NO_PROPAGATE, value_hash({"customer": None})),
        (None, Instruction.PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE, value_hash({"customer": None})),
        ("c2", Instruction.DELETE_KEY_NO_PROPAGATE, None),
        (None, Instruction.PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE, None),
        ("c2", Instruction.PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE, value_hash(NEW)),
    ]
    assert not metrics.dropped


def test_a_key_value_extractor_reads_the_left_key_too() -> None:
    """KIP-1104's ``ForeignKeyExtractor.fromBiFunction``: the foreign key may come from the left key."""
    out = Collect()
    processor = FkSubscriptionSendProcessor(
        lambda key, value: key.split("/")[0], False, (STRING, JSON, STRING), [out], ProcessorMetrics()
    )
    processor.process("c7/o1", Change({"n": 1}, None), 1)

    assert sent(out) == [("c7", Instruction.PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE, value_hash({"n": 1}))]


def subscription_join() -> tuple[FkSubscriptionJoinProcessor, Collect, ProcessorMetrics]:
    out, metrics = Collect(), ProcessorMetrics()
    stores = (logged("subscriptions"), typed("right"))
    return FkSubscriptionJoinProcessor(("subs", "customers"), stores, JSON, [out], metrics, "subs-join"), out, metrics


PRIMARY_PARTITION = 3
"""The partition of the left records' task in the subscriptions made here."""


def subscribe(pk: str, instruction: Instruction, digest: bytes | None = b"h" * 16) -> bytes:
    """A subscription's value for left key ``pk`` (the foreign key is the record's key)."""
    return Subscription(digest, instruction, pk.encode(), PRIMARY_PARTITION).to_bytes()


def responses(out: Collect) -> list[tuple[str, Any, int]]:
    """``(left key, right value, timestamp)`` of each response; every one goes to the primary partition."""
    assert {value.partition for _, value, _ in out.records} <= {PRIMARY_PARTITION}
    return [
        (key.decode(), None if r.foreign_value is None else JSON.deserialize(r.foreign_value), timestamp)
        for key, value, timestamp in out.records
        for r in [Response.from_bytes(value.value)]
    ]


def test_a_right_update_answers_exactly_the_subscribers_of_its_key_at_its_own_timestamp() -> None:
    join, out, _ = subscription_join()
    subs, customers = join.for_input("subs"), join.for_input("customers")
    for fk, pk in [("c1", "o1"), ("c1", "o2"), ("c10", "o3"), ("c", "o4")]:  # c10 and c share c1's leading bytes
        subs.process(fk.encode(), subscribe(pk, Instruction.PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE), 1)
    subs.process(b"c1", subscribe("o2", Instruction.DELETE_KEY_NO_PROPAGATE), 2)
    assert out.records == []  # no customer yet, and an unsubscription never answers

    customers.process("c1", Change({"name": "Ann"}, None), 5)
    customers.process("c1", Change(None, {"name": "Ann"}), 6)

    assert responses(out) == [("o1", {"name": "Ann"}, 5), ("o1", None, 6)]


def test_a_subscription_is_answered_by_its_instruction_at_the_later_timestamp() -> None:
    join, out, metrics = subscription_join()
    subs, customers = join.for_input("subs"), join.for_input("customers")
    customers.process("c1", Change({"name": "Ann"}, None), 50)
    subs.process(b"c1", subscribe("o1", Instruction.PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE), 10)
    subs.process(b"c2", subscribe("o2", Instruction.PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE), 20)  # no c2: silent
    subs.process(b"c2", subscribe("o3", Instruction.PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE), 30)
    subs.process(b"c1", subscribe("o1", Instruction.DELETE_KEY_AND_PROPAGATE), 60)
    subs.process(None, subscribe("o4", Instruction.PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE), 70)
    subs.process(None, subscribe("o5", Instruction.DELETE_KEY_AND_PROPAGATE), 80)  # dropped

    assert responses(out) == [("o1", {"name": "Ann"}, 50), ("o3", None, 30), ("o1", None, 60), ("o4", None, 70)]
    assert metrics.dropped[NULL_KEY_OR_VALUE] == 1
    customers.process("c1", Change({"name": "Ann B"}, {"name": "Ann"}), 90)  # o1 unsubscribed c1
    assert len(out.records) == 4


def response_join(left_join: bool) -> tuple[FkResponseJoinProcessor, Collect]:
    out = Collect()
    stores = (typed("left"), typed("output"))
    join = FkResponseJoinProcessor(
        ("orders", "responses"), pair, left_join, stores, (STRING, JSON, JSON), [out], ProcessorMetrics(), "result"
    )
    return join, out


def answer(left_value: Any, right_value: Any) -> bytes:
    digest = None if left_value is None else value_hash(left_value)
    return Response(digest, None if right_value is None else JSON.serialize(right_value)).to_bytes()


@pytest.mark.parametrize("left_join", [False, True])
def test_a_response_for_a_left_value_that_changed_since_is_dropped_by_its_hash(left_join: bool) -> None:
    join, out = response_join(left_join)
    orders, responses_in = join.for_input("orders"), join.for_input("responses")
    orders.process("o1", Change(OLD, None), 1)
    orders.process("o1", Change(NEW, OLD), 2)  # the answer to OLD is now stale

    responses_in.process(b"o1", answer(OLD, {"name": "Ann"}), 3)
    assert out.records == []
    responses_in.process(b"o1", answer(NEW, {"name": "Bob"}), 4)
    assert out.records == [("o1", Change([NEW, {"name": "Bob"}], None), 4)]


def test_a_response_without_a_right_value_deletes_on_an_inner_join_and_joins_none_on_a_left_join() -> None:
    inner, inner_out = response_join(left_join=False)
    left, left_out = response_join(left_join=True)
    for join in (inner, left):
        join.for_input("orders").process("o1", Change(OLD, None), 1)
        join.for_input("responses").process(b"o1", answer(OLD, {"name": "Ann"}), 2)
        join.for_input("responses").process(b"o1", answer(OLD, None), 3)
        join.for_input("orders").process("o1", Change(None, OLD), 4)
        join.for_input("responses").process(b"o1", answer(None, None), 5)  # the delete's answer

    joined = [OLD, {"name": "Ann"}]
    assert inner_out.records == [
        ("o1", Change(joined, None), 2),
        ("o1", Change(None, joined), 3),
        ("o1", Change(None, None), 5),
    ]
    assert left_out.records == [
        ("o1", Change(joined, None), 2),
        ("o1", Change([OLD, None], joined), 3),
        ("o1", Change(None, [OLD, None]), 5),
    ]


def test_subscriptions_and_responses_round_trip_with_and_without_hash_and_value() -> None:
    for digest in (None, b"x" * 16):
        for instruction in Instruction:
            subscription = Subscription(digest, instruction, b"key", 7)
            assert Subscription.from_bytes(subscription.to_bytes()) == subscription
        for value in (None, b"", b"value"):
            assert Response.from_bytes(Response(digest, value).to_bytes()) == Response(digest, value)
    assert combined_key(b"c1", b"o1") == b"\x00\x00\x00\x02c1o1"
    with pytest.raises(ValueError, match="unknown version"):
        Response.from_bytes(b"\x07\x00\x00")
