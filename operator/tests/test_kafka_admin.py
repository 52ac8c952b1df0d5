"""The operator's Kafka seam against the real local broker: idempotent topic creation with configs, partition
counts, consumer-group lag against high watermarks, and a clear error when Kafka cannot be reached."""

from __future__ import annotations

import os
import uuid
import weakref

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource
from stack_env import stack_variable
from streamapp_operator.connection import KafkaConnection
from streamapp_operator.kafka import ConfluentKafkaAdmin, KafkaUnavailable, TopicCreationFailed, TopicSpec

pytestmark = pytest.mark.integration

BOOTSTRAP = os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:9092")


@pytest.fixture
def admin() -> ConfluentKafkaAdmin:
    return ConfluentKafkaAdmin(BOOTSTRAP)


def _name(prefix: str) -> str:
    return f"operator-test-{prefix}-{uuid.uuid4().hex[:8]}"


def _topic_config(topic: str, key: str) -> str:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    client = AdminClient({"bootstrap.servers": BOOTSTRAP})  # kept alive until the result arrives
    configs = client.describe_configs([resource])[resource].result(timeout=10)
    value: str = configs[key].value
    return value


def test_create_topics_is_idempotent_and_applies_partitions_and_config(admin: ConfluentKafkaAdmin) -> None:
    changelog, repartition = _name("changelog"), _name("repartition")
    topics = [
        TopicSpec(changelog, 3, {"cleanup.policy": "compact"}),
        TopicSpec(repartition, 2, {"cleanup.policy": "delete"}),
    ]
    assert admin.create_topics(topics, replication_factor=-1) == sorted([changelog, repartition])
    assert admin.create_topics(topics, replication_factor=-1) == []
    assert admin.partition_counts([changelog, repartition, _name("absent")]) == {changelog: 3, repartition: 2}
    assert _topic_config(changelog, "cleanup.policy") == "compact"
    assert _topic_config(repartition, "cleanup.policy") == "delete"


def test_group_lag_counts_uncommitted_records_from_the_earliest_offset(admin: ConfluentKafkaAdmin) -> None:
    topic, group = _name("source"), _name("group")
    admin.create_topics([TopicSpec(topic, 2)], replication_factor=-1)
    producer = Producer({"bootstrap.servers": BOOTSTRAP})
    for i in range(10):
        producer.produce(topic, value=b"x", partition=i % 2)
    assert producer.flush(10) == 0

    never_consumed = admin.group_lag(group, [topic])
    assert (never_consumed.lag, never_consumed.state) == (10, "Dead")

    consumer = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 5), TopicPartition(topic, 1, 2)], asynchronous=False)
    finally:
        consumer.close()
    partly_consumed = admin.group_lag(group, [topic])
    assert partly_consumed.lag == 3  # partition 0 fully committed, partition 1 at 2 of 5
    assert partly_consumed.state == "Empty"


def test_group_lag_of_no_existing_topics_is_zero(admin: ConfluentKafkaAdmin) -> None:
    assert admin.group_lag(_name("group"), [_name("absent")]).lag == 0


def test_unreachable_kafka_raises_kafka_unavailable_with_the_cause() -> None:
    admin = ConfluentKafkaAdmin("127.0.0.1:1", timeout=2)
    with pytest.raises(KafkaUnavailable, match="listing topics failed"):
        admin.partition_counts(["flights"])


def test_a_topic_kafka_refuses_is_kafkas_answer_not_unavailable(admin: ConfluentKafkaAdmin) -> None:
    topic = _name("refused")
    with pytest.raises(TopicCreationFailed, match=rf"Kafka refused topic '{topic}': .*[Rr]eplication factor"):
        admin.create_topics([TopicSpec(topic, 1)], replication_factor=3)


def test_group_members_are_described_and_only_existing_topics_and_groups_are_deleted(
    admin: ConfluentKafkaAdmin,
) -> None:
    topic, group = _name("members"), _name("group")
    admin.create_topics([TopicSpec(topic, 1)], replication_factor=-1)
    consumer = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": group, "client.id": "someone-else"})
    try:
        consumer.subscribe([topic])
        for _ in range(60):
            consumer.poll(0.5)
            if consumer.assignment():
                break
        members = admin.group_lag(group, [topic]).members
        assert [m.client_id for m in members] == ["someone-else"]
        with pytest.raises(KafkaUnavailable, match="not empty"):
            admin.delete_group(group)
    finally:
        consumer.close()
    assert admin.delete_group(group) is True
    assert admin.delete_group(group) is False
    assert admin.delete_topics([topic, _name("absent")]) == [topic]
    assert admin.partition_counts([topic]) == {}


def test_a_refused_login_says_so_instead_of_a_bare_transport_failure() -> None:
    sasl = stack_variable("KAFKA_SASL_BOOTSTRAP")
    settings = {"sasl.mechanism": "SCRAM-SHA-512", "sasl.password": "wrong", "sasl.username": "admin",
                "security.protocol": "SASL_PLAINTEXT"}  # fmt: skip
    connection = KafkaConnection(sasl, tuple(sorted(settings.items())))
    admin = ConfluentKafkaAdmin(connection, timeout=3)
    with pytest.raises(KafkaUnavailable, match="SASL authentication error") as failure:
        admin.partition_counts(["flights"])
    assert "wrong" not in str(failure.value)


def test_an_admin_client_nobody_references_is_freed_at_once() -> None:
    """No reference cycle (e.g. through librdkafka's callbacks) keeps a dropped client and its threads alive."""
    admin = ConfluentKafkaAdmin("127.0.0.1:1", timeout=1)
    gone = weakref.ref(admin)
    del admin
    assert gone() is None


def test_retention_ms_reads_each_existing_topics_setting_and_the_broker_default(admin: ConfluentKafkaAdmin) -> None:
    kept, default = _name("kept-for-ever"), _name("default-retention")
    admin.create_topics([TopicSpec(kept, 1, {"retention.ms": "-1"}), TopicSpec(default, 1)], replication_factor=-1)
    assert admin.retention_ms([kept, default, _name("absent")]) == {kept: -1, default: 604_800_000}
