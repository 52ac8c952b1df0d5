"""An in-memory Kafka for the TopologyTestDriver: topics, and the three clients a stream thread talks to.

``InMemoryCluster`` holds every topic as one list of records per partition, in the order records were
appended, plus a cluster-wide sequence number per record (so readers can follow production order across
partitions) and the group's committed offsets. ``InMemoryConsumer``, ``InMemoryProducer`` and
``InMemoryRestoreConsumer`` implement ``streamapp.kafka.types``'s ``ConsumerClient``, ``ProducerClient`` and
``RestoreConsumerClient`` on it, so a real ``StreamThread`` runs over it unchanged.

Differences from a broker, all deliberate and deterministic:

- the consumer is the only group member: on its first ``poll`` after ``subscribe`` it is assigned every
  partition of the subscribed topics; ``poll`` returns records in the order they were *appended to the
  cluster* (not partition by partition), so a record a task writes to a repartition topic is processed
  before any record appended after it;
- the producer appends a record at ``send`` (it is readable at once) and acknowledges it at the next
  ``poll``/``flush``; without an explicit partition a non-null key is partitioned by murmur2 (Kafka's
  default partitioner) and null keys go round-robin per topic (a broker-backed producer picks a random
  partition);
- a topic that does not exist is created on first use with ``default_partitions`` partitions (a broker with
  ``auto.create.topics.enable``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from streamapp.kafka.types import OFFSET_BEGINNING, ConsumerRecord, RebalanceListener, TopicPartition
from streamapp.partitioner import partition_for_key

__all__ = ["InMemoryCluster", "InMemoryConsumer", "InMemoryProducer", "InMemoryRestoreConsumer"]


@dataclass
class _Partition:
    records: list[ConsumerRecord] = field(default_factory=list)
    sequence: list[int] = field(default_factory=list)
    """Cluster-wide append sequence number of each record (same index as ``records``)."""


class InMemoryCluster:
    """Topics as in-memory logs (see the module docstring). ``default_partitions``: for auto-created topics."""

    def __init__(self, default_partitions: int = 1) -> None:
        if default_partitions < 1:
            raise ValueError(f"default_partitions must be at least 1, got {default_partitions}")
        self.default_partitions = default_partitions
        self.committed: dict[TopicPartition, int] = {}
        self._topics: dict[str, list[_Partition]] = {}
        self._appended: dict[str, list[ConsumerRecord]] = {}
        self._next_sequence = 0

    def create_topic(self, name: str, partitions: int) -> None:
        """Create ``name`` with ``partitions`` partitions; idempotent for the same count.

        Raises ValueError when the topic exists with another partition count.
        """
        if partitions < 1:
            raise ValueError(f"topic '{name}': partitions must be at least 1, got {partitions}")
        existing = self._topics.get(name)
        if existing is not None:
            if len(existing) != partitions:
                raise ValueError(f"topic '{name}' exists with {len(existing)} partitions, not {partitions}")
            return
        self._topics[name] = [_Partition() for _ in range(partitions)]
        self._appended[name] = []

    def topics(self) -> list[str]:
        return sorted(self._topics)

    def partitions(self, topic: str) -> int:
        """Partition count of ``topic`` (created with ``default_partitions`` if missing)."""
        if topic not in self._topics:
            self.create_topic(topic, self.default_partitions)
        return len(self._topics[topic])

    def append(self, topic: str, partition: int, key: bytes | None, value: bytes | None, timestamp: int) -> int:
        """Append one record; returns its offset. Raises ValueError for a partition the topic lacks."""
        count = self.partitions(topic)
        if not 0 <= partition < count:
            raise ValueError(f"topic '{topic}' has no partition {partition} (it has {count})")
        log = self._topics[topic][partition]
        record = ConsumerRecord(topic, partition, len(log.records), key, value, timestamp)
        log.records.append(record)
        log.sequence.append(self._next_sequence)
        self._next_sequence += 1
        self._appended[topic].append(record)
        return record.offset

    def end_offset(self, tp: TopicPartition) -> int:
        """Offset the next record of ``tp`` will get (0 for a topic that does not exist)."""
        partitions = self._topics.get(tp.topic)
        if partitions is None or tp.partition >= len(partitions):
            return 0
        return len(partitions[tp.partition].records)

    def record_at(self, tp: TopicPartition, offset: int) -> tuple[ConsumerRecord, int]:
        """The record at ``offset`` of ``tp`` and its cluster-wide sequence number."""
        log = self._topics[tp.topic][tp.partition]
        return log.records[offset], log.sequence[offset]

    def records(self, topic: str) -> list[ConsumerRecord]:
        """Every record of ``topic`` in the order it was appended (across partitions)."""
        return list(self._appended.get(topic, []))

    def appended_count(self, topic: str) -> int:
        return len(self._appended.get(topic, []))

    def appended_since(self, topic: str, index: int) -> list[ConsumerRecord]:
        """Records of ``topic`` appended after the first ``index`` ones, in append order."""
        return self._appended.get(topic, [])[index:]


class InMemoryProducer:
    """``ProducerClient`` on an ``InMemoryCluster`` (see the module docstring for how it partitions)."""

    def __init__(self, cluster: InMemoryCluster) -> None:
        self.cluster = cluster
        self.closed = False
        self._unacknowledged: list[tuple[Callable[[TopicPartition, int], None], TopicPartition, int]] = []
        self._round_robin: dict[str, int] = {}

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        partition: int | None = None,
        on_delivery: Callable[[TopicPartition, int], None] | None = None,
    ) -> None:
        if self.closed:
            raise RuntimeError("producer is closed")
        if partition is None:
            partition = self.partition_for(topic, key)
        offset = self.cluster.append(topic, partition, key, value, timestamp)
        if on_delivery is not None:
            self._unacknowledged.append((on_delivery, TopicPartition(topic, partition), offset))

    def partition_for(self, topic: str, key: bytes | None) -> int:
        """The partition a record without an explicit one goes to: murmur2 of the key, round-robin if null."""
        count = self.cluster.partitions(topic)
        if key is not None:
            return partition_for_key(key, count)
        turn = self._round_robin.get(topic, 0)
        self._round_robin[topic] = turn + 1
        return turn % count

    def poll(self) -> None:
        self._acknowledge()

    def flush(self, timeout_s: float) -> None:
        self._acknowledge()

    def close(self, timeout_s: float) -> None:
        self._acknowledge()
        self.closed = True

    def _acknowledge(self) -> None:
        acknowledged, self._unacknowledged = self._unacknowledged, []
        for callback, tp, offset in acknowledged:
            callback(tp, offset)


class InMemoryConsumer:
    """``ConsumerClient`` on an ``InMemoryCluster``: the single member of its group (module docstring)."""

    def __init__(self, cluster: InMemoryCluster) -> None:
        self.cluster = cluster
        self.closed = False
        self._listener: RebalanceListener | None = None
        self._topics: list[str] = []
        self._assignment_due = False
        self._positions: dict[TopicPartition, int] = {}
        self._paused: set[TopicPartition] = set()

    @property
    def assignment(self) -> list[TopicPartition]:
        return sorted(self._positions)

    def subscribe(self, topics: Sequence[str], listener: RebalanceListener) -> None:
        self._topics = list(topics)
        self._listener = listener
        self._assignment_due = True

    def poll(self, max_records: int, timeout_s: float) -> list[ConsumerRecord]:
        """Up to ``max_records`` fetchable records, oldest append first; never blocks."""
        if self._assignment_due:
            self._assign()
        out: list[ConsumerRecord] = []
        while len(out) < max_records:
            tp = self._next_partition()
            if tp is None:
                break
            record, _ = self.cluster.record_at(tp, self._positions[tp])
            out.append(record)
            self._positions[tp] += 1
        return out

    def has_fetchable(self) -> bool:
        """True when ``poll`` would return a record (an assignment still due counts as work too)."""
        return self._assignment_due or self._next_partition() is not None

    def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        self.cluster.committed.update(offsets)

    def committed(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int | None]:
        return {tp: self.cluster.committed.get(tp) for tp in partitions}

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        self._paused.update(partitions)

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        self._paused.difference_update(partitions)

    def seek(self, partition: TopicPartition, offset: int) -> None:
        self._positions[partition] = 0 if offset == OFFSET_BEGINNING else offset

    def lags(self) -> dict[TopicPartition, int]:
        return {tp: self.cluster.end_offset(tp) - position for tp, position in self._positions.items()}

    def group_joined(self) -> bool:
        return self._listener is not None

    def close(self) -> None:
        self.closed = True

    def _assign(self) -> None:
        self._assignment_due = False
        partitions = [TopicPartition(topic, p) for topic in self._topics for p in range(self.cluster.partitions(topic))]
        for tp in partitions:
            self._positions[tp] = self.cluster.committed.get(tp, 0)
        assert self._listener is not None
        self._listener.on_partitions_assigned(partitions)

    def _next_partition(self) -> TopicPartition | None:
        """The unpaused assigned partition whose next record was appended first, if any has one."""
        best: TopicPartition | None = None
        best_sequence = -1
        for tp, position in self._positions.items():
            if tp in self._paused or position >= self.cluster.end_offset(tp):
                continue
            _, sequence = self.cluster.record_at(tp, position)
            if best is None or sequence < best_sequence:
                best, best_sequence = tp, sequence
        return best


class InMemoryRestoreConsumer:
    """``RestoreConsumerClient`` on an ``InMemoryCluster``: reads assigned changelog partitions from offsets."""

    def __init__(self, cluster: InMemoryCluster) -> None:
        self.cluster = cluster
        self.closed = False
        self._positions: dict[TopicPartition, int] = {}

    def assign(self, starts: Mapping[TopicPartition, int]) -> None:
        for tp, offset in starts.items():
            self._positions[tp] = 0 if offset == OFFSET_BEGINNING else offset

    def unassign(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self._positions.pop(tp, None)

    def end_offset(self, partition: TopicPartition, timeout_s: float) -> int:
        return self.cluster.end_offset(partition)

    def poll(self, max_records: int, timeout_s: float) -> tuple[list[ConsumerRecord], set[TopicPartition]]:
        out: list[ConsumerRecord] = []
        at_end: set[TopicPartition] = set()
        for tp in sorted(self._positions):
            end = self.cluster.end_offset(tp)
            while self._positions[tp] < end and len(out) < max_records:
                out.append(self.cluster.record_at(tp, self._positions[tp])[0])
                self._positions[tp] += 1
            if self._positions[tp] >= end:
                at_end.add(tp)
        return out, at_end

    def close(self) -> None:
        self.closed = True
