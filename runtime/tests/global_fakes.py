"""A fake of the global consumer seam (``GlobalConsumerClient``) over ``kafka_fakes.FakeCluster``.

``low`` lets a test pretend the head of a partition was deleted (retention), so positions below it are
out of range, as on a real broker.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kafka_fakes import FakeCluster
from streamapp.kafka.types import ConsumerRecord, KafkaClientError, TopicPartition


class FakeGlobalConsumer:
    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.positions_: dict[TopicPartition, int] = {}
        self.low: dict[TopicPartition, int] = {}
        self.assignments: list[dict[TopicPartition, int]] = []
        self.closed = False

    def partitions(self, topic: str, timeout_s: float) -> list[int]:
        if topic not in self.cluster.topics:
            raise KafkaClientError(f"global topic '{topic}' is not available: unknown topic (fake)")
        return list(range(len(self.cluster.topics[topic])))

    def watermarks(self, partition: TopicPartition, timeout_s: float) -> tuple[int, int]:
        return self.low.get(partition, 0), self.cluster.end_offset(partition)

    def assign(self, starts: Mapping[TopicPartition, int]) -> None:
        self.assignments.append(dict(starts))
        self.positions_ = dict(starts)

    def poll(self, max_records: int, timeout_s: float) -> tuple[list[ConsumerRecord], set[TopicPartition]]:
        out: list[ConsumerRecord] = []
        at_end: set[TopicPartition] = set()
        for tp, position in sorted(self.positions_.items()):
            log = self.cluster.topics[tp.topic][tp.partition]
            start = max(position, self.low.get(tp, 0))
            batch = log[start : start + max_records - len(out)]
            out.extend(batch)
            self.positions_[tp] = start + len(batch)
            if self.positions_[tp] >= len(log):
                at_end.add(tp)
        return out, at_end

    def positions(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self.positions_[tp] for tp in partitions if tp in self.positions_}

    def close(self) -> None:
        self.closed = True
