"""The Kafka seam: plain data types and the client protocols the processing layer talks to.

``streamapp.kafka.clients`` implements these protocols on confluent-kafka; unit tests implement them with
hand-written fakes. Nothing here imports confluent-kafka.

Offsets follow Kafka's conventions: a *committed* offset is the offset of the next record to read
(last processed + 1); a *changelog* offset recorded for a store is the offset of the last record applied.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

__all__ = [
    "OFFSET_BEGINNING",
    "CommitFailedError",
    "ConsumerClient",
    "ConsumerRecord",
    "DeliveryError",
    "GroupDescription",
    "GroupMember",
    "Headers",
    "KafkaAuthenticationError",
    "KafkaClientError",
    "OffsetAndMetadata",
    "ProducerClient",
    "ProducerFencedError",
    "RebalanceListener",
    "RestoreConsumerClient",
    "TopicPartition",
    "TransactionAbortedError",
    "TransactionalProducerClient",
    "UnreleasedInstanceIdError",
    "parse_client_id",
    "parse_member_endpoint",
]

OFFSET_BEGINNING = -2
"""Start offset meaning "the earliest offset still in the log" (librdkafka's ``OFFSET_BEGINNING``)."""

Headers = list[tuple[str, bytes]]
"""Record headers: ``(name, value bytes)`` pairs in order (names may repeat, as in Kafka)."""


class TopicPartition(NamedTuple):
    """One partition of one topic."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class OffsetAndMetadata(NamedTuple):
    """A committed offset (the next offset to read) and the metadata string committed with it (Kafka's
    ``OffsetAndMetadata``; ``""`` when the commit carried none)."""

    offset: int
    metadata: str = ""


@dataclass(slots=True, unsafe_hash=True)
class ConsumerRecord:
    """A record as read from Kafka: raw key and value bytes (``None`` = null), timestamp in epoch ms,
    headers (``None`` when the record has none).

    Treat it as immutable (it is hashed by value). It is not a frozen dataclass only because one is built per
    consumed record: a frozen one costs ~1 us more to construct (``object.__setattr__`` per field)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: Headers | None = None

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


class KafkaClientError(RuntimeError):
    """A Kafka client operation failed in a way the stream thread cannot repair by itself."""


class KafkaAuthenticationError(KafkaClientError):
    """The brokers rejected the client's credentials (SASL authentication failed): retrying with the same
    configuration cannot succeed."""


class DeliveryError(KafkaClientError):
    """A produced record was not acknowledged by the broker (the first failure is reported)."""


class CommitFailedError(KafkaClientError):
    """An offset commit was rejected because the group rebalanced: the partitions may belong to another
    member now (Kafka Streams' ``TaskMigratedException``). The tasks must be closed without committing."""


class ProducerFencedError(KafkaClientError):
    """The transactional producer was fenced: another producer with the same ``transactional.id`` initialised
    transactions, or its epoch is stale (Kafka's ``ProducerFencedException`` / ``InvalidProducerEpochException``).
    The client is unusable: the stream thread closes its tasks without commit, creates a new producer and
    revives its tasks from the last commit (Kafka Streams' ``TaskMigratedException`` handling)."""


class TransactionAbortedError(KafkaClientError):
    """The open transaction had to be aborted (a record was not delivered, the coordinator asked for an abort,
    or the offsets were rejected): nothing since the last commit is visible to ``read_committed`` readers,
    so the tasks restart from their committed offsets and stores (Kafka Streams' ``TaskCorruptedException``)."""


class UnreleasedInstanceIdError(KafkaClientError):
    """The broker still holds a member with this ``group.instance.id`` (KIP-848 static membership after a
    crash): the consumer cannot join until that member's session times out."""


class RebalanceListener(Protocol):
    """Receives partition ownership changes, called from inside ``ConsumerClient.poll``.

    With the incremental (KIP-848) protocol each call carries only the change; with the classic eager
    protocol a revocation carries every owned partition and the next assignment the new full set.
    When ``on_partitions_assigned`` runs, the partitions are already assigned, so it may pause them.
    """

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None: ...

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None: ...

    def on_partitions_lost(self, partitions: list[TopicPartition]) -> None: ...


class ConsumerClient(Protocol):
    """The group consumer of a stream thread (``enable.auto.commit=false``)."""

    def subscribe(self, topics: Sequence[str], listener: RebalanceListener) -> None: ...

    def poll(self, max_records: int, timeout_s: float) -> list[ConsumerRecord]:
        """Up to ``max_records`` records; rebalance callbacks run inside this call."""
        ...

    def commit(
        self, offsets: Mapping[TopicPartition, int], metadata: Mapping[TopicPartition, str] | None = None
    ) -> None:
        """Commit synchronously, each partition with its ``metadata`` string (none: ``""``; the broker bounds its
        length by ``offset.metadata.max.bytes``, 4096 by default). Raises CommitFailedError (group rebalanced) or
        KafkaClientError."""
        ...

    def committed(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int | None]:
        """The group's committed offsets (``None`` where nothing was committed), asked of the broker."""
        ...

    def committed_with_metadata(
        self, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """``committed``, each offset with the metadata committed with it (one request)."""
        ...

    def pause(self, partitions: Iterable[TopicPartition]) -> None: ...

    def resume(self, partitions: Iterable[TopicPartition]) -> None: ...

    def seek(self, partition: TopicPartition, offset: int) -> None: ...

    def lags(self) -> dict[TopicPartition, int]:
        """Records between the consumer's position and the end, per partition, from the client's latest
        statistics (no broker round trip; about a second old)."""
        ...

    def group_joined(self) -> bool:
        """True once the consumer has found its group coordinator and joined (or is joining) the group."""
        ...

    def group_metadata(self) -> object:
        """The consumer's group metadata (group id, member id, generation) for
        ``TransactionalProducerClient.send_offsets_to_transaction``: the broker rejects offsets of a member
        that is no longer current (KIP-447 fencing)."""
        ...

    def fetched_watermarks(self, partition: TopicPartition) -> tuple[int, int] | None:
        """``(low, high)`` offsets of ``partition`` as of the last fetch response, without a round trip
        (``high`` is the last stable offset under ``read_committed``); ``None`` while nothing was fetched.
        With the position the task tracks this gives Kafka's ``currentLag``."""
        ...

    def close(self) -> None:
        """Leave the group (a static member leaves temporarily, keeping its assignment) and free the client."""
        ...


class ProducerClient(Protocol):
    """The producer of a stream thread (``partitioner=murmur2_random``)."""

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
        """Queue one record; without ``partition`` the key's murmur2 hash picks it.

        ``on_delivery(partition, offset)`` runs from ``poll``/``flush`` once the broker acknowledged it.
        Raises DeliveryError when the record cannot even be queued (e.g. larger than ``message.max.bytes``).
        """
        ...

    def poll(self) -> None:
        """Serve delivery callbacks without blocking."""
        ...

    def flush(self, timeout_s: float) -> None:
        """Wait until every queued record is acknowledged. Raises DeliveryError on the first failure."""
        ...

    def close(self, timeout_s: float) -> None: ...


class TransactionalProducerClient(ProducerClient, Protocol):
    """A producer with a ``transactional.id`` (``processing.guarantee=exactly_once_v2``).

    Every method raises ProducerFencedError when the producer was fenced (it is then unusable),
    TransactionAbortedError when the transaction can only be aborted, KafkaClientError otherwise.
    """

    def init_transactions(self, timeout_s: float) -> None:
        """Register the ``transactional.id`` with its coordinator; aborts a transaction a previous producer
        with the same id left open (a crashed worker) and fences that producer."""
        ...

    def begin_transaction(self) -> None: ...

    def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, int],
        group_metadata: object,
        timeout_s: float,
        metadata: Mapping[TopicPartition, str] | None = None,
    ) -> None:
        """Add consumer offsets (next offset to read), each with its ``metadata`` string, to the transaction; they
        commit with it."""
        ...

    def commit_transaction(self, timeout_s: float) -> None:
        """Flush and commit the transaction. A retriable failure is retried inside the call."""
        ...

    def abort_transaction(self, timeout_s: float) -> None: ...


class RestoreConsumerClient(Protocol):
    """A consumer without a group that reads changelog partitions from given offsets (the restore consumer)."""

    def assign(self, starts: Mapping[TopicPartition, int]) -> None:
        """Start reading these partitions at these offsets (``OFFSET_BEGINNING`` for the whole log)."""
        ...

    def unassign(self, partitions: Iterable[TopicPartition]) -> None: ...

    def end_offset(self, partition: TopicPartition, timeout_s: float) -> int:
        """The partition's current end offset (high watermark), asked of the broker."""
        ...

    def poll(self, max_records: int, timeout_s: float) -> tuple[list[ConsumerRecord], set[TopicPartition]]:
        """Records, plus the partitions whose end was reached during this poll."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class GroupMember:
    """One consumer-group member as the broker describes it: its ``client.id`` (which names the instance and
    stream thread, ``streamapp.kafka.clients.client_id``, read back by ``parse_client_id``) and its assigned
    partitions."""

    client_id: str
    group_instance_id: str | None
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class GroupDescription:
    """A consumer group's state (``stable``, ``preparing_rebalance``, ``empty``, ...) and members."""

    state: str
    members: tuple[GroupMember, ...]


def parse_client_id(application_id: str, value: str) -> tuple[str, int] | None:
    """``(instance, thread index)`` of a group consumer's client id made by ``streamapp.kafka.clients.client_id``
    (``<application.id>-<instance>-StreamThread-<n>-consumer``, optionally ``@<application.server>``); ``None``
    for another shape (a foreign member)."""
    parsed = parse_member_endpoint(application_id, value)
    return None if parsed is None else (parsed[0], parsed[1])


def parse_member_endpoint(application_id: str, value: str) -> tuple[str, int, str | None] | None:
    """``(instance, thread index, application.server or None)`` of a group consumer's client id (see
    ``parse_client_id``): the endpoint an instance advertises for interactive queries (Kafka Streams carries
    ``application.server`` in its subscription's user data; librdkafka has no assignor hook, so it rides in the
    client id: docs/adr/0012-query-endpoints.md)."""
    match = re.fullmatch(rf"{re.escape(application_id)}-(.+)-StreamThread-(\d+)-consumer(?:@([^@\s]+))?", value)
    if match is None:
        return None
    return match.group(1), int(match.group(2)) - 1, match.group(3)
