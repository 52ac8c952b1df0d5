"""The in-memory cluster's last stable offset: the first record of the oldest open transaction of a partition,
else the high watermark (what a ``read_committed`` reader and a task's readiness check see)."""

from __future__ import annotations

from streamapp.kafka.types import TopicPartition
from streamapp.testing.cluster import InMemoryCluster, InMemoryProducer

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def transactional(cluster: InMemoryCluster, transactional_id: str) -> InMemoryProducer:
    producer = InMemoryProducer(cluster, transactional_id)
    producer.init_transactions(1.0)
    producer.begin_transaction()
    return producer


def test_last_stable_offset_stops_at_the_oldest_open_transaction_of_the_partition() -> None:
    cluster = InMemoryCluster()
    cluster.create_topic("t", 2)
    InMemoryProducer(cluster).send("t", b"k", b"plain", 1, partition=0)
    first = transactional(cluster, "first")
    first.send("t", b"k", b"first", 2, partition=0)  # offset 1
    second = transactional(cluster, "second")
    second.send("t", b"k", b"second", 3, partition=0)  # offset 2
    second.send("t", b"k", b"second", 3, partition=1)  # offset 0 of partition 1
    assert (cluster.last_stable_offset(T0), cluster.last_stable_offset(T1)) == (1, 0)

    first.commit_transaction(1.0)  # marker at offset 3 of partition 0
    assert (cluster.last_stable_offset(T0), cluster.last_stable_offset(T1)) == (2, 0)

    second.abort_transaction(1.0)  # markers: offset 4 of partition 0, offset 1 of partition 1
    assert (cluster.last_stable_offset(T0), cluster.last_stable_offset(T1)) == (5, 2)
    assert cluster.last_stable_offset(TopicPartition("missing", 0)) == 0
