"""On the real broker under ``group.protocol=consumer`` (KIP-848), a stream thread's commits go through while other
members join and leave the group: each join or leave moves every member to a new epoch. Before Kafka 4.3 a commit
sent in between is rejected with ``STALE_MEMBER_EPOCH``; reported as a rebalance, it closed every task without
commit and, under at-least-once, counted up to a commit interval of records twice (seen as 11% too many flights in
the e2e scale-out scenario). ``KafkaConsumer.commit`` retries it; on such a broker this test churns the group until
such a retry happened and fails on any CommitFailedError. Kafka 4.3 and later accept that commit (KIP-1251: the
partition's assignment epoch <= the commit's member epoch <= the member's epoch), so there the test fails on any
CommitFailedError over the same churn, and on any commit still rejected for a stale epoch."""

from __future__ import annotations

import random
import threading
import time
from typing import Any

import pytest
from confluent_kafka import Consumer
from streamapp.kafka.clients import KafkaConsumer
from streamapp.kafka.types import CommitFailedError, TopicPartition
from streamapp_harness import KafkaTestClient, broker_version, unique

pytestmark = pytest.mark.integration

PARTITIONS = 6
ASSIGNMENT_EPOCHS = (4, 3)
"""The first Kafka whose coordinator checks an offset commit against the partition's assignment epoch (KIP-1251)
instead of requiring the member's current epoch: a commit racing an epoch bump is accepted, not retried."""
CHURN_S = 20
"""How long the group churns on such a broker (commits are accepted or fail at once: no retry to wait for)."""


class Owned:
    """The partitions the consumer owns and its next offset in each; commits them on revocation as a task would."""

    def __init__(self) -> None:
        self.positions: dict[TopicPartition, int] = {}
        self.owned: set[TopicPartition] = set()
        self.consumer: KafkaConsumer | None = None
        self.failures: list[str] = []

    def commit(self, partitions: set[TopicPartition]) -> None:
        assert self.consumer is not None
        offsets = {tp: self.positions[tp] for tp in partitions if tp in self.positions}
        try:
            self.consumer.commit(offsets)
        except CommitFailedError as exc:
            self.failures.append(str(exc))

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
        self.owned.update(partitions)

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        self.commit(set(partitions))
        self.owned.difference_update(partitions)
        for tp in partitions:
            self.positions.pop(tp, None)

    def on_partitions_lost(self, partitions: list[Any]) -> None:
        self.failures.append(f"lost {partitions}")


def churn(bootstrap: str, group: str, topic: str, stop: threading.Event) -> None:
    """Members that join the group, consume for 1-4 s and leave, one after the other, until ``stop``."""
    while not stop.is_set():
        member = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                           "enable.auto.commit": False, "auto.offset.reset": "earliest"})  # fmt: skip
        member.subscribe([topic])
        leave_at = time.monotonic() + random.uniform(1, 4)
        while time.monotonic() < leave_at and not stop.is_set():
            member.consume(100, 0.2)
        member.close()


def test_a_commit_racing_a_new_member_epoch_is_retried_or_accepted_never_a_rebalance(kafka: KafkaTestClient) -> None:
    version = broker_version()
    accepted = version is not None and version >= ASSIGNMENT_EPOCHS
    group, topic = unique("epoch-group"), unique("epoch-input")
    kafka.create_topics({topic: PARTITIONS})
    kafka.produce(topic, [(f"k{i}", i) for i in range(30_000)])
    owned = Owned()
    consumer = KafkaConsumer({"bootstrap.servers": kafka.bootstrap, "group.id": group, "group.protocol": "consumer",
                              "enable.auto.commit": False, "auto.offset.reset": "earliest"})  # fmt: skip
    owned.consumer = consumer
    consumer.subscribe([topic], owned)
    stop = threading.Event()
    churners = [threading.Thread(target=churn, args=(kafka.bootstrap, group, topic, stop)) for _ in range(2)]
    for thread in churners:
        thread.start()
    started = time.monotonic()
    deadline = started + (CHURN_S if accepted else 120)
    commits = 0
    try:
        while time.monotonic() < deadline and (accepted or not (consumer.stale_epoch_retries and commits >= 50)):
            for record in consumer.poll(200, 0.05):
                owned.positions[TopicPartition(record.topic, record.partition)] = record.offset + 1
            owned.commit(owned.owned)
            commits += 1
    finally:
        stop.set()
        for thread in churners:
            thread.join()
        consumer.close()

    # a member the coordinator really fenced (Unknown member, lost partitions: a machine too loaded to heartbeat)
    # is a rebalance the stream thread must handle by closing its tasks; a stale epoch never is
    assert [failure for failure in owned.failures if "stale" in failure] == []
    if accepted:
        assert commits >= 50, f"only {commits} commits in {CHURN_S} s of churn"
        assert consumer.stale_epoch_retries == 0, (
            f"Kafka {version} rejected {consumer.stale_epoch_retries} of {commits} commits for a stale member epoch"
        )
    else:
        assert consumer.stale_epoch_retries, f"no commit met a stale member epoch in 120 s ({commits} commits)"
