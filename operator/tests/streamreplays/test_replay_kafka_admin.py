"""The admin operations of the StreamReplay controller on the local broker: offsets (earliest, latest, for a
timestamp: the first record at or after it, -1 past the last), a group's committed offsets set and read back,
and the committed values of a transactional topic (aborted transactions left out)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient
from streamapp_operator.kafka import ConfluentKafkaAdmin, TopicSpec

pytestmark = pytest.mark.integration

BOOTSTRAP = os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:9092")


@pytest.fixture
def topic() -> Iterator[str]:
    name = f"operator-test-replay-{uuid.uuid4().hex[:8]}"
    ConfluentKafkaAdmin(BOOTSTRAP).create_topics([TopicSpec(name, 2)], 1)
    yield name
    client = AdminClient({"bootstrap.servers": BOOTSTRAP})  # kept alive until the result arrives
    client.delete_topics([name])[name].result(30)


def test_offsets_earliest_latest_and_for_a_timestamp(topic: str) -> None:
    producer = Producer({"bootstrap.servers": BOOTSTRAP})
    for i in range(10):
        producer.produce(topic, b"v", partition=i % 2, timestamp=1_000 * (i + 1))
    producer.flush(30)
    admin = ConfluentKafkaAdmin(BOOTSTRAP)
    assert admin.list_offsets({topic: 2}, "earliest") == {topic: {0: 0, 1: 0}}
    assert admin.list_offsets({topic: 2}, "latest") == {topic: {0: 5, 1: 5}}
    # partition 0 holds timestamps 1000, 3000, ...; partition 1 holds 2000, 4000, ...
    assert admin.list_offsets({topic: 2}, 4_000) == {topic: {0: 2, 1: 1}}
    assert admin.list_offsets({topic: 2}, 99_000) == {topic: {0: -1, 1: -1}}


def test_a_groups_offsets_are_set_and_read_back(topic: str) -> None:
    admin = ConfluentKafkaAdmin(BOOTSTRAP)
    group = f"{topic}-group"
    assert admin.committed_offsets(group, {topic: 2}) == {}
    admin.set_group_offsets(group, {topic: {0: 0, 1: 0}})
    assert admin.committed_offsets(group, {topic: 2}) == {topic: {0: 0, 1: 0}}
    assert admin.delete_group(group)


def test_committed_values_leave_aborted_transactions_out(topic: str) -> None:
    producer = Producer({"bootstrap.servers": BOOTSTRAP, "transactional.id": f"{topic}-tx"})
    producer.init_transactions(30)
    for value, commit in ((b"one", True), (b"aborted", False), (b"two", True)):
        producer.begin_transaction()
        producer.produce(topic, value, partition=1)
        producer.commit_transaction(30) if commit else producer.abort_transaction(30)
    admin = ConfluentKafkaAdmin(BOOTSTRAP)
    assert admin.read_committed_values(topic) == [b"one", b"two"]
    assert admin.read_committed_values(f"{topic}-absent") == []


def test_a_groups_members_are_what_the_replays_identity_check_sees(topic: str) -> None:
    """``check_identity`` asks ``group_lag(group, [])`` for members only (no offsets listed): none for a group
    that never existed, the client id of a consumer that joined."""
    admin = ConfluentKafkaAdmin(BOOTSTRAP)
    group = f"{topic}-in-use"
    assert admin.group_lag(group, []).members == ()
    consumer = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": group, "client.id": "someone-else"})
    try:
        consumer.subscribe([topic])
        for _ in range(60):  # joining takes the broker's initial rebalance delay
            consumer.poll(0.5)
            if consumer.assignment():
                break
        assert [m.client_id for m in admin.group_lag(group, []).members] == ["someone-else"]
    finally:
        consumer.close()
