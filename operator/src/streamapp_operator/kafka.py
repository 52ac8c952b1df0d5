"""The operator's seam to Kafka: the only module of ``streamapp_operator`` that imports ``confluent_kafka``.

:class:`KafkaAdmin` is the protocol the rest of the operator uses (tests pass a hand-written fake);
:class:`ConfluentKafkaAdmin` implements it with confluent-kafka's ``AdminClient``. Every call is bounded by
``timeout`` seconds and raises :class:`KafkaUnavailable` when the cluster cannot answer, so a reconcile
turns an unreachable broker into a condition instead of a crash.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec


class KafkaUnavailable(Exception):
    """Kafka did not answer an admin request in time, or refused it; the message says which and why."""


@dataclass(frozen=True)
class TopicSpec:
    """A topic to create: ``config`` holds topic-level configs such as ``cleanup.policy``."""

    name: str
    partitions: int
    config: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class GroupLag:
    """Consumer group state and lag over a set of topics.

    ``lag`` sums, over every partition, the high watermark minus the group's committed offset; a partition
    the group has never committed counts its whole retained content (high minus low watermark), since a
    Kafka Streams application starts from the earliest offset. ``state`` uses Kafka's names
    (``Stable``, ``Empty``, ``PreparingRebalance``, ``Dead``...).
    """

    lag: int
    state: str


class KafkaAdmin(Protocol):
    """Admin operations the operator needs, against one Kafka cluster."""

    def partition_counts(self, topics: Iterable[str]) -> dict[str, int]:
        """Partition count of each of ``topics`` that exists; absent topics are left out."""
        ...

    def create_topics(self, topics: Sequence[TopicSpec], replication_factor: int) -> list[str]:
        """Create the topics that do not exist yet; returns the names created. Idempotent."""
        ...

    def group_lag(self, group_id: str, topics: Iterable[str]) -> GroupLag:
        """Lag and state of consumer group ``group_id`` over every partition of ``topics``."""
        ...


class ConfluentKafkaAdmin:
    """:class:`KafkaAdmin` over confluent-kafka's AdminClient; one instance per bootstrap servers string."""

    def __init__(self, bootstrap_servers: str, *, timeout: float = 10.0) -> None:
        self._admin = AdminClient({"bootstrap.servers": bootstrap_servers, "client.id": "streamapp-operator"})
        self._timeout = timeout

    def partition_counts(self, topics: Iterable[str]) -> dict[str, int]:
        wanted = set(topics)
        try:
            metadata = self._admin.list_topics(timeout=self._timeout)
        except KafkaException as exc:
            raise KafkaUnavailable(f"listing topics failed: {_describe(exc)}") from exc
        return {
            name: len(topic.partitions)
            for name, topic in metadata.topics.items()
            if name in wanted and topic.error is None
        }

    def create_topics(self, topics: Sequence[TopicSpec], replication_factor: int) -> list[str]:
        existing = self.partition_counts(topic.name for topic in topics)
        missing = [topic for topic in topics if topic.name not in existing]
        if not missing:
            return []
        requests = [
            NewTopic(t.name, num_partitions=t.partitions, replication_factor=replication_factor, config=dict(t.config))
            for t in missing
        ]
        futures = self._admin.create_topics(requests, operation_timeout=self._timeout, request_timeout=self._timeout)
        created = []
        for name, future in futures.items():
            try:
                future.result()
            except KafkaException as exc:
                if exc.args and exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                    continue
                raise KafkaUnavailable(f"creating topic {name!r} failed: {_describe(exc)}") from exc
            created.append(name)
        return sorted(created)

    def group_lag(self, group_id: str, topics: Iterable[str]) -> GroupLag:
        counts = self.partition_counts(topics)
        partitions = [TopicPartition(t, p) for t, n in sorted(counts.items()) for p in range(n)]
        state = self._group_state(group_id)
        if not partitions:
            return GroupLag(lag=0, state=state)
        committed = self._committed(group_id, partitions)
        high = self._offsets(partitions, OffsetSpec.latest())
        low = self._offsets(partitions, OffsetSpec.earliest())
        lag = 0
        for key, end in high.items():
            start = committed.get(key)
            lag += max(0, end - (start if start is not None and start >= 0 else low[key]))
        return GroupLag(lag=lag, state=state)

    def _group_state(self, group_id: str) -> str:
        future = self._admin.describe_consumer_groups([group_id], request_timeout=self._timeout)[group_id]
        try:
            description = future.result()
        except KafkaException as exc:
            if exc.args and exc.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND:
                return "Dead"
            raise KafkaUnavailable(f"describing consumer group {group_id!r} failed: {_describe(exc)}") from exc
        return _camel(description.state.name)

    def _committed(self, group_id: str, partitions: list[TopicPartition]) -> dict[tuple[str, int], int]:
        request = [ConsumerGroupTopicPartitions(group_id, partitions)]
        future = self._admin.list_consumer_group_offsets(request, request_timeout=self._timeout)[group_id]
        try:
            result = future.result()
        except KafkaException as exc:
            raise KafkaUnavailable(f"reading offsets of group {group_id!r} failed: {_describe(exc)}") from exc
        return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions if tp.error is None}

    def _offsets(self, partitions: list[TopicPartition], spec: Any) -> dict[tuple[str, int], int]:
        futures = self._admin.list_offsets({tp: spec for tp in partitions}, request_timeout=self._timeout)
        offsets = {}
        for tp, future in futures.items():
            try:
                offsets[(tp.topic, tp.partition)] = future.result().offset
            except KafkaException as exc:
                where = f"{tp.topic}[{tp.partition}]"
                raise KafkaUnavailable(f"listing offsets of {where} failed: {_describe(exc)}") from exc
        return offsets


_admins: dict[str, ConfluentKafkaAdmin] = {}
_admins_lock = threading.Lock()


def admin_for(bootstrap_servers: str) -> ConfluentKafkaAdmin:
    """The shared admin client of one Kafka cluster (AdminClients are thread-safe and costly to build)."""
    with _admins_lock:
        admin = _admins.get(bootstrap_servers)
        if admin is None:
            admin = _admins[bootstrap_servers] = ConfluentKafkaAdmin(bootstrap_servers)
        return admin


def _describe(exc: KafkaException) -> str:
    error = exc.args[0] if exc.args else None
    return error.str() if isinstance(error, KafkaError) else str(exc)


def _camel(upper_snake: str) -> str:
    """``PREPARING_REBALANCE`` -> ``PreparingRebalance`` (Kafka's own spelling of group states)."""
    return "".join(part.capitalize() for part in re.split(r"_+", upper_snake.lower()) if part)
