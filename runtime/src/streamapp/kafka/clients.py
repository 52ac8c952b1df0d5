"""confluent-kafka clients of a stream thread: configs and the consumer adapters behind ``streamapp.kafka.types``
(the producer is in ``streamapp.kafka.producer``, re-exported here).

This package is the only importer of ``confluent_kafka``. Every producer uses ``partitioner=murmur2_random``
so keys land on the partitions Java clients, Kafka Streams and Spark choose (librdkafka's default is
CRC32). The group consumer never auto-commits: the stream thread commits after its records are safe.

Memory: librdkafka's prefetch defaults are sized for throughput, not for a bounded worker. It decompresses every
fetched batch at once and keeps one ~300-byte op per record until the application consumes it, so with small
records one default fetch (1 MiB compressed per partition) can queue ~100,000 records per partition. The group
consumer of a stream thread therefore starts from ``CONSUMER_MEMORY_DEFAULTS`` and the producer from
``PRODUCER_MEMORY_DEFAULTS`` (``consumer.*`` / ``producer.*`` keys override them; docs/execution.md).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final

import confluent_kafka
import tenacity
from confluent_kafka import KafkaError, KafkaException

from streamapp.config import StreamsConfig
from streamapp.kafka.producer import KafkaProducer, committable
from streamapp.kafka.types import (
    CommitFailedError,
    ConsumerRecord,
    KafkaAuthenticationError,
    KafkaClientError,
    OffsetAndMetadata,
    RebalanceListener,
    TopicPartition,
    UnreleasedInstanceIdError,
    parse_client_id,
)

__all__ = [
    "CONSUMER_MEMORY_DEFAULTS",
    "PRODUCER_MEMORY_DEFAULTS",
    "KafkaConsumer",
    "KafkaProducer",
    "KafkaRestoreConsumer",
    "admin_config",
    "consumer_config",
    "isolation_level",
    "parse_client_id",
    "producer_config",
    "restore_consumer_config",
    "to_record",
    "transactional_id",
]

log = logging.getLogger(__name__)

_COMMIT_REBALANCE_CODES = {
    KafkaError.REBALANCE_IN_PROGRESS,
    KafkaError.ILLEGAL_GENERATION,
    KafkaError.UNKNOWN_MEMBER_ID,
    KafkaError.FENCED_INSTANCE_ID,
    KafkaError._ASSIGNMENT_LOST,
    KafkaError._NO_OFFSET,
}
CONSUMER_MEMORY_DEFAULTS: Final[Mapping[str, int]] = MappingProxyType(
    {
        "max.partition.fetch.bytes": 262_144,
        "queued.max.messages.kbytes": 32_768,
    }
)
"""Prefetch bounds of the group consumer (librdkafka's defaults: 1048576 and 65536). One fetch returns at most
``max.partition.fetch.bytes`` of compressed batches per partition (a larger first batch still comes whole), and a
new fetch starts only while fewer than ``queued.min.messages`` (100000) records and ``queued.max.messages.kbytes``
KiB are queued. With 16-byte records a 1 MiB fetch is ~100,000 records (~30 MB in librdkafka): building a
1M-key store peaked at 305 MiB RSS with librdkafka's defaults, 187 MiB with these. The queue bound is not lower
because 16 MiB starved the stream thread (stateless benchmark: 58k records/s with 16 MiB, 101k with 32 MiB and
97k with 64 MiB; the thread waited in ``poll`` 68% of the time). ``fetch.max.bytes`` and ``queued.min.messages``
stay at librdkafka's defaults: ``queued.min.messages=10000`` measured 5x slower. The restore consumer keeps
librdkafka's defaults (restore speed; its peak while restoring a 1M-key store was 170-195 MiB)."""

PRODUCER_MEMORY_DEFAULTS: Final[Mapping[str, int]] = MappingProxyType(
    {
        "queue.buffering.max.kbytes": 32_768,
        "queue.buffering.max.messages": 100_000,
    }
)
"""Bound of the producer's send queue, records not yet acknowledged (librdkafka's defaults: 1048576 KiB and
100000): 32 MiB of payload like the Java producer's ``buffer.memory``. A full queue makes ``send`` wait for
acknowledgements instead of growing (the records still go out: nothing is dropped)."""

_STALE_MEMBER_EPOCH = getattr(KafkaError, "STALE_MEMBER_EPOCH", 113)
STALE_EPOCH_RETRY_S: Final = 10.0
"""How long (s) a commit rejected with ``STALE_MEMBER_EPOCH`` is retried before it counts as a rebalance failure."""
_UNRELEASED_INSTANCE_ID = getattr(KafkaError, "UNRELEASED_INSTANCE_ID", 111)


def client_id(config: StreamsConfig, thread_index: int, role: str, instance_id: str | None) -> str:
    """``<application.id>-<instance>-StreamThread-<n>-<role>``, Kafka Streams' client id shape (``n`` = thread
    index + 1); ``parse_client_id`` reverses it."""
    instance = instance_id or "local"
    return f"{config.application_id}-{instance}-StreamThread-{thread_index + 1}-{role}"


def consumer_config(
    config: StreamsConfig, thread_index: int, instance_id: str | None, process_id: str | None = None
) -> dict[str, Any]:
    """The group consumer's librdkafka settings.

    group.id = application.id; ``group.instance.id`` = ``<instance_id>-<thread_index>`` when an instance id
    is given (static membership), none otherwise. ``group.protocol`` ``consumer`` selects KIP-848 with the
    broker's ``range`` assignor, ``classic`` the eager ``range`` assignor: both give a task partition p of
    every co-partitioned topic (docs/adr/0001-assignment.md). The client id names the instance
    (``instance_id``, else ``process_id``), and ends in ``@<application.server>`` when that is set: other
    members read both from the group description to place standby tasks and to route interactive queries
    (``streamapp.kafka.types.parse_member_endpoint``, docs/adr/0012-query-endpoints.md). Under ``exactly_once_v2``
    the consumer reads ``read_committed`` (it never sees aborted records or open transactions, e.g. of a
    repartition topic; a ``committed()`` call then also waits for pending transactional offsets: KIP-447's
    require_stable). Prefetch is bounded by ``CONSUMER_MEMORY_DEFAULTS``. ``consumer.*`` keys override everything.
    """
    settings: dict[str, Any] = {
        "bootstrap.servers": config.bootstrap_servers,
        "group.id": config.application_id,
        "client.id": client_id(config, thread_index, "consumer", instance_id or process_id)
        + (f"@{config.application_server}" if config.application_server else ""),
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "isolation.level": isolation_level(config),
        "statistics.interval.ms": 1000,
        **CONSUMER_MEMORY_DEFAULTS,
    }
    if config.group_protocol == "consumer":
        settings.update({"group.protocol": "consumer", "group.remote.assignor": "range"})
    else:
        settings.update({"group.protocol": "classic", "partition.assignment.strategy": "range"})
    if instance_id:
        settings["group.instance.id"] = f"{instance_id}-{thread_index}"
    settings.update(config.consumer)
    return settings


def restore_consumer_config(config: StreamsConfig, thread_index: int, instance_id: str | None) -> dict[str, Any]:
    """The restore consumer's settings: no group membership, reads changelogs from explicit offsets.

    Under ``exactly_once_v2`` it reads ``read_committed``: aborted changelog records and transaction markers are
    skipped, and its end offset (``end_offset``) is the last stable offset, as Kafka Streams restores.
    Prefetch uses librdkafka's defaults (restore speed); ``consumer.*`` keys apply here too.
    """
    settings: dict[str, Any] = {
        "bootstrap.servers": config.bootstrap_servers,
        "group.id": f"{config.application_id}-restore-consumer",
        "client.id": client_id(config, thread_index, "restore-consumer", instance_id),
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "earliest",
        "isolation.level": isolation_level(config),
    }
    settings.update({k: v for k, v in config.consumer.items() if not k.startswith("group.")})
    return settings


def admin_config(config: StreamsConfig) -> dict[str, Any]:
    """An admin client's settings: the brokers plus the producer's security settings (``security.*``,
    ``sasl.*``, ``ssl.*``)."""
    settings: dict[str, Any] = {"bootstrap.servers": config.bootstrap_servers}
    settings.update({k: v for k, v in config.producer.items() if k.startswith(("security.", "sasl.", "ssl."))})
    return settings


def isolation_level(config: StreamsConfig) -> str:
    """``read_committed`` under ``exactly_once_v2``, ``read_uncommitted`` otherwise (Kafka Streams' rule)."""
    return "read_committed" if config.exactly_once else "read_uncommitted"


def transactional_id(config: StreamsConfig, thread_index: int, process_id: str) -> str:
    """``<application.id>-<process id>-<thread index + 1>``: one transactional producer per stream thread
    (Kafka Streams' EOS-v2 ``StreamsProducer`` naming). ``process_id`` is the instance id (pod name) or, without
    one, the id stored in the state directory, so the id is the same after a restart: the restarted thread's
    ``init_transactions`` aborts what its crashed predecessor left open at once, instead of after
    ``transaction.timeout.ms``."""
    return f"{config.application_id}-{process_id}-{thread_index + 1}"


def producer_config(
    config: StreamsConfig, thread_index: int, instance_id: str | None, process_id: str | None = None
) -> dict[str, Any]:
    """The producer's settings: murmur2 partitioning, acks=all, idempotence on, the send queue bounded by
    ``PRODUCER_MEMORY_DEFAULTS``.

    Idempotence is on under every guarantee, as the Java producer Kafka Streams uses has it by default since Kafka
    3.0 (KIP-679): librdkafka's default is off, and then a produce request retried after a timeout can land
    after the requests sent behind it, so a repartition topic or an output would hold a task's records out of
    order (a windowed count downstream would drop some as late) and, on retry, twice.

    Under ``exactly_once_v2``: ``transactional.id`` = ``transactional_id(config, thread_index, process id)``
    (``process_id`` defaults to ``instance_id``, then to ``local``), idempotence on and
    ``transaction.timeout.ms`` 10000 (Kafka Streams' EOS default: a transaction left open by a dead producer
    blocks ``read_committed`` readers at most that long). ``producer.*`` keys override, except the partitioner.
    """
    settings: dict[str, Any] = {
        "bootstrap.servers": config.bootstrap_servers,
        "client.id": client_id(config, thread_index, "producer", instance_id or process_id),
        "partitioner": "murmur2_random",
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 100,
        "compression.type": "lz4",
        **PRODUCER_MEMORY_DEFAULTS,
    }
    if config.exactly_once:
        settings.update(
            {
                "transactional.id": transactional_id(config, thread_index, process_id or instance_id or "local"),
                "transaction.timeout.ms": 10_000,
            }
        )
    settings.update(config.producer)
    settings["partitioner"] = "murmur2_random"
    return settings


def to_record(message: Any) -> ConsumerRecord:
    """A confluent-kafka ``Message`` (without error) as a ``ConsumerRecord``."""
    _, timestamp = message.timestamp()
    return ConsumerRecord(
        message.topic(),
        message.partition(),
        message.offset(),
        message.key(),
        message.value(),
        timestamp,
        message.headers(),
    )


def _tps(partitions: Sequence[Any]) -> list[TopicPartition]:
    return [TopicPartition(p.topic, p.partition) for p in partitions]


OffsetResetListener = Callable[[str, int], None]
"""Told ``(topic-partition, records skipped)`` when an offset reset skipped records."""


_RESET_LINE = re.compile(r"(?P<topic>[^\s\[\]]+) \[(?P<partition>\d+)\]: offset reset \(at offset (?P<offset>\d+)")
"""librdkafka's OFFSET log line when a fetch position was out of range and ``auto.offset.reset`` moved it."""


class _StaleMemberEpoch(Exception):
    """A commit rejected with ``STALE_MEMBER_EPOCH`` (retried by ``KafkaConsumer.commit``)."""


class _ClientLog:
    """librdkafka's log lines (the ``logger`` setting) into this module's logger; remembers the positions its
    automatic offset resets left (``offset reset (at offset N ...)``), for the consumer to check after a poll."""

    def __init__(self) -> None:
        self.resets: list[tuple[TopicPartition, int]] = []

    def log(self, level: int, msg: str, *args: Any) -> None:
        log.log(level, msg, *args)
        if len(args) == 3 and args[0] == "OFFSET":
            found = _RESET_LINE.search(str(args[2]))
            if found is not None:
                tp = TopicPartition(found["topic"], int(found["partition"]))
                self.resets.append((tp, int(found["offset"])))


def records_skipped(expected: int, log_start: int) -> int:
    """How many records a consumer expecting to read at ``expected`` loses when the partition's earliest
    available offset is ``log_start``: the ones deleted in between (0 when none)."""
    return max(0, log_start - expected)


class KafkaConsumer:
    """The stream thread's group consumer (implements ``ConsumerClient``).

    Offset resets that skip records are reported loudly: when the group's committed offset of a partition (or 0,
    without one) lies below the partition's earliest available offset, the records in between were deleted
    (``retention.ms``, ``retention.bytes``, ``delete_records``) before the application read them, and
    ``auto.offset.reset=earliest`` resumes after the gap. Kafka's consumer logs that reset at INFO; here it is a
    WARN naming the partition, both offsets and the number of records skipped, and ``on_offset_reset`` counts
    it (the ``streamapp_offset_reset_skipped_records_total`` metric). Checked when the committed offsets are read
    (a task is created) and after a poll in which librdkafka reset a position that fell out of range (its
    ``OFFSET`` log line, read through the ``logger`` setting: librdkafka hands no event to the application).
    """

    def __init__(self, settings: Mapping[str, Any], *, on_offset_reset: OffsetResetListener | None = None) -> None:
        self._incremental = settings.get("group.protocol", "classic") == "consumer"
        self._group_state = "init"
        self._lags: dict[TopicPartition, int] = {}
        self._authentication_error: str | None = None
        self._on_offset_reset = on_offset_reset
        self._reported_gaps: dict[TopicPartition, int] = {}
        """Per partition, the expected offset of the last gap reported (a reset is reported once)."""
        self._client_log = _ClientLog()
        self.stale_epoch_retries = 0
        """Commits retried because the coordinator had moved the member to a new epoch (see ``commit``)."""
        self._consumer = confluent_kafka.Consumer(
            {"error_cb": self._on_error, "logger": self._client_log, **settings, "stats_cb": self._on_stats}
        )

    def subscribe(self, topics: Sequence[str], listener: RebalanceListener) -> None:
        def on_assign(consumer: Any, partitions: list[Any]) -> None:
            if self._incremental:
                consumer.incremental_assign(partitions)
            else:
                consumer.assign(partitions)
            listener.on_partitions_assigned(_tps(partitions))

        def on_revoke(consumer: Any, partitions: list[Any]) -> None:
            listener.on_partitions_revoked(_tps(partitions))

        def on_lost(consumer: Any, partitions: list[Any]) -> None:
            listener.on_partitions_lost(_tps(partitions))

        self._consumer.subscribe(list(topics), on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)

    def poll(self, max_records: int, timeout_s: float) -> list[ConsumerRecord]:
        try:
            messages = self._consumer.consume(num_messages=max_records, timeout=timeout_s)
        except KafkaException as exc:
            raise _consumer_error(exc.args[0]) from exc
        if self._authentication_error is not None:  # set by error_cb, served inside consume()
            raise KafkaAuthenticationError(f"consumer failed: {self._authentication_error}")
        records: list[ConsumerRecord] = []
        for message in messages:
            error = message.error()
            if error is None:
                records.append(to_record(message))
            elif error.fatal() or error.code() in (KafkaError._FATAL, _UNRELEASED_INSTANCE_ID):
                raise _consumer_error(error)
            else:
                log.warning("Consumer reported an error: %s", error)
        if self._client_log.resets:
            resets, self._client_log.resets = self._client_log.resets, []
            for tp, offset in resets:
                self._check_gap(tp, offset)
        return records

    def commit(
        self, offsets: Mapping[TopicPartition, int], metadata: Mapping[TopicPartition, str] | None = None
    ) -> None:
        """Commit ``offsets`` synchronously, with ``metadata`` (``ConsumerClient.commit``).

        Under ``group.protocol=consumer`` (KIP-848) a commit sent while the coordinator moves the member to a new
        epoch (any member joining or leaving bumps it) is rejected with ``STALE_MEMBER_EPOCH`` although the member
        still owns its partitions; librdkafka reports it instead of retrying. Like Java's consumer
        (``CommitRequestManager``: retried with the member's new epoch while it is in the group), the commit is
        retried for up to ``STALE_EPOCH_RETRY_S`` seconds (``stale_epoch_retries`` counts the retries). Treating it
        as a rebalance failure closed every task without commit and, under at-least-once, processed up to a commit
        interval of records twice. Brokers from Kafka 4.3 accept such a commit (KIP-1251: the partition's
        assignment epoch <= the commit's epoch <= the member's epoch), so there the retry is only met by a
        partition that really moved. Raises CommitFailedError when the group moved on (also a stale epoch for
        longer than the retry time), KafkaClientError otherwise."""
        if not offsets:
            return
        partitions = committable(offsets, metadata)
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(_StaleMemberEpoch),
            stop=tenacity.stop_after_delay(STALE_EPOCH_RETRY_S),
            wait=tenacity.wait_exponential(multiplier=0.05, max=1.0),
            before_sleep=self._count_stale_epoch_retry,
            reraise=True,
        )
        try:
            retrying(self._commit_once, partitions)
        except _StaleMemberEpoch as exc:
            raise CommitFailedError(
                f"offset commit failed, the member epoch stayed stale for {STALE_EPOCH_RETRY_S:.0f} s: {exc}"
            ) from exc

    def _commit_once(self, partitions: list[confluent_kafka.TopicPartition]) -> None:
        try:
            result = self._consumer.commit(offsets=partitions, asynchronous=False)
        except KafkaException as exc:
            error = exc.args[0]
            if error.code() == _STALE_MEMBER_EPOCH:
                raise _StaleMemberEpoch(error.str()) from exc
            if error.code() in _COMMIT_REBALANCE_CODES:
                raise CommitFailedError(f"offset commit failed, the group rebalanced: {error.str()}") from exc
            raise KafkaClientError(f"offset commit failed: {error.str()}") from exc
        failed = [p for p in result or [] if p.error is not None]
        if failed and all(p.error is not None and p.error.code() == _STALE_MEMBER_EPOCH for p in failed):
            raise _StaleMemberEpoch(", ".join(str(p) for p in failed))
        if failed:
            raise CommitFailedError(f"offset commit failed for {', '.join(str(p) for p in failed)}")

    def _count_stale_epoch_retry(self, state: tenacity.RetryCallState) -> None:
        self.stale_epoch_retries += 1
        log.info("Offset commit retried: the member epoch was stale (attempt %d)", state.attempt_number)

    def committed(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int | None]:
        found = self.committed_with_metadata(partitions)
        return {tp: (committed.offset if committed is not None else None) for tp, committed in found.items()}

    def committed_with_metadata(
        self, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        parts = [confluent_kafka.TopicPartition(tp.topic, tp.partition) for tp in partitions]
        try:
            result = self._consumer.committed(parts, timeout=30)
        except KafkaException as exc:
            raise KafkaClientError(f"cannot read committed offsets: {exc.args[0].str()}") from exc
        offsets = {
            TopicPartition(p.topic, p.partition): (
                OffsetAndMetadata(p.offset, p.metadata or "") if p.offset >= 0 else None
            )
            for p in result
        }
        for tp, committed in offsets.items():
            self._check_gap(tp, committed.offset if committed is not None else 0)
        return offsets

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        parts = [confluent_kafka.TopicPartition(tp.topic, tp.partition) for tp in partitions]
        if parts:
            self._consumer.pause(parts)

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        parts = [confluent_kafka.TopicPartition(tp.topic, tp.partition) for tp in partitions]
        if parts:
            self._consumer.resume(parts)

    def seek(self, partition: TopicPartition, offset: int) -> None:
        self._consumer.seek(confluent_kafka.TopicPartition(partition.topic, partition.partition, offset))

    def lags(self) -> dict[TopicPartition, int]:
        return dict(self._lags)

    def group_metadata(self) -> object:
        return self._consumer.consumer_group_metadata()

    def fetched_watermarks(self, partition: TopicPartition) -> tuple[int, int] | None:
        tp = confluent_kafka.TopicPartition(partition.topic, partition.partition)
        try:
            low, high = self._consumer.get_watermark_offsets(tp, cached=True)
        except KafkaException:
            return None
        return (int(low), int(high)) if high >= 0 and low >= 0 else None

    def group_joined(self) -> bool:
        return self._group_state == "up"

    def close(self) -> None:
        self._consumer.close()

    def _check_gap(self, tp: TopicPartition, expected: int) -> None:
        """WARN and count when records between ``expected`` and the earliest available offset of ``tp`` are gone."""
        if self._reported_gaps.get(tp) == expected:
            return
        try:
            log_start, _ = self._consumer.get_watermark_offsets(
                confluent_kafka.TopicPartition(tp.topic, tp.partition), timeout=10, cached=False
            )
        except KafkaException as exc:
            log.debug("Cannot read the earliest offset of %s: %s", tp, exc)
            return
        skipped = records_skipped(expected, int(log_start))
        if not skipped:
            return
        self._reported_gaps[tp] = expected
        log.warning(
            "Offset reset on %s skips %d records: the application's position is offset %d but the earliest "
            "available offset is %d (records deleted by retention.ms / retention.bytes or delete_records before "
            "they were processed); processing resumes at %d. Historical input needs a topic with retention.ms=-1 "
            "or long enough.",
            tp,
            skipped,
            expected,
            log_start,
            log_start,
        )
        if self._on_offset_reset is not None:
            self._on_offset_reset(str(tp), skipped)

    def _on_error(self, error: KafkaError) -> None:
        # rejected credentials reach the application only through error_cb (the consumer would retry for ever)
        if error.code() in (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED):
            self._authentication_error = str(error.str())
        else:
            log.debug("Consumer client error: %s", error)

    def _on_stats(self, stats_json: str) -> None:
        stats = json.loads(stats_json)
        self._group_state = stats.get("cgrp", {}).get("state", self._group_state)
        lags: dict[TopicPartition, int] = {}
        for topic, topic_stats in stats.get("topics", {}).items():
            for partition, p in topic_stats.get("partitions", {}).items():
                high = p.get("hi_offset", -1)
                position = p.get("app_offset", -1)
                if position < 0:
                    position = p.get("committed_offset", -1)
                if int(partition) >= 0 and high >= 0 and position >= 0:
                    lags[TopicPartition(topic, int(partition))] = max(0, high - position)
        self._lags = lags


def _consumer_error(error: KafkaError) -> KafkaClientError:
    text = error.str()
    if error.code() == _UNRELEASED_INSTANCE_ID or "instance ID is still used" in text:
        return UnreleasedInstanceIdError(f"group.instance.id is still held by a previous member: {text}")
    return KafkaClientError(f"consumer failed: {text}")


class KafkaRestoreConsumer:
    """Reads changelog partitions from explicit offsets, outside any group (implements
    ``RestoreConsumerClient``)."""

    def __init__(self, settings: Mapping[str, Any]) -> None:
        self._consumer = confluent_kafka.Consumer(dict(settings))

    def assign(self, starts: Mapping[TopicPartition, int]) -> None:
        parts = [confluent_kafka.TopicPartition(tp.topic, tp.partition, off) for tp, off in starts.items()]
        if parts:
            self._consumer.incremental_assign(parts)

    def unassign(self, partitions: Iterable[TopicPartition]) -> None:
        parts = [confluent_kafka.TopicPartition(tp.topic, tp.partition) for tp in partitions]
        if parts:
            self._consumer.incremental_unassign(parts)

    def end_offset(self, partition: TopicPartition, timeout_s: float) -> int:
        tp = confluent_kafka.TopicPartition(partition.topic, partition.partition)
        try:
            _, high = self._consumer.get_watermark_offsets(tp, timeout=timeout_s, cached=False)
        except KafkaException as exc:
            raise KafkaClientError(f"cannot read the end offset of {partition}: {exc.args[0].str()}") from exc
        return int(high)

    def poll(self, max_records: int, timeout_s: float) -> tuple[list[ConsumerRecord], set[TopicPartition]]:
        messages = self._consumer.consume(num_messages=max_records, timeout=timeout_s)
        records: list[ConsumerRecord] = []
        reached_end: set[TopicPartition] = set()
        for message in messages:
            error = message.error()
            if error is None:
                records.append(to_record(message))
            elif error.code() == KafkaError._PARTITION_EOF:
                reached_end.add(TopicPartition(str(message.topic()), int(message.partition() or 0)))
            elif error.fatal():
                raise KafkaClientError(f"restore consumer failed: {error.str()}")
            else:
                log.warning("Restore consumer reported an error: %s", error)
        return records, reached_end

    def close(self) -> None:
        self._consumer.close()
