"""Topic administration: partition counts of existing topics, idempotent topic creation, group descriptions,
record deletion (the purge of consumed repartition records), and the application reset
(``TopicAdmin.execute_reset`` of a ``streamapp.kafka.reset_plan.ResetPlan``)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from streamapp.kafka.reset_plan import ActiveMembersError, ResetPlan, ToDatetime, offsets_to_commit
from streamapp.kafka.types import (
    GroupDescription,
    GroupMember,
    KafkaAuthenticationError,
    KafkaClientError,
    TopicPartition,
)

__all__ = [
    "DeleteRecordsResult",
    "GroupDescription",
    "GroupMember",
    "TopicAdmin",
    "TopicMismatchError",
    "TopicSpec",
]

log = logging.getLogger(__name__)


class TopicMismatchError(KafkaClientError):
    """A topic exists with a different partition count than the topology needs."""


@dataclass(frozen=True)
class TopicSpec:
    """A topic to create: name, partition count, topic configs (``cleanup.policy`` ...)."""

    name: str
    partitions: int
    config: Mapping[str, str] = field(default_factory=dict)


class DeleteRecordsResult:
    """The answer to one ``DeleteRecords`` request, read without blocking (Kafka's ``DeleteRecordsResult``):
    one future per partition, completed by librdkafka's background thread."""

    def __init__(self, futures: Mapping[TopicPartition, Future[Any]]) -> None:
        self._futures = dict(futures)

    def done(self) -> bool:
        """True once every partition's future completed (deleted or failed)."""
        return all(future.done() for future in self._futures.values())

    def failures(self) -> dict[TopicPartition, str]:
        """The completed partitions that failed, with the broker's (or client's) error text."""
        failed: dict[TopicPartition, str] = {}
        for tp, future in self._futures.items():
            if future.done() and (exc := future.exception()) is not None:
                failed[tp] = _error_text(exc)
        return failed


class TopicAdmin:
    """A small AdminClient wrapper. ``settings`` are librdkafka settings (``bootstrap.servers`` ...)."""

    def __init__(self, settings: Mapping[str, Any], timeout_s: float = 30.0) -> None:
        self._authentication_error: str | None = None
        config: dict[str, Any] = {"error_cb": self._on_error, **settings}
        self._admin = AdminClient(config)
        self._timeout_s = timeout_s

    def _on_error(self, error: KafkaError) -> None:
        # librdkafka reports rejected credentials only here; the failed request itself says "transport failure"
        if error.code() in (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED):
            self._authentication_error = str(error.str())

    def partition_counts(self, topics: Iterable[str]) -> dict[str, int]:
        """Partition count of each existing topic among ``topics``; missing topics are left out.

        Raises KafkaAuthenticationError when the brokers rejected the credentials, KafkaClientError when the
        cluster cannot be reached.
        """
        wanted = set(topics)
        return {name: count for name, count in self.all_partition_counts().items() if name in wanted}

    def all_partition_counts(self) -> dict[str, int]:
        """Partition count of every topic of the cluster (Kafka's own ``__`` topics included); errors as
        ``partition_counts``."""
        try:
            metadata = self._admin.list_topics(timeout=self._timeout_s)
        except KafkaException as exc:
            self._admin.poll(0)  # serves error_cb: were the credentials rejected?
            if self._authentication_error is not None:
                raise KafkaAuthenticationError(f"cannot read cluster metadata: {self._authentication_error}") from exc
            raise KafkaClientError(f"cannot read cluster metadata: {exc.args[0].str()}") from exc
        return {name: len(topic.partitions) for name, topic in metadata.topics.items() if topic.error is None}

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

    def delete_records(
        self, before_offsets: Mapping[TopicPartition, int], timeout_s: float = 60.0
    ) -> DeleteRecordsResult:
        """Ask the partition leaders to delete every record before each offset (``Admin.deleteRecords``; the
        partition's low watermark, its earliest offset, moves there). Returns at once: the result is read
        later with ``DeleteRecordsResult.done`` / ``failures``. ``timeout_s`` bounds the whole request, like
        Kafka's ``default.api.timeout.ms`` (60 s).

        Offsets must be >= 0 (librdkafka reads -1 as "delete everything"): ValueError otherwise. Raises
        KafkaClientError when the request cannot be sent.
        """
        if any(offset < 0 for offset in before_offsets.values()):
            raise ValueError(f"delete_records needs offsets >= 0, got {dict(before_offsets)}")
        if not before_offsets:
            return DeleteRecordsResult({})
        request = [KafkaTopicPartition(tp.topic, tp.partition, offset) for tp, offset in before_offsets.items()]
        try:
            futures = self._admin.delete_records(request, request_timeout=timeout_s, operation_timeout=timeout_s)
        except KafkaException as exc:
            raise KafkaClientError(f"cannot send delete-records: {exc.args[0].str()}") from exc
        return DeleteRecordsResult({TopicPartition(tp.topic, tp.partition): future for tp, future in futures.items()})

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

    def list_offsets(self, partitions: Iterable[TopicPartition], at: str | int) -> dict[TopicPartition, int]:
        """Offsets of ``partitions`` (``Admin.listOffsets``): ``at`` = ``"earliest"``, ``"latest"`` (the end
        offset), or a timestamp in ms (the first offset whose record timestamp is at or after it; -1 when there
        is none). Raises KafkaClientError naming the partition when the broker cannot answer."""
        spec = {"earliest": OffsetSpec.earliest(), "latest": OffsetSpec.latest()}.get(str(at))
        if spec is None:
            spec = OffsetSpec.for_timestamp(int(at))
        request = {KafkaTopicPartition(tp.topic, tp.partition): spec for tp in partitions}
        if not request:
            return {}
        try:
            futures = self._admin.list_offsets(request, request_timeout=self._timeout_s)
        except KafkaException as exc:
            raise KafkaClientError(f"cannot list offsets: {_error_text(exc)}") from exc
        offsets: dict[TopicPartition, int] = {}
        for ktp, future in futures.items():
            tp = TopicPartition(ktp.topic, ktp.partition)
            try:
                offsets[tp] = int(future.result().offset)
            except KafkaException as exc:
                raise KafkaClientError(f"cannot list offsets of {tp.topic}:{tp.partition}: {_error_text(exc)}") from exc
        return offsets

    def committed_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int | None]:
        """The group's committed offsets of ``partitions`` (``None`` where none is committed). Raises
        KafkaClientError when the broker cannot answer."""
        request = [KafkaTopicPartition(tp.topic, tp.partition) for tp in partitions]
        answer = self._group_offsets(self._admin.list_consumer_group_offsets, group_id, request, "read committed")
        return {
            TopicPartition(ktp.topic, ktp.partition): ktp.offset if ktp.offset >= 0 else None
            for ktp in answer.topic_partitions
        }

    def execute_reset(self, plan: ResetPlan) -> dict[TopicPartition, int]:
        """Carry out ``plan`` on the cluster (Kafka's ``StreamsResetter``): check again that the group has no
        member, commit the target offsets of the input partitions for the group (``alterConsumerGroupOffsets``),
        then delete the internal topics. Returns the committed offsets. The local state directory is the
        caller's.

        Raises ActiveMembersError when a member joined since the plan was made (nothing changed then),
        KafkaClientError when the broker refuses a step (the steps before it stay done; running the reset
        again is safe: every step is idempotent).
        """
        group = self.describe_group(plan.group_id)
        if group.members:
            raise ActiveMembersError(plan.group_id, [member.client_id for member in group.members])
        earliest = self.list_offsets(plan.partitions, "earliest")
        end = self.list_offsets(plan.partitions, "latest")
        by_time = (
            dict(self.list_offsets(plan.partitions, plan.target.timestamp_ms))
            if isinstance(plan.target, ToDatetime)
            else None
        )
        offsets = offsets_to_commit(plan, earliest=earliest, end=end, by_time=by_time)
        if offsets:
            self._alter_group_offsets(plan.group_id, offsets)
        self.delete_topics(plan.internal_topics)
        return offsets

    def _alter_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        request = [KafkaTopicPartition(tp.topic, tp.partition, offset) for tp, offset in offsets.items()]
        answer = self._group_offsets(self._admin.alter_consumer_group_offsets, group_id, request, "reset the")
        failed = [f"{t.topic}:{t.partition} ({t.error.str()})" for t in answer.topic_partitions if t.error is not None]
        if failed:
            raise KafkaClientError(f"cannot reset the offsets of group {group_id}: {', '.join(failed)}")

    def _group_offsets(self, call: Any, group_id: str, request: list[KafkaTopicPartition], what: str) -> Any:
        """One group-offsets request (list or alter) for ``group_id``; its ConsumerGroupTopicPartitions."""
        try:
            return call([ConsumerGroupTopicPartitions(group_id, request)], request_timeout=self._timeout_s)[
                group_id
            ].result()
        except KafkaException as exc:
            raise KafkaClientError(f"cannot {what} offsets of group {group_id}: {_error_text(exc)}") from exc


def _error_text(exc: BaseException) -> str:
    """A KafkaException's error text (``KafkaError.str()``), else the exception's text."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return str(exc.args[0].str())
    return str(exc) or type(exc).__name__
