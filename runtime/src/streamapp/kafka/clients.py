"""confluent-kafka clients of a stream thread: configs and the adapters behind ``streamapp.kafka.types``.

This package is the only importer of ``confluent_kafka``. Every producer uses ``partitioner=murmur2_random``
so keys land on the partitions Java clients, Kafka Streams and Spark choose (librdkafka's default is
CRC32). The group consumer never auto-commits: the stream thread commits after its records are safe.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import confluent_kafka
from confluent_kafka import KafkaError, KafkaException

from streamapp.config import StreamsConfig
from streamapp.kafka.types import (
    CommitFailedError,
    ConsumerRecord,
    DeliveryError,
    KafkaClientError,
    RebalanceListener,
    TopicPartition,
    UnreleasedInstanceIdError,
)

__all__ = [
    "KafkaConsumer",
    "KafkaProducer",
    "KafkaRestoreConsumer",
    "consumer_config",
    "producer_config",
    "restore_consumer_config",
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
_STALE_MEMBER_EPOCH = getattr(KafkaError, "STALE_MEMBER_EPOCH", 113)
_UNRELEASED_INSTANCE_ID = getattr(KafkaError, "UNRELEASED_INSTANCE_ID", 111)


def client_id(config: StreamsConfig, thread_index: int, role: str, instance_id: str | None) -> str:
    """``<application.id>-<instance>-StreamThread-<n>-<role>``, Kafka Streams' client id shape."""
    instance = instance_id or "local"
    return f"{config.application_id}-{instance}-StreamThread-{thread_index + 1}-{role}"


def consumer_config(config: StreamsConfig, thread_index: int, instance_id: str | None) -> dict[str, Any]:
    """The group consumer's librdkafka settings.

    group.id = application.id; ``group.instance.id`` = ``<instance_id>-<thread_index>`` when an instance id
    is given (static membership), none otherwise. ``group.protocol`` ``consumer`` selects KIP-848 with the
    broker's ``range`` assignor, ``classic`` the eager ``range`` assignor: both give a task partition p of
    every co-partitioned topic (docs/adr/0001-assignment.md). ``consumer.*`` keys override everything.
    """
    settings: dict[str, Any] = {
        "bootstrap.servers": config.bootstrap_servers,
        "group.id": config.application_id,
        "client.id": client_id(config, thread_index, "consumer", instance_id),
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "isolation.level": "read_uncommitted",
        "statistics.interval.ms": 1000,
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
    """The restore consumer's settings: no group membership, reads changelogs from explicit offsets."""
    settings: dict[str, Any] = {
        "bootstrap.servers": config.bootstrap_servers,
        "group.id": f"{config.application_id}-restore-consumer",
        "client.id": client_id(config, thread_index, "restore-consumer", instance_id),
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "earliest",
        "isolation.level": "read_uncommitted",
    }
    settings.update({k: v for k, v in config.consumer.items() if not k.startswith("group.")})
    return settings


def producer_config(config: StreamsConfig, thread_index: int, instance_id: str | None) -> dict[str, Any]:
    """The producer's settings: murmur2 partitioning, acks=all, idempotence off (at-least-once)."""
    settings: dict[str, Any] = {
        "bootstrap.servers": config.bootstrap_servers,
        "client.id": client_id(config, thread_index, "producer", instance_id),
        "partitioner": "murmur2_random",
        "acks": "all",
        "linger.ms": 100,
        "compression.type": "lz4",
    }
    settings.update(config.producer)
    settings["partitioner"] = "murmur2_random"
    return settings


def _to_record(message: Any) -> ConsumerRecord:
    _, timestamp = message.timestamp()
    return ConsumerRecord(
        topic=message.topic(),
        partition=message.partition(),
        offset=message.offset(),
        key=message.key(),
        value=message.value(),
        timestamp=timestamp,
    )


def _tps(partitions: Sequence[Any]) -> list[TopicPartition]:
    return [TopicPartition(p.topic, p.partition) for p in partitions]


class KafkaConsumer:
    """The stream thread's group consumer (implements ``ConsumerClient``)."""

    def __init__(self, settings: Mapping[str, Any]) -> None:
        self._incremental = settings.get("group.protocol", "classic") == "consumer"
        self._group_state = "init"
        self._lags: dict[TopicPartition, int] = {}
        self._consumer = confluent_kafka.Consumer({**settings, "stats_cb": self._on_stats})

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
        records: list[ConsumerRecord] = []
        for message in messages:
            error = message.error()
            if error is None:
                records.append(_to_record(message))
            elif error.fatal() or error.code() in (KafkaError._FATAL, _UNRELEASED_INSTANCE_ID):
                raise _consumer_error(error)
            else:
                log.warning("Consumer reported an error: %s", error)
        return records

    def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        if not offsets:
            return
        partitions = [confluent_kafka.TopicPartition(tp.topic, tp.partition, off) for tp, off in offsets.items()]
        try:
            result = self._consumer.commit(offsets=partitions, asynchronous=False)
        except KafkaException as exc:
            error = exc.args[0]
            if error.code() in _COMMIT_REBALANCE_CODES or error.code() == _STALE_MEMBER_EPOCH:
                raise CommitFailedError(f"offset commit failed, the group rebalanced: {error.str()}") from exc
            raise KafkaClientError(f"offset commit failed: {error.str()}") from exc
        failed = [p for p in result or [] if p.error is not None]
        if failed:
            raise CommitFailedError(f"offset commit failed for {', '.join(str(p) for p in failed)}")

    def committed(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int | None]:
        parts = [confluent_kafka.TopicPartition(tp.topic, tp.partition) for tp in partitions]
        try:
            result = self._consumer.committed(parts, timeout=30)
        except KafkaException as exc:
            raise KafkaClientError(f"cannot read committed offsets: {exc.args[0].str()}") from exc
        return {TopicPartition(p.topic, p.partition): (p.offset if p.offset >= 0 else None) for p in result}

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

    def group_joined(self) -> bool:
        return self._group_state == "up"

    def close(self) -> None:
        self._consumer.close()

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


class KafkaProducer:
    """The stream thread's producer (implements ``ProducerClient``)."""

    def __init__(self, settings: Mapping[str, Any]) -> None:
        self._producer = confluent_kafka.Producer(dict(settings))
        self._failure: str | None = None

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        partition: int | None = None,
        on_delivery: Callable[[TopicPartition, int], None] | None = None,
    ) -> None:
        delivered: Callable[[KafkaError | None, Any], None] = self._check_delivery
        if on_delivery is not None:

            def delivered(error: KafkaError | None, message: Any) -> None:
                self._check_delivery(error, message)
                if error is None:
                    on_delivery(TopicPartition(message.topic(), message.partition()), message.offset())

        kwargs: dict[str, Any] = {"key": key, "value": value, "on_delivery": delivered}
        if timestamp >= 0:
            kwargs["timestamp"] = timestamp
        if partition is not None:
            kwargs["partition"] = partition
        while True:
            try:
                self._producer.produce(topic, **kwargs)
                return
            except BufferError:
                self._producer.poll(0.05)
            except KafkaException as exc:
                raise DeliveryError(f"cannot produce to {topic}: {exc.args[0].str()}") from exc

    def poll(self) -> None:
        self._producer.poll(0)
        self._raise_failure()

    def _check_delivery(self, error: KafkaError | None, message: Any) -> None:
        if error is not None and self._failure is None:
            self._failure = f"record to {message.topic()} not delivered: {error.str()}"

    def flush(self, timeout_s: float) -> None:
        remaining = self._producer.flush(timeout_s)
        self._raise_failure()
        if remaining:
            raise DeliveryError(f"{remaining} records not acknowledged within {timeout_s:.0f}s")

    def close(self, timeout_s: float) -> None:
        self._producer.flush(timeout_s)

    def _raise_failure(self) -> None:
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise DeliveryError(failure)


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
                records.append(_to_record(message))
            elif error.code() == KafkaError._PARTITION_EOF:
                reached_end.add(TopicPartition(str(message.topic()), int(message.partition() or 0)))
            elif error.fatal():
                raise KafkaClientError(f"restore consumer failed: {error.str()}")
            else:
                log.warning("Restore consumer reported an error: %s", error)
        return records, reached_end

    def close(self) -> None:
        self._consumer.close()
