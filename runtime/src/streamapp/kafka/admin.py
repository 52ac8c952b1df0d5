"""Topic administration: partition counts of existing topics and idempotent topic creation."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from streamapp.kafka.types import KafkaClientError, TopicPartition

__all__ = ["GroupDescription", "GroupMember", "TopicAdmin", "TopicMismatchError", "TopicSpec"]

log = logging.getLogger(__name__)


class TopicMismatchError(KafkaClientError):
    """A topic exists with a different partition count than the topology needs."""


@dataclass(frozen=True)
class TopicSpec:
    """A topic to create: name, partition count, topic configs (``cleanup.policy`` ...)."""

    name: str
    partitions: int
    config: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class GroupMember:
    """One consumer-group member as the broker describes it: its ``client.id`` (which names the instance and
    stream thread, ``streamapp.kafka.clients.client_id``) and its assigned partitions."""

    client_id: str
    group_instance_id: str | None
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class GroupDescription:
    """A consumer group's state (``stable``, ``preparing_rebalance``, ``empty``, ...) and members."""

    state: str
    members: tuple[GroupMember, ...]


class TopicAdmin:
    """A small AdminClient wrapper. ``settings`` are librdkafka settings (``bootstrap.servers`` ...)."""

    def __init__(self, settings: Mapping[str, Any], timeout_s: float = 30.0) -> None:
        self._admin = AdminClient(dict(settings))
        self._timeout_s = timeout_s

    def partition_counts(self, topics: Iterable[str]) -> dict[str, int]:
        """Partition count of each existing topic among ``topics``; missing topics are left out.

        Raises KafkaClientError when the cluster cannot be reached.
        """
        wanted = set(topics)
        try:
            metadata = self._admin.list_topics(timeout=self._timeout_s)
        except KafkaException as exc:
            raise KafkaClientError(f"cannot read cluster metadata: {exc.args[0].str()}") from exc
        return {
            name: len(topic.partitions)
            for name, topic in metadata.topics.items()
            if name in wanted and topic.error is None
        }

    def ensure_topics(self, specs: Sequence[TopicSpec], replication_factor: int = -1) -> list[str]:
        """Create the topics that do not exist; returns the names created.

        Existing topics are left as they are if their partition count matches; otherwise raises
        TopicMismatchError (Kafka Streams refuses to start in that case too).
        """
        existing = self.partition_counts(spec.name for spec in specs)
        for spec in specs:
            count = existing.get(spec.name)
            if count is not None and count != spec.partitions:
                raise TopicMismatchError(
                    f"topic {spec.name} has {count} partitions but the topology needs {spec.partitions}"
                )
        missing = [spec for spec in specs if spec.name not in existing]
        if not missing:
            return []
        futures = self._admin.create_topics(
            [NewTopic(s.name, s.partitions, replication_factor, config=dict(s.config)) for s in missing],
            request_timeout=self._timeout_s,
        )
        created: list[str] = []
        for name, future in futures.items():
            try:
                future.result()
                created.append(name)
                log.info("Created topic %s", name)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise KafkaClientError(f"cannot create topic {name}: {exc.args[0].str()}") from exc
        return created

    def delete_topics(self, names: Sequence[str]) -> None:
        """Delete topics (missing ones are ignored). For tests and tooling."""
        if not names:
            return
        for name, future in self._admin.delete_topics(list(names), request_timeout=self._timeout_s).items():
            try:
                future.result()
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                    raise KafkaClientError(f"cannot delete topic {name}: {exc.args[0].str()}") from exc

    def describe_group(self, group_id: str) -> GroupDescription:
        """The group's state and members with their assignments (classic and KIP-848 groups alike).

        Raises KafkaClientError when the broker cannot be asked.
        """
        try:
            description = self._admin.describe_consumer_groups([group_id], request_timeout=self._timeout_s)[
                group_id
            ].result(timeout=self._timeout_s)
        except KafkaException as exc:
            raise KafkaClientError(f"cannot describe group {group_id}: {exc.args[0].str()}") from exc
        state = str(getattr(description.state, "name", description.state)).lower()
        members = tuple(
            GroupMember(
                client_id=str(member.client_id),
                group_instance_id=member.group_instance_id,
                partitions=tuple(
                    TopicPartition(tp.topic, tp.partition)
                    for tp in (member.assignment.topic_partitions if member.assignment else [])
                ),
            )
            for member in description.members
        )
        return GroupDescription(state, members)
