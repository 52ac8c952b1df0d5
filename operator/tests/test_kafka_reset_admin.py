"""The operator's Kafka seam for the declarative reset, against the real local broker: the group's committed
offsets of the input topics go back to the target (internal topics untouched), and the internal topics are
found by Kafka's naming rule only."""

from __future__ import annotations

import os
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from streamapp.kafka.reset_plan import ToEarliest, ToOffsets
from streamapp.kafka.types import TopicPartition as Partition
from streamapp_operator.kafka import ConfluentKafkaAdmin, KafkaUnavailable, TopicSpec

pytestmark = pytest.mark.integration

BOOTSTRAP = os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:9092")


def _commit(group: str, offsets: list[TopicPartition]) -> None:
    consumer = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=offsets, asynchronous=False)
    finally:
        consumer.close()


def test_reset_offsets_commits_the_target_for_every_input_partition_and_leaves_internal_topics() -> None:
    admin = ConfluentKafkaAdmin(BOOTSTRAP)
    app = f"operator-reset-{uuid.uuid4().hex[:8]}"
    source, changelog, repartition = f"{app}-in", f"{app}-store-changelog", f"{app}-by-key-repartition"
    admin.create_topics([TopicSpec(t, 2) for t in (source, changelog, repartition)], replication_factor=-1)
    try:
        producer = Producer({"bootstrap.servers": BOOTSTRAP})
        for i in range(6):
            producer.produce(source, value=b"x", partition=i % 2)
        assert producer.flush(10) == 0
        _commit(app, [TopicPartition(source, 0, 3), TopicPartition(source, 1, 3)])
        assert admin.reset_offsets(app, [source], ToEarliest()) == 2
        assert admin.committed_offsets(app, {source: 2}) == {source: {0: 0, 1: 0}}
        assert admin.reset_offsets(app, [source], ToOffsets({Partition(source, 1): 2})) == 2
        assert admin.committed_offsets(app, {source: 2}) == {source: {0: 0, 1: 2}}
        assert admin.internal_topics(app) == sorted([changelog, repartition])  # not the input, though prefixed
        with pytest.raises(KafkaUnavailable, match="do not exist"):
            admin.reset_offsets(app, [f"{app}-absent"], ToEarliest())
    finally:
        admin.delete_topics([source, changelog, repartition])
        admin.delete_group(app)
