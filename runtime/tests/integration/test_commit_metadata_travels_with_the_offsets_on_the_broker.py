"""On the real broker, the metadata a task commits with its offsets (``streamapp.processing.commit_metadata``: the
emit-on-close close times, Kafka's ``TopicPartitionMetadata``) comes back with them: librdkafka carries it through a
transaction's ``send_offsets_to_transaction`` (``exactly_once_v2``) and a consumer's synchronous commit
(at-least-once), and the group's committed offsets read it back; a later commit without metadata clears it, so an
older runtime's commit reads as none."""

from __future__ import annotations

import pytest
from streamapp.kafka.clients import KafkaConsumer, KafkaProducer
from streamapp.kafka.types import OffsetAndMetadata, TopicPartition
from streamapp_harness import KafkaTestClient, unique

pytestmark = pytest.mark.integration

METADATA = '{"v":1,"emit":{"final-counts":12000}}'


def test_commit_metadata_comes_back_with_the_offsets_from_a_transaction_and_from_a_consumer_commit(
    kafka: KafkaTestClient,
) -> None:
    topic, group = unique("metadata-input"), unique("metadata-group")
    kafka.create_topics({topic: 2})
    first, second = TopicPartition(topic, 0), TopicPartition(topic, 1)
    consumer = KafkaConsumer({"bootstrap.servers": kafka.bootstrap, "group.id": group})
    producer = KafkaProducer({"bootstrap.servers": kafka.bootstrap, "transactional.id": unique("metadata-txn")})
    try:
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.send(topic, b"k", b"v", 0, partition=0)
        producer.flush(30)
        producer.send_offsets_to_transaction({first: 1, second: 0}, consumer.group_metadata(), 30, {first: METADATA})
        producer.commit_transaction(30)

        assert consumer.committed_with_metadata([first, second]) == {
            first: OffsetAndMetadata(1, METADATA),
            second: OffsetAndMetadata(0, ""),
        }

        consumer.commit({first: 2, second: 1}, {second: METADATA})
        assert consumer.committed_with_metadata([first, second]) == {
            first: OffsetAndMetadata(2, ""),
            second: OffsetAndMetadata(1, METADATA),
        }
        assert consumer.committed([first, second]) == {first: 2, second: 1}
    finally:
        producer.close(5)
        consumer.close()
