"""The operator's seam to Kafka: the only module of ``streamapp_operator`` that imports ``confluent_kafka``.

:class:`KafkaAdmin` is the protocol the rest of the operator uses (tests pass a hand-written fake);
:class:`ConfluentKafkaAdmin` implements it with confluent-kafka's ``AdminClient``. Every call is bounded by
``timeout`` seconds and raises :class:`KafkaUnavailable` when the cluster cannot answer, so a reconcile
turns an unreachable broker into a condition instead of a crash.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, OffsetSpec, ResourceType
from streamapp.kafka.admin import TopicAdmin
from streamapp.kafka.reset_plan import ResetError, ResetTarget, is_internal_topic, plan_reset
from streamapp.kafka.types import KafkaClientError

from streamapp_operator.connection import KafkaConnection
from streamapp_operator.kafka_wire import LeaveGroupFailed, WireSecurity, remove_static_members


class KafkaUnavailable(Exception):
    """Kafka did not answer an admin request in time, or refused it; the message says which and why."""


class TopicCreationFailed(Exception):
    """Kafka answered a topic creation with an error that a retry does not fix (a replication factor
    larger than the brokers, a policy, missing rights); the message is Kafka's answer."""


#: Topic creation errors that are Kafka's answer about the request, not about its availability.
_TOPIC_REFUSALS = frozenset(
    {
        KafkaError.INVALID_REPLICATION_FACTOR,
        KafkaError.INVALID_PARTITIONS,
        KafkaError.INVALID_CONFIG,
        KafkaError.TOPIC_EXCEPTION,
        KafkaError.POLICY_VIOLATION,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError.INVALID_REPLICA_ASSIGNMENT,
    }
)


@dataclass(frozen=True)
class TopicSpec:
    """A topic to create: ``config`` holds topic-level configs such as ``cleanup.policy``."""

    name: str
    partitions: int
    config: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class GroupMember:
    """A member of a consumer group as the coordinator describes it."""

    client_id: str
    instance_id: str | None
    host: str


@dataclass(frozen=True)
class GroupLag:
    """Consumer group state, members and lag over a set of topics.

    ``lag`` sums, over every partition, the high watermark minus the group's committed offset; a partition
    the group has never committed counts its whole retained content (high minus low watermark), since a
    Kafka Streams application starts from the earliest offset. ``state`` uses Kafka's names
    (``Stable``, ``Empty``, ``PreparingRebalance``, ``Dead``...).
    """

    lag: int
    state: str
    members: tuple[GroupMember, ...] = ()


class KafkaAdmin(Protocol):
    """Admin operations the operator needs, against one Kafka cluster."""

    def partition_counts(self, topics: Iterable[str]) -> dict[str, int]:
        """Partition count of each of ``topics`` that exists; absent topics are left out."""
        ...

    def create_topics(self, topics: Sequence[TopicSpec], replication_factor: int) -> list[str]:
        """Create the topics that do not exist yet; returns the names created. Idempotent."""
        ...

    def retention_ms(self, topics: Iterable[str]) -> dict[str, int]:
        """``retention.ms`` of each of ``topics`` that exists (-1: kept for ever). Raises KafkaUnavailable."""
        ...

    def group_lag(self, group_id: str, topics: Iterable[str]) -> GroupLag:
        """Lag, state and members of consumer group ``group_id`` over every partition of ``topics``."""
        ...

    def delete_topics(self, topics: Sequence[str]) -> list[str]:
        """Delete those of ``topics`` that exist; returns the names deleted."""
        ...

    def delete_group(self, group_id: str) -> bool:
        """Delete consumer group ``group_id`` and its committed offsets; False when there was none."""
        ...

    def reset_offsets(self, group_id: str, input_topics: Sequence[str], target: ResetTarget) -> int:
        """Commit ``target``'s offsets of every partition of ``input_topics`` for group ``group_id``, which
        must have no member (the runtime's ``plan_reset`` + ``TopicAdmin.execute_reset``, internal topics
        left alone); returns the partitions committed. Raises KafkaUnavailable, also when the reset is
        refused (a member joined, an input topic is missing)."""
        ...

    def internal_topics(self, application_id: str) -> list[str]:
        """The cluster's ``<application_id>-*-repartition`` and ``-changelog`` topics (Kafka's
        ``StreamsResetter`` rule: by name)."""
        ...

    def remove_static_members(self, group_id: str, instance_ids: Sequence[str]) -> list[str]:
        """Remove the static members ``instance_ids`` (``group.instance.id``) from ``group_id`` now, so that their
        partitions move at once (Kafka's ``RemoveMembersFromConsumerGroup``); returns those that were members."""
        ...


#: librdkafka's own log lines (a broker that refuses connections: one FAIL line per attempt, hundreds a minute)
#: reach the operator's log through this logger, at most ``LOG_BURST`` per admin client every ``LOG_WINDOW`` s.
LIBRDKAFKA_LOGGER = logging.getLogger("streamapp_operator.librdkafka")
LOG_BURST = 10
LOG_WINDOW = 60.0


class RateLimitedLog:
    """librdkafka's ``logger`` for one admin client: its lines go to ``logger``, at most ``burst`` of them every
    ``window`` seconds; the lines left out are counted and said in one warning when the next window opens (so an
    unreachable broker costs a dozen lines a minute, not hundreds). confluent-kafka calls ``log(level, msg, *args)``
    from ``poll`` (the clients poll at every call), in any thread."""

    def __init__(
        self,
        what: str,
        logger: logging.Logger = LIBRDKAFKA_LOGGER,
        burst: int = LOG_BURST,
        window: float = LOG_WINDOW,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._what, self._logger, self._burst, self._window, self._clock = what, logger, burst, window, clock
        self._lock = threading.Lock()
        self._since = clock()
        self._passed = 0
        self._dropped = 0

    def log(self, level: int, msg: str, *args: Any) -> None:
        with self._lock:
            now = self._clock()
            if now - self._since >= self._window:
                if self._dropped:
                    self._logger.warning(
                        "librdkafka (%s): left out %d more lines of the last %.0fs (at most %d a window)",
                        self._what, self._dropped, now - self._since, self._burst,
                    )  # fmt: skip
                self._since, self._passed, self._dropped = now, 0, 0
            if self._passed >= self._burst:
                self._dropped += 1
                return
            self._passed += 1
        self._logger.log(level, msg, *args)


class _ClientErrors:
    """librdkafka's client-level errors (served by ``poll``): the cause behind a bare "transport failure",
    e.g. "SASL authentication error: ... invalid credentials"."""

    def __init__(self) -> None:
        self.last: str | None = None

    def record(self, error: KafkaError) -> None:
        self.last = error.str()


class ConfluentKafkaAdmin:
    """:class:`KafkaAdmin` over confluent-kafka's AdminClient; one instance per bootstrap servers string."""

    def __init__(self, connection: KafkaConnection | str, *, timeout: float = 10.0) -> None:
        if isinstance(connection, str):
            connection = KafkaConnection(connection)
        self._errors = _ClientErrors()
        settings: dict[str, Any] = {**connection.settings(), "client.id": "streamapp-operator"}
        settings["error_cb"] = self._errors.record  # not a method of self: no cycle keeps the client alive
        settings["logger"] = RateLimitedLog(connection.bootstrap_servers)  # served by poll: _serve_logs
        try:
            self._admin = AdminClient(settings)
        except KafkaException as exc:  # librdkafka refuses its settings (an empty password, an unreadable CA)
            raise KafkaUnavailable(f"the operator's Kafka client refused its settings: {_describe(exc)}") from exc
        self._settings = connection.settings()
        self._timeout = timeout

    def _serve_logs(self) -> None:
        """Hand librdkafka's queued log lines (and errors) to their callbacks: they wait for a ``poll``."""
        self._admin.poll(0)

    def _cause(self) -> str:
        """``; <the client's last error>`` when librdkafka reported one (an authentication failure, an
        unresolvable host), else ""."""
        self._admin.poll(0)
        return f"; {self._errors.last}" if self._errors.last else ""

    def partition_counts(self, topics: Iterable[str]) -> dict[str, int]:
        wanted = set(topics)
        self._serve_logs()
        try:
            metadata = self._admin.list_topics(timeout=self._timeout)
        except KafkaException as exc:
            raise KafkaUnavailable(f"listing topics failed: {_describe(exc)}{self._cause()}") from exc
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
                code = exc.args[0].code() if exc.args and isinstance(exc.args[0], KafkaError) else None
                if code == KafkaError.TOPIC_ALREADY_EXISTS:
                    continue
                if code in _TOPIC_REFUSALS:
                    raise TopicCreationFailed(f"Kafka refused topic {name!r}: {_describe(exc)}") from exc
                raise KafkaUnavailable(f"creating topic {name!r} failed: {_describe(exc)}") from exc
            created.append(name)
        return sorted(created)

    def retention_ms(self, topics: Iterable[str]) -> dict[str, int]:
        present = self.partition_counts(topics)
        if not present:
            return {}
        resources = [ConfigResource(ResourceType.TOPIC, name) for name in sorted(present)]
        try:
            described = self._admin.describe_configs(resources, request_timeout=self._timeout)
            configs = {resource.name: future.result() for resource, future in described.items()}
        except KafkaException as exc:
            raise KafkaUnavailable(f"describing topic configs failed: {_describe(exc)}{self._cause()}") from exc
        return {
            name: int(entries["retention.ms"].value)
            for name, entries in configs.items()
            if "retention.ms" in entries and entries["retention.ms"].value is not None
        }

    def group_lag(self, group_id: str, topics: Iterable[str]) -> GroupLag:
        counts = self.partition_counts(topics)
        partitions = [TopicPartition(t, p) for t, n in sorted(counts.items()) for p in range(n)]
        state, members = self._group_state(group_id)
        if not partitions:
            return GroupLag(lag=0, state=state, members=members)
        committed = self._committed(group_id, partitions)
        high = self._offsets(partitions, OffsetSpec.latest())
        low = self._offsets(partitions, OffsetSpec.earliest())
        lag = 0
        for key, end in high.items():
            start = committed.get(key)
            lag += max(0, end - (start if start is not None and start >= 0 else low[key]))
        return GroupLag(lag=lag, state=state, members=members)

    def delete_topics(self, topics: Sequence[str]) -> list[str]:
        existing = sorted(self.partition_counts(topics))
        if not existing:
            return []
        futures = self._admin.delete_topics(existing, operation_timeout=self._timeout, request_timeout=self._timeout)
        deleted = []
        for name, future in futures.items():
            try:
                future.result()
            except KafkaException as exc:
                if exc.args and exc.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    continue
                raise KafkaUnavailable(f"deleting topic {name!r} failed: {_describe(exc)}") from exc
            deleted.append(name)
        return sorted(deleted)

    def delete_group(self, group_id: str) -> bool:
        self._serve_logs()
        future = self._admin.delete_consumer_groups([group_id], request_timeout=self._timeout)[group_id]
        try:
            future.result()
        except KafkaException as exc:
            if exc.args and exc.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND:
                return False
            raise KafkaUnavailable(f"deleting consumer group {group_id!r} failed: {_describe(exc)}") from exc
        return True

    def reset_offsets(self, group_id: str, input_topics: Sequence[str], target: ResetTarget) -> int:
        admin = TopicAdmin(self._settings, timeout_s=self._timeout)
        try:
            plan = plan_reset(group_id, input_topics, target, topics=admin.all_partition_counts())
            return len(admin.execute_reset(replace(plan, internal_topics=())))
        except (ResetError, KafkaClientError) as exc:
            raise KafkaUnavailable(f"resetting the offsets of {group_id!r} failed: {exc}") from exc

    def internal_topics(self, application_id: str) -> list[str]:
        self._serve_logs()
        try:
            metadata = self._admin.list_topics(timeout=self._timeout)
        except KafkaException as exc:
            raise KafkaUnavailable(f"listing topics failed: {_describe(exc)}{self._cause()}") from exc
        return sorted(name for name in metadata.topics if is_internal_topic(application_id, name))

    def remove_static_members(self, group_id: str, instance_ids: Sequence[str]) -> list[str]:
        """Through the group's coordinator (from ``describe_consumer_groups``) with a hand-sent ``LeaveGroup``
        (``kafka_wire``: confluent-kafka does not expose it), over the admin client's own security settings
        (TLS with its CA, SASL PLAIN or SCRAM with its credentials)."""
        if not instance_ids:
            return []
        try:
            security = WireSecurity.from_settings(self._settings)
        except LeaveGroupFailed as exc:
            raise KafkaUnavailable(f"removing members of group {group_id!r}: {exc}") from exc
        future = self._admin.describe_consumer_groups([group_id], request_timeout=self._timeout)[group_id]
        try:
            coordinator = future.result().coordinator
        except KafkaException as exc:
            raise KafkaUnavailable(f"describing consumer group {group_id!r} failed: {_describe(exc)}") from exc
        try:
            answers = remove_static_members(
                (coordinator.host, coordinator.port), group_id, instance_ids, self._timeout, security
            )
        except LeaveGroupFailed as exc:
            raise KafkaUnavailable(str(exc)) from exc
        return [instance for instance in instance_ids if answers.get(instance) == 0]

    def _group_state(self, group_id: str) -> tuple[str, tuple[GroupMember, ...]]:
        self._serve_logs()
        future = self._admin.describe_consumer_groups([group_id], request_timeout=self._timeout)[group_id]
        try:
            description = future.result()
        except KafkaException as exc:
            if exc.args and exc.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND:
                return "Dead", ()
            raise KafkaUnavailable(f"describing consumer group {group_id!r} failed: {_describe(exc)}") from exc
        members = tuple(
            GroupMember(str(m.client_id), m.group_instance_id or None, str(m.host)) for m in description.members or []
        )
        return _camel(description.state.name), members

    def _committed(self, group_id: str, partitions: list[TopicPartition]) -> dict[tuple[str, int], int]:
        self._serve_logs()
        request = [ConsumerGroupTopicPartitions(group_id, partitions)]
        future = self._admin.list_consumer_group_offsets(request, request_timeout=self._timeout)[group_id]
        try:
            result = future.result()
        except KafkaException as exc:
            raise KafkaUnavailable(f"reading offsets of group {group_id!r} failed: {_describe(exc)}") from exc
        return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions if tp.error is None}

    def _offsets(self, partitions: list[TopicPartition], spec: Any) -> dict[tuple[str, int], int]:
        self._serve_logs()
        futures = self._admin.list_offsets({tp: spec for tp in partitions}, request_timeout=self._timeout)
        offsets = {}
        for tp, future in futures.items():
            try:
                offsets[(tp.topic, tp.partition)] = future.result().offset
            except KafkaException as exc:
                where = f"{tp.topic}[{tp.partition}]"
                raise KafkaUnavailable(f"listing offsets of {where} failed: {_describe(exc)}") from exc
        return offsets

    # -- offsets (the StreamReplay controller) ------------------------------------------------------------

    def list_offsets(self, partitions: Mapping[str, int], at: str | int) -> dict[str, dict[int, int]]:
        """Per topic and partition (``partitions``: topic -> count): the ``"earliest"`` or ``"latest"``
        offset, or for a timestamp in ms the offset of the first record at or after it (-1: none)."""
        spec = {"earliest": OffsetSpec.earliest, "latest": OffsetSpec.latest}.get(str(at))
        which = spec() if spec is not None else OffsetSpec.for_timestamp(int(at))
        wanted = [TopicPartition(t, p) for t, n in sorted(partitions.items()) for p in range(n)]
        found: dict[str, dict[int, int]] = {t: {} for t in sorted(partitions)}
        if wanted:
            for (topic, partition), offset in sorted(self._offsets(wanted, which).items()):
                found[topic][partition] = offset
        return found

    def set_group_offsets(self, group_id: str, offsets: Mapping[str, Mapping[int, int]]) -> None:
        """Commit ``offsets`` (topic -> partition -> next offset to read) for consumer group ``group_id``,
        which must have no active member (Kafka refuses otherwise)."""
        partitions = [TopicPartition(t, p, o) for t, parts in sorted(offsets.items()) for p, o in sorted(parts.items())]
        request = [ConsumerGroupTopicPartitions(group_id, partitions)]
        future = self._admin.alter_consumer_group_offsets(request, request_timeout=self._timeout)[group_id]
        try:
            result = future.result()
        except KafkaException as exc:
            raise KafkaUnavailable(f"setting the offsets of group {group_id!r} failed: {_describe(exc)}") from exc
        failed = [f"{tp.topic}[{tp.partition}]: {tp.error}" for tp in result.topic_partitions if tp.error is not None]
        if failed:
            raise KafkaUnavailable(f"setting the offsets of group {group_id!r} failed: {'; '.join(failed)}")

    def committed_offsets(self, group_id: str, partitions: Mapping[str, int]) -> dict[str, dict[int, int]]:
        """The committed offsets of ``group_id`` (topic -> partition -> offset; partitions without one left out)."""
        wanted = [TopicPartition(t, p) for t, n in sorted(partitions.items()) for p in range(n)]
        found: dict[str, dict[int, int]] = {}
        if wanted:
            for (topic, partition), offset in sorted(self._committed(group_id, wanted).items()):
                if offset >= 0:
                    found.setdefault(topic, {})[partition] = offset
        return found

    def read_committed_values(self, topic: str, timeout: float = 20.0) -> list[bytes]:
        """Every committed value of ``topic`` (``read_committed``, from the start to the end offsets), e.g. a
        replay's done markers; [] when the topic does not exist."""
        counts = self.partition_counts([topic])
        if not counts:
            return []
        consumer = Consumer(
            {
                **self._settings,
                "group.id": f"streamapp-operator-reader-{topic}",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "enable.partition.eof": False,
            }
        )
        try:
            ends = {
                p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)[1]
                for p in range(counts[topic])
            }
            assignment = [TopicPartition(topic, p, 0) for p, end in ends.items() if end > 0]
            if not assignment:
                return []
            consumer.assign(assignment)
            values: list[bytes] = []
            deadline = time.monotonic() + timeout
            while any(tp.offset < ends[tp.partition] for tp in consumer.position(assignment)):
                if time.monotonic() > deadline:
                    raise KafkaUnavailable(f"reading {topic} to its end took more than {timeout:.0f}s")
                for message in consumer.consume(1000, 0.5):
                    value = message.value()
                    if message.error() is None and value is not None:
                        values.append(bytes(value))
            return values
        except KafkaException as exc:
            raise KafkaUnavailable(f"reading {topic} failed: {_describe(exc)}") from exc
        finally:
            consumer.close()


class AdminPool:
    """The shared admin clients, one per :class:`KafkaConnection` (AdminClients are thread-safe and costly
    to build), each kept only while some StreamApp uses it: ``admin_for(connection, user)`` records which
    app (uid) uses which connection, ``release(user)`` forgets an app (deleted), and a client no app uses
    any more is dropped (librdkafka closes it when the last reference goes), so an app with bad bootstrap
    servers stops costing threads and log lines once it is fixed or deleted."""

    def __init__(self, factory: Any = ConfluentKafkaAdmin) -> None:
        self._factory = factory
        self._admins: dict[KafkaConnection, Any] = {}
        self._users: dict[str, KafkaConnection] = {}
        self._lock = threading.Lock()

    def admin_for(self, connection: KafkaConnection, user: str = "") -> Any:
        with self._lock:
            admin = self._admins.get(connection)
            if admin is None:
                admin = self._admins[connection] = self._factory(connection)
            if user:
                self._users[user] = connection
                self._drop_unused()
            return admin

    def release(self, user: str) -> None:
        with self._lock:
            self._users.pop(user, None)
            self._drop_unused()

    def connections(self) -> int:
        with self._lock:
            return len(self._admins)

    def _drop_unused(self) -> None:
        used = set(self._users.values())
        for connection in [c for c in self._admins if c not in used]:
            del self._admins[connection]


def _describe(exc: KafkaException) -> str:
    error = exc.args[0] if exc.args else None
    return error.str() if isinstance(error, KafkaError) else str(exc)


def _camel(upper_snake: str) -> str:
    """``PREPARING_REBALANCE`` -> ``PreparingRebalance`` (Kafka's own spelling of group states)."""
    return "".join(part.capitalize() for part in re.split(r"_+", upper_snake.lower()) if part)
