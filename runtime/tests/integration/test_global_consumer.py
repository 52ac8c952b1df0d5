"""The global consumer on the REAL broker: a worker's global store is bootstrapped from every partition,
resumes from its checkpoint after a restart (reading only what is new), follows updates, and a transactional
writer's commit markers do not stall the bootstrap."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer
from streamapp.config import StreamsConfig
from streamapp.kafka.global_consumer import KafkaGlobalConsumer, global_consumer_config
from streamapp.kafka.types import TopicPartition
from streamapp.processing.global_thread import GlobalStreamThread
from streamapp.state.global_store import GlobalStateManager, GlobalStoreSpec
from streamapp.state.rocksdb import RocksDBMemory, RocksDBStore
from streamapp_harness import KafkaTestClient

pytestmark = pytest.mark.integration


def global_thread(bootstrap: str, topic: str, state: Path) -> GlobalStreamThread:
    config = StreamsConfig.from_mapping(
        {"application.id": f"global-{uuid.uuid4().hex[:8]}", "bootstrap.servers": bootstrap}
    )
    memory = RocksDBMemory(8 << 20, 2 << 20)
    spec = GlobalStoreSpec("users-store", topic, "string", "json", node="users")
    manager = GlobalStateManager([spec], state, lambda name, path: RocksDBStore(name, path, memory))
    consumer = KafkaGlobalConsumer(global_consumer_config(config, 0, None))
    return GlobalStreamThread(manager, consumer, commit_interval_ms=100)


def test_bootstrap_reads_all_partitions_and_a_restart_resumes_from_the_checkpoint(
    kafka: KafkaTestClient, tmp_path: Path
) -> None:
    topic = f"users-{uuid.uuid4().hex[:8]}"
    kafka.create_topics({topic: 3})
    kafka.produce(topic, [(f"user-{i}", {"region": f"r{i}"}) for i in range(30)])

    first = global_thread(kafka.bootstrap, topic, tmp_path)
    assert first.bootstrap(lambda: False)
    users = first.global_state.table("users")
    assert [users.get(f"user-{i}") for i in (0, 17, 29)] == [{"region": "r0"}, {"region": "r17"}, {"region": "r29"}]
    assert first.restored_records == 30
    first.close()

    kafka.produce(topic, [("user-17", {"region": "moved"}), ("user-3", None)])
    second = global_thread(kafka.bootstrap, topic, tmp_path)
    assert second.bootstrap(lambda: False)
    assert second.restored_records == 2  # only what was appended since the checkpoint
    users = second.global_state.table("users")
    assert users.get("user-17") == {"region": "moved"} and users.get("user-3") is None
    assert sum(second.global_state.positions[TopicPartition(topic, p)] for p in range(3)) == 32

    kafka.produce(topic, [("user-40", {"region": "new"})])
    for _ in range(100):
        second.poll(0.1)
        if users.get("user-40") is not None:
            break
    assert users.get("user-40") == {"region": "new"}
    second.close()


def test_bootstrap_finishes_past_transaction_markers(kafka: KafkaTestClient, tmp_path: Path) -> None:
    topic = f"users-{uuid.uuid4().hex[:8]}"
    kafka.create_topics({topic: 1})
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "transactional.id": f"tx-{uuid.uuid4().hex[:8]}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, key=b"alice", value=b'{"region": "north"}')
    producer.commit_transaction(30)  # the log now ends with a commit marker no consumer ever sees

    thread = global_thread(kafka.bootstrap, topic, tmp_path)
    assert thread.bootstrap(lambda: False)
    assert thread.global_state.table("users").get("alice") == {"region": "north"}
    assert thread.global_state.positions[TopicPartition(topic, 0)] == 2
    thread.close()
