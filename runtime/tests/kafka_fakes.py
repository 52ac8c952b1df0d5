"""Hand-written fakes of the Kafka seam (``streamapp.kafka.types``) over an in-memory cluster.

``FakeCluster`` holds topics as lists of records per partition and the group's committed offsets;
``FakeConsumer``, ``FakeProducer`` and ``FakeRestoreConsumer`` implement the client protocols on it. Tests
drive rebalances explicitly with ``FakeConsumer.assign`` / ``revoke`` / ``lose``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from streamapp.kafka.types import (
    OFFSET_BEGINNING,
    CommitFailedError,
    ConsumerRecord,
    DeliveryError,
    OffsetAndMetadata,
    RebalanceListener,
    TopicPartition,
)
from streamapp.partitioner import partition_for_key


@dataclass
class FakeCluster:
    topics: dict[str, list[list[ConsumerRecord]]] = field(default_factory=dict)
    committed: dict[TopicPartition, int] = field(default_factory=dict)
    committed_metadata: dict[TopicPartition, str] = field(default_factory=dict)

    def create_topic(self, name: str, partitions: int) -> None:
        self.topics.setdefault(name, [[] for _ in range(partitions)])

    def append(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        timestamp: int = 0,
        headers: list[tuple[str, bytes]] | None = None,
    ) -> int:
        log = self.topics[topic][partition]
        offset = len(log)
        log.append(ConsumerRecord(topic, partition, offset, key, value, timestamp, headers))
        return offset

    def end_offset(self, tp: TopicPartition) -> int:
        return len(self.topics[tp.topic][tp.partition])

    def records(self, topic: str) -> list[ConsumerRecord]:
        return [r for log in self.topics[topic] for r in log]


class FakeProducer:
    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.queued: list[
            tuple[
                str,
                int,
                bytes | None,
                bytes | None,
                int,
                Callable[[TopicPartition, int], None] | None,
                list[tuple[str, bytes]] | None,
            ]
        ] = []
        self.fail_next_flush = False
        self.closed = False

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        partition: int | None = None,
        on_delivery: Callable[[TopicPartition, int], None] | None = None,
        headers: list[tuple[str, bytes]] | None = None,
    ) -> None:
        if partition is None:
            count = len(self.cluster.topics[topic])
            partition = partition_for_key(key, count) if key is not None else random.randrange(count)
        self.queued.append((topic, partition, key, value, timestamp, on_delivery, headers))

    def poll(self) -> None:
        pass

    def flush(self, timeout_s: float) -> None:
        queued, self.queued = self.queued, []
        if self.fail_next_flush:
            self.fail_next_flush = False
            raise DeliveryError("broker unavailable (fake)")
        for topic, partition, key, value, timestamp, on_delivery, headers in queued:
            offset = self.cluster.append(topic, partition, key, value, timestamp, headers)
            if on_delivery is not None:
                on_delivery(TopicPartition(topic, partition), offset)

    def close(self, timeout_s: float) -> None:
        self.closed = True


class FakeConsumer:
    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.listener: RebalanceListener | None = None
        self.topics: list[str] = []
        self.positions: dict[TopicPartition, int] = {}
        self.paused: set[TopicPartition] = set()
        self.fail_next_commit = False
        self.commits: list[dict[TopicPartition, int]] = []
        self.closed = False

    # -- test controls -----------------------------------------------------------------------------

    def assign(self, partitions: Sequence[TopicPartition]) -> None:
        for tp in partitions:
            self.positions[tp] = self.cluster.committed.get(tp, 0)
        assert self.listener is not None
        self.listener.on_partitions_assigned(list(partitions))

    def revoke(self, partitions: Sequence[TopicPartition]) -> None:
        assert self.listener is not None
        self.listener.on_partitions_revoked(list(partitions))
        for tp in partitions:
            self.positions.pop(tp, None)
            self.paused.discard(tp)

    def lose(self, partitions: Sequence[TopicPartition]) -> None:
        assert self.listener is not None
        self.listener.on_partitions_lost(list(partitions))
        for tp in partitions:
            self.positions.pop(tp, None)
            self.paused.discard(tp)

    # -- ConsumerClient ----------------------------------------------------------------------------

    def subscribe(self, topics: Sequence[str], listener: RebalanceListener) -> None:
        self.topics = list(topics)
        self.listener = listener

    def poll(self, max_records: int, timeout_s: float) -> list[ConsumerRecord]:
        out: list[ConsumerRecord] = []
        for tp, position in sorted(self.positions.items()):
            if tp in self.paused:
                continue
            log = self.cluster.topics[tp.topic][tp.partition]
            batch = log[position : position + max_records - len(out)]
            out.extend(batch)
            self.positions[tp] = position + len(batch)
        return out

    def commit(
        self, offsets: Mapping[TopicPartition, int], metadata: Mapping[TopicPartition, str] | None = None
    ) -> None:
        if self.fail_next_commit:
            self.fail_next_commit = False
            raise CommitFailedError("group rebalanced (fake)")
        self.commits.append(dict(offsets))
        self.cluster.committed.update(offsets)
        self.cluster.committed_metadata.update({tp: (metadata or {}).get(tp, "") for tp in offsets})

    def committed(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int | None]:
        return {tp: self.cluster.committed.get(tp) for tp in partitions}

    def committed_with_metadata(
        self, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        committed = self.cluster.committed
        return {
            tp: OffsetAndMetadata(committed[tp], self.cluster.committed_metadata.get(tp, ""))
            if tp in committed
            else None
            for tp in partitions
        }

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        self.paused.update(partitions)

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        self.paused.difference_update(partitions)

    def seek(self, partition: TopicPartition, offset: int) -> None:
        self.positions[partition] = 0 if offset == OFFSET_BEGINNING else offset

    def lags(self) -> dict[TopicPartition, int]:
        return {tp: self.cluster.end_offset(tp) - pos for tp, pos in self.positions.items()}

    def group_joined(self) -> bool:
        return True

    def group_metadata(self) -> object:
        return ("fake-group", id(self))

    def fetched_watermarks(self, partition: TopicPartition) -> tuple[int, int] | None:
        return (0, self.cluster.end_offset(partition))

    def close(self) -> None:
        self.closed = True


class FakeRestoreConsumer:
    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.positions: dict[TopicPartition, int] = {}
        self.records_read = 0
        self.closed = False

    def assign(self, starts: Mapping[TopicPartition, int]) -> None:
        for tp, offset in starts.items():
            self.positions[tp] = 0 if offset == OFFSET_BEGINNING else offset

    def unassign(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self.positions.pop(tp, None)

    def end_offset(self, partition: TopicPartition, timeout_s: float) -> int:
        return self.cluster.end_offset(partition)

    def poll(self, max_records: int, timeout_s: float) -> tuple[list[ConsumerRecord], set[TopicPartition]]:
        out: list[ConsumerRecord] = []
        at_end: set[TopicPartition] = set()
        for tp, position in sorted(self.positions.items()):
            log = self.cluster.topics[tp.topic][tp.partition]
            batch = log[position : position + max_records - len(out)]
            out.extend(batch)
            self.positions[tp] = position + len(batch)
            if self.positions[tp] >= len(log):
                at_end.add(tp)
        self.records_read += len(out)
        return out, at_end

    def close(self) -> None:
        self.closed = True


@dataclass
class FakeDeleteRecordsRequest:
    """One ``DeleteRecords`` request of a ``FakeRecordsDeleter``: what it asked, and the group's committed
    offsets when it was sent (to check that nothing uncommitted was ever deleted)."""

    offsets: dict[TopicPartition, int]
    committed_when_sent: dict[TopicPartition, int]
    answered: bool = False
    errors: dict[TopicPartition, str] = field(default_factory=dict)

    def done(self) -> bool:
        return self.answered

    def failures(self) -> dict[TopicPartition, str]:
        return dict(self.errors) if self.answered else {}


class FakeRecordsDeleter:
    """The admin's ``delete_records`` (``streamapp.processing.purge.RecordsDeleter``) over a ``FakeCluster``.

    Answers at once unless ``hold`` (then ``answer()`` does); ``fail_with`` makes every partition fail with
    that error text; ``raise_on_send`` is raised by the next ``delete_records``. ``low_watermarks`` is each
    partition's earliest offset after the successful deletions.
    """

    def __init__(self, cluster: FakeCluster | None = None) -> None:
        self.cluster = cluster
        self.requests: list[FakeDeleteRecordsRequest] = []
        self.hold = False
        self.fail_with: str | None = None
        self.raise_on_send: Exception | None = None
        self.low_watermarks: dict[TopicPartition, int] = {}

    def delete_records(self, before_offsets: Mapping[TopicPartition, int]) -> FakeDeleteRecordsRequest:
        if self.raise_on_send is not None:
            exc, self.raise_on_send = self.raise_on_send, None
            raise exc
        committed = dict(self.cluster.committed) if self.cluster is not None else {}
        request = FakeDeleteRecordsRequest(dict(before_offsets), committed)
        self.requests.append(request)
        if not self.hold:
            self.answer(request)
        return request

    def answer(self, request: FakeDeleteRecordsRequest | None = None) -> None:
        request = request if request is not None else self.requests[-1]
        request.answered = True
        if self.fail_with is not None:
            request.errors = {tp: self.fail_with for tp in request.offsets}
            return
        for tp, offset in request.offsets.items():
            self.low_watermarks[tp] = max(self.low_watermarks.get(tp, 0), offset)
