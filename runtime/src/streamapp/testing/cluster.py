"""An in-memory Kafka for the TopologyTestDriver: topics, transactions, and the clients a stream thread uses.

``InMemoryCluster`` holds every topic as one log per partition, in append order, with a cluster-wide
sequence number per entry (so readers can follow production order across partitions), the group's
committed offsets, and transactions. ``InMemoryConsumer``, ``InMemoryProducer``, ``InMemoryRestoreConsumer``
and ``InMemoryGlobalConsumer`` implement the client protocols of ``streamapp.kafka.types`` and
``streamapp.processing.global_thread`` on it, so a real ``StreamThread`` runs over it unchanged.

Transactions follow Kafka's log model: a transactional record is appended (and gets its offset) at
``send``; ``commit_transaction`` / ``abort_transaction`` append one control marker to every partition the
transaction wrote (markers take an offset and are never returned to readers). Every reader here is
``read_committed``: it never reads past the first record of an open transaction (the last stable offset)
and skips aborted records. Without transactions this is plain at-least-once Kafka.

Differences from a broker, all deliberate and deterministic:

- the consumer is the only group member: on its first ``poll`` after ``subscribe`` it is assigned every
  partition of the subscribed topics; ``poll`` returns records in the order they were *appended to the
  cluster* (not partition by partition), so a record a task writes to a repartition topic is fetched before
  any record appended after it;
- a record is readable as soon as it is appended; ``on_delivery`` runs at the producer's next
  ``poll``/``flush``; without an explicit partition a non-null key is partitioned by murmur2 (Kafka's
  default partitioner) and null keys go round-robin per topic (a real producer picks a random partition);
- a topic that does not exist is created on first use with ``default_partitions`` partitions (a broker with
  ``auto.create.topics.enable``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from streamapp.kafka.types import (
    OFFSET_BEGINNING,
    ConsumerRecord,
    Headers,
    KafkaClientError,
    OffsetAndMetadata,
    ProducerFencedError,
    RebalanceListener,
    TopicPartition,
)
from streamapp.partitioner import partition_for_key

__all__ = [
    "InMemoryCluster",
    "InMemoryConsumer",
    "InMemoryGlobalConsumer",
    "InMemoryProducer",
    "InMemoryRestoreConsumer",
]

_NO_TRANSACTION = 0


@dataclass
class _Partition:
    """One partition's log as three parallel lists indexed by offset: no object per entry besides its record
    (the log of a driver run holds every record it saw, and the cyclic GC walks each object it tracks at every
    full collection)."""

    records: list[ConsumerRecord | None] = field(default_factory=list)
    """``None`` for a transaction control marker."""
    sequences: list[int] = field(default_factory=list)
    """The cluster-wide append sequence number of each entry."""
    transactions: list[int] = field(default_factory=list)
    """The transaction that wrote each entry (``_NO_TRANSACTION``: none)."""
    open_transactions: dict[int, int] = field(default_factory=dict)
    """Offset of the first record of each open transaction that wrote here (the last stable offset is the
    smallest), so a reader's readiness check never walks the log."""


@dataclass(frozen=True)
class GroupMetadata:
    """What ``InMemoryConsumer.group_metadata`` returns (Kafka's ``ConsumerGroupMetadata``)."""

    group_id: str
    generation: int


class InMemoryCluster:
    """Topics as in-memory logs (see the module docstring). ``default_partitions``: for auto-created topics."""

    def __init__(self, default_partitions: int = 1) -> None:
        if default_partitions < 1:
            raise ValueError(f"default_partitions must be at least 1, got {default_partitions}")
        self.default_partitions = default_partitions
        self.committed: dict[TopicPartition, int] = {}
        self.committed_metadata: dict[TopicPartition, str] = {}
        """The metadata committed with each offset of ``committed`` (``""``: none)."""
        self._topics: dict[str, list[_Partition]] = {}
        self._visible: dict[str, list[ConsumerRecord]] = {}
        """Per topic, the records a ``read_committed`` reader can see, in the order they became visible."""
        self._transaction_records: dict[int, list[ConsumerRecord]] = {}
        self._sequence = itertools.count()
        self._transaction_ids = itertools.count(1)
        self._open: dict[int, set[TopicPartition]] = {}
        self._aborted: set[int] = set()
        self._producer_epochs: dict[str, int] = {}
        self._transaction_of: dict[str, int] = {}

    # -- topics ------------------------------------------------------------------------------------

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
        self._visible[name] = []

    def exists(self, topic: str) -> bool:
        return topic in self._topics

    def topics(self) -> list[str]:
        return sorted(self._topics)

    def partitions(self, topic: str) -> int:
        """Partition count of ``topic`` (created with ``default_partitions`` if missing)."""
        if topic not in self._topics:
            self.create_topic(topic, self.default_partitions)
        return len(self._topics[topic])

    def append(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        headers: Headers | None = None,
        transaction: int = _NO_TRANSACTION,
    ) -> int:
        """Append one record; returns its offset. Raises ValueError for a partition the topic lacks."""
        partitions = self._topics.get(topic)
        if partitions is None:
            self.create_topic(topic, self.default_partitions)
            partitions = self._topics[topic]
        if not 0 <= partition < len(partitions):
            raise ValueError(f"topic '{topic}' has no partition {partition} (it has {len(partitions)})")
        log = partitions[partition]
        offset = len(log.records)
        if headers:
            record = ConsumerRecord(topic, partition, offset, key, value, timestamp, headers)
        else:
            record = ConsumerRecord(topic, partition, offset, key, value, timestamp)
        log.records.append(record)
        log.sequences.append(next(self._sequence))
        log.transactions.append(transaction)
        if transaction == _NO_TRANSACTION:
            self._visible[topic].append(record)
        else:
            log.open_transactions.setdefault(transaction, offset)
            self._open[transaction].add(TopicPartition(topic, partition))
            self._transaction_records[transaction].append(record)
        return offset

    def end_offset(self, tp: TopicPartition) -> int:
        """The high watermark: offset the next entry of ``tp`` will get (0 for a topic that does not exist)."""
        partitions = self._topics.get(tp.topic)
        if partitions is None or tp.partition >= len(partitions):
            return 0
        return len(partitions[tp.partition].records)

    def last_stable_offset(self, tp: TopicPartition) -> int:
        """The first offset of an open transaction in ``tp``, else the high watermark."""
        partitions = self._topics.get(tp[0])
        if partitions is None or tp[1] >= len(partitions):
            return 0
        log = partitions[tp[1]]
        open_transactions = log.open_transactions
        return min(open_transactions.values()) if open_transactions else len(log.records)

    def next_readable(self, tp: TopicPartition, position: int) -> tuple[int, ConsumerRecord | None, int]:
        """From ``position``, skip markers and aborted records; returns the new position, the record there if it
        is readable (``None`` at the end or at an open transaction's record) and its append sequence number."""
        partitions = self._topics.get(tp[0])
        if partitions is None or tp[1] >= len(partitions):
            return position, None, -1
        log = partitions[tp[1]]
        records, transactions = log.records, log.transactions
        while position < len(records):
            transaction = transactions[position]
            if transaction != _NO_TRANSACTION:
                if transaction in self._open:
                    return position, None, -1
                if transaction in self._aborted:
                    position += 1
                    continue
            record = records[position]
            if record is None:
                position += 1
                continue
            return position, record, log.sequences[position]
        return position, None, -1

    def records(self, topic: str) -> list[ConsumerRecord]:
        """What a ``read_committed`` reader sees of ``topic`` (no open or aborted records), in the order the
        records became visible: append order, a transaction's records at its commit."""
        return list(self._visible.get(topic, []))

    def visible_count(self, topic: str) -> int:
        return len(self._visible.get(topic, []))

    def visible_at(self, topic: str, index: int) -> ConsumerRecord | None:
        """The ``index``-th visible record of ``topic`` (see ``records``), if there is one yet."""
        visible = self._visible.get(topic, [])
        return visible[index] if index < len(visible) else None

    # -- transactions ------------------------------------------------------------------------------

    def init_producer(self, transactional_id: str) -> int:
        """Register a producer for ``transactional_id``: aborts the id's open transaction (a previous
        incarnation crashed) and returns the new epoch, which fences older producers of the id."""
        open_transaction = self._transaction_of.pop(transactional_id, None)
        if open_transaction is not None and open_transaction in self._open:
            self.end_transaction(open_transaction, commit=False)
        epoch = self._producer_epochs.get(transactional_id, -1) + 1
        self._producer_epochs[transactional_id] = epoch
        return epoch

    def check_epoch(self, transactional_id: str, epoch: int) -> None:
        """Raises ProducerFencedError when a newer producer registered ``transactional_id``."""
        if self._producer_epochs.get(transactional_id) != epoch:
            raise ProducerFencedError(f"producer '{transactional_id}' (epoch {epoch}) was fenced by a newer one")

    def commit_offsets(self, offsets: Mapping[TopicPartition, int], metadata: Mapping[TopicPartition, str]) -> None:
        """Commit the group's ``offsets``, each with its ``metadata`` (``""`` where it has none, as the broker
        keeps a commit without metadata)."""
        self.committed.update(offsets)
        self.committed_metadata.update({tp: metadata.get(tp, "") for tp in offsets})

    def offset_and_metadata(self, partition: TopicPartition) -> OffsetAndMetadata | None:
        """The group's committed offset of ``partition`` with its metadata; ``None`` when none was committed."""
        offset = self.committed.get(partition)
        return None if offset is None else OffsetAndMetadata(offset, self.committed_metadata.get(partition, ""))

    def begin_transaction(self, transactional_id: str) -> int:
        transaction = next(self._transaction_ids)
        self._open[transaction] = set()
        self._transaction_records[transaction] = []
        self._transaction_of[transactional_id] = transaction
        return transaction

    def end_transaction(self, transaction: int, commit: bool) -> None:
        """Commit or abort: one control marker per partition the transaction wrote."""
        partitions = self._open.pop(transaction)
        records = self._transaction_records.pop(transaction)
        if commit:
            for record in records:
                self._visible[record.topic].append(record)
        else:
            self._aborted.add(transaction)
        for tp in sorted(partitions):
            log = self._topics[tp.topic][tp.partition]
            log.records.append(None)
            log.sequences.append(next(self._sequence))
            log.transactions.append(transaction)
            del log.open_transactions[transaction]


class InMemoryProducer:
    """``ProducerClient`` and ``TransactionalProducerClient`` on an ``InMemoryCluster``.

    Transactions need ``transactional_id`` and ``init_transactions``; without them the producer is plain
    at-least-once. See the module docstring for partitioning.
    """

    def __init__(self, cluster: InMemoryCluster, transactional_id: str | None = None) -> None:
        self.cluster = cluster
        self.transactional_id = transactional_id
        self.closed = False
        self._epoch: int | None = None
        self._transaction: int | None = None
        self._offsets: dict[TopicPartition, int] = {}
        self._metadata: dict[TopicPartition, str] = {}
        self._unacknowledged: list[tuple[Callable[[TopicPartition, int], None], TopicPartition, int]] = []
        self._round_robin: dict[str, int] = {}

    # -- ProducerClient ----------------------------------------------------------------------------

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        partition: int | None = None,
        on_delivery: Callable[[TopicPartition, int], None] | None = None,
        headers: Headers | None = None,
    ) -> None:
        if self.closed:
            raise KafkaClientError("producer is closed")
        if self._epoch is not None:
            self._check()
            if self._transaction is None:
                raise KafkaClientError("transactional producer: send outside a transaction")
        if partition is None:
            partition = self.partition_for(topic, key)
        transaction = self._transaction if self._transaction is not None else _NO_TRANSACTION
        offset = self.cluster.append(topic, partition, key, value, timestamp, headers, transaction)
        if on_delivery is not None:
            self._unacknowledged.append((on_delivery, TopicPartition(topic, partition), offset))

    def partition_for(self, topic: str, key: bytes | None) -> int:
        """The partition a record without an explicit one goes to: murmur2 of the key, round-robin if null."""
        count = self.cluster.partitions(topic)
        if key is not None:
            return 0 if count == 1 else partition_for_key(key, count)  # murmur2 of one partition: always 0
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

    # -- TransactionalProducerClient ---------------------------------------------------------------

    def init_transactions(self, timeout_s: float) -> None:
        if self.transactional_id is None:
            raise KafkaClientError("init_transactions needs a transactional_id")
        self._epoch = self.cluster.init_producer(self.transactional_id)

    def begin_transaction(self) -> None:
        self._check()
        if self._transaction is not None:
            raise KafkaClientError("a transaction is already open")
        assert self.transactional_id is not None
        self._transaction = self.cluster.begin_transaction(self.transactional_id)
        self._offsets = {}

    def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, int],
        group_metadata: object,
        timeout_s: float,
        metadata: Mapping[TopicPartition, str] | None = None,
    ) -> None:
        self._check()
        if self._transaction is None:
            raise KafkaClientError("send_offsets_to_transaction outside a transaction")
        self._offsets.update(offsets)
        self._metadata.update({tp: (metadata or {}).get(tp, "") for tp in offsets})

    def commit_transaction(self, timeout_s: float) -> None:
        self._check()
        if self._transaction is None:
            raise KafkaClientError("commit_transaction without a transaction")
        self._acknowledge()
        self.cluster.end_transaction(self._transaction, commit=True)
        self.cluster.commit_offsets(self._offsets, self._metadata)
        self._transaction, self._offsets, self._metadata = None, {}, {}

    def abort_transaction(self, timeout_s: float) -> None:
        self._check()
        if self._transaction is None:
            return
        self._acknowledge()
        self.cluster.end_transaction(self._transaction, commit=False)
        self._transaction, self._offsets, self._metadata = None, {}, {}

    # -- internals ---------------------------------------------------------------------------------

    def _check(self) -> None:
        if self._epoch is None or self.transactional_id is None:
            raise KafkaClientError("transactions were not initialised (init_transactions)")
        self.cluster.check_epoch(self.transactional_id, self._epoch)

    def _acknowledge(self) -> None:
        acknowledged, self._unacknowledged = self._unacknowledged, []
        for callback, tp, offset in acknowledged:
            callback(tp, offset)


class InMemoryConsumer:
    """``ConsumerClient`` on an ``InMemoryCluster``: the single member of group ``group_id``
    (``read_committed``; see the module docstring)."""

    def __init__(self, cluster: InMemoryCluster, group_id: str = "in-memory") -> None:
        self.cluster = cluster
        self.group_id = group_id
        self.closed = False
        self._listener: RebalanceListener | None = None
        self._topics: list[str] = []
        self._assignment_due = False
        self._generation = 0
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
        """Up to ``max_records`` readable records, oldest append first; never blocks."""
        if self._assignment_due:
            self._assign()
        out: list[ConsumerRecord] = []
        while len(out) < max_records:
            found = self._next()
            if found is None:
                break
            tp, record = found
            out.append(record)
            self._positions[tp] = record.offset + 1
        return out

    def has_fetchable(self) -> bool:
        """True when ``poll`` would return a record (an assignment still due counts as work too)."""
        return self._assignment_due or self._next() is not None

    def commit(
        self, offsets: Mapping[TopicPartition, int], metadata: Mapping[TopicPartition, str] | None = None
    ) -> None:
        self.cluster.commit_offsets(offsets, metadata or {})

    def committed(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int | None]:
        return {tp: self.cluster.committed.get(tp) for tp in partitions}

    def committed_with_metadata(
        self, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        return {tp: self.cluster.offset_and_metadata(tp) for tp in partitions}

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        self._paused.update(partitions)

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        self._paused.difference_update(partitions)

    def seek(self, partition: TopicPartition, offset: int) -> None:
        self._positions[partition] = 0 if offset == OFFSET_BEGINNING else offset

    def lags(self) -> dict[TopicPartition, int]:
        return {tp: self.cluster.last_stable_offset(tp) - pos for tp, pos in self._positions.items()}

    def group_joined(self) -> bool:
        return self._listener is not None

    def group_metadata(self) -> object:
        return GroupMetadata(self.group_id, self._generation)

    def fetched_watermarks(self, partition: TopicPartition) -> tuple[int, int] | None:
        """``(0, last stable offset)``: exact, as if every partition had just been fetched."""
        if partition not in self._positions:
            return None
        return 0, self.cluster.last_stable_offset(partition)

    def close(self) -> None:
        self.closed = True

    def _assign(self) -> None:
        self._assignment_due = False
        self._generation += 1
        partitions = [TopicPartition(topic, p) for topic in self._topics for p in range(self.cluster.partitions(topic))]
        for tp in partitions:
            self._positions[tp] = self.cluster.committed.get(tp, 0)
        assert self._listener is not None
        self._listener.on_partitions_assigned(partitions)

    def _next(self) -> tuple[TopicPartition, ConsumerRecord] | None:
        """The unpaused assigned partition whose next readable record was appended first, and that record."""
        best: tuple[TopicPartition, ConsumerRecord] | None = None
        best_sequence = 0
        for tp, position in self._positions.items():
            if tp in self._paused:
                continue
            position, record, sequence = self.cluster.next_readable(tp, position)
            self._positions[tp] = position
            if record is not None and (best is None or sequence < best_sequence):
                best, best_sequence = (tp, record), sequence
        return best


class _AssignedReader:
    """Reads assigned partitions from given offsets, ``read_committed``, partition by partition."""

    def __init__(self, cluster: InMemoryCluster) -> None:
        self.cluster = cluster
        self.closed = False
        self._positions: dict[TopicPartition, int] = {}

    def assign(self, starts: Mapping[TopicPartition, int]) -> None:
        for tp, offset in starts.items():
            self._positions[tp] = 0 if offset == OFFSET_BEGINNING else offset

    def poll(self, max_records: int, timeout_s: float) -> tuple[list[ConsumerRecord], set[TopicPartition]]:
        """Records, plus the partitions whose end (last stable offset) was reached during this poll."""
        out: list[ConsumerRecord] = []
        at_end: set[TopicPartition] = set()
        for tp in sorted(self._positions):
            while len(out) < max_records:
                position, record, _ = self.cluster.next_readable(tp, self._positions[tp])
                self._positions[tp] = position
                if record is None:
                    break
                out.append(record)
                self._positions[tp] = position + 1
            if self._positions[tp] >= self.cluster.last_stable_offset(tp):
                at_end.add(tp)
        return out, at_end

    def close(self) -> None:
        self.closed = True


class InMemoryRestoreConsumer(_AssignedReader):
    """``RestoreConsumerClient`` on an ``InMemoryCluster``: reads changelog partitions from given offsets."""

    def unassign(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self._positions.pop(tp, None)

    def end_offset(self, partition: TopicPartition, timeout_s: float) -> int:
        return self.cluster.end_offset(partition)


class InMemoryGlobalConsumer(_AssignedReader):
    """``GlobalConsumerClient`` on an ``InMemoryCluster``: reads whole global topics."""

    def assign(self, starts: Mapping[TopicPartition, int]) -> None:
        self._positions = {}
        super().assign(starts)

    def partitions(self, topic: str, timeout_s: float) -> list[int]:
        if not self.cluster.exists(topic):
            raise KafkaClientError(f"global topic '{topic}' does not exist")
        return list(range(self.cluster.partitions(topic)))

    def watermarks(self, partition: TopicPartition, timeout_s: float) -> tuple[int, int]:
        return 0, self.cluster.end_offset(partition)

    def positions(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self._positions[tp] for tp in partitions if tp in self._positions}

    def has_fetchable(self) -> bool:
        return any(self.cluster.next_readable(tp, pos)[1] is not None for tp, pos in self._positions.items())
