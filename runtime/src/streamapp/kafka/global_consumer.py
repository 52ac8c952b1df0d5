"""The global consumer on confluent-kafka: no group, every partition of the global topics assigned.

Implements ``streamapp.processing.global_thread.GlobalConsumerClient`` (Kafka Streams' global consumer:
``<client.id>-global-consumer``, no ``group.id`` use, offsets kept in the global checkpoint file).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import confluent_kafka
from confluent_kafka import KafkaError, KafkaException

from streamapp.config import StreamsConfig
from streamapp.kafka.types import ConsumerRecord, KafkaClientError, TopicPartition

__all__ = ["KafkaGlobalConsumer", "global_consumer_config"]

log = logging.getLogger(__name__)


def global_consumer_config(config: StreamsConfig, thread_index: int, instance_id: str | None) -> dict[str, Any]:
    """Settings of a worker's global consumer: manual assignment, partition-EOF events, no commits.

    ``group.id`` is required by librdkafka but never used to join a group (no ``subscribe``, no commit).
    ``read_committed`` under ``exactly_once_v2`` so aborted writes never reach a global store. Prefetch keeps
    librdkafka's defaults, like the restore consumer's: bootstrapping a global store is a restore, and its speed
    matters (the restore consumer restoring a 1M-key store peaked at 170-195 MiB RSS with them; a global store's
    bootstrap was not measured apart). After the bootstrap the global thread polls continuously, so the queue
    holds only what arrived since its last poll; ``consumer.max.partition.fetch.bytes`` and
    ``consumer.queued.max.messages.kbytes`` bound it when needed (``consumer.*`` keys apply, except ``group.*``).
    """
    instance = instance_id or "local"
    settings: dict[str, Any] = {
        "bootstrap.servers": config.bootstrap_servers,
        "group.id": f"{config.application_id}-global-consumer",
        "client.id": f"{config.application_id}-{instance}-StreamThread-{thread_index + 1}-global-consumer",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "earliest",
        "isolation.level": "read_committed" if config.exactly_once else "read_uncommitted",
    }
    settings.update({k: v for k, v in config.consumer.items() if not k.startswith("group.")})
    return settings


class KafkaGlobalConsumer:
    """A group-less consumer over whole topics (implements ``GlobalConsumerClient``)."""

    def __init__(self, settings: Mapping[str, Any]) -> None:
        self._consumer = confluent_kafka.Consumer(dict(settings))

    def partitions(self, topic: str, timeout_s: float) -> list[int]:
        try:
            metadata = self._consumer.list_topics(topic, timeout=timeout_s)
        except KafkaException as exc:
            raise KafkaClientError(f"cannot read metadata of global topic '{topic}': {exc.args[0].str()}") from exc
        found = metadata.topics.get(topic)
        if found is None or found.error is not None:
            reason = found.error.str() if found is not None and found.error is not None else "unknown topic"
            raise KafkaClientError(f"global topic '{topic}' is not available: {reason}")
        return sorted(found.partitions)

    def watermarks(self, partition: TopicPartition, timeout_s: float) -> tuple[int, int]:
        tp = confluent_kafka.TopicPartition(partition.topic, partition.partition)
        try:
            low, high = self._consumer.get_watermark_offsets(tp, timeout=timeout_s, cached=False)
        except KafkaException as exc:
            raise KafkaClientError(f"cannot read the offsets of {partition}: {exc.args[0].str()}") from exc
        return int(low), int(high)

    def assign(self, starts: Mapping[TopicPartition, int]) -> None:
        parts = [confluent_kafka.TopicPartition(tp.topic, tp.partition, off) for tp, off in starts.items()]
        self._consumer.assign(parts)

    def poll(self, max_records: int, timeout_s: float) -> tuple[list[ConsumerRecord], set[TopicPartition]]:
        messages = self._consumer.consume(num_messages=max_records, timeout=timeout_s)
        records: list[ConsumerRecord] = []
        reached_end: set[TopicPartition] = set()
        for message in messages:
            error = message.error()
            if error is None:
                records.append(_record(message))
            elif error.code() == KafkaError._PARTITION_EOF:
                reached_end.add(TopicPartition(str(message.topic()), int(message.partition() or 0)))
            elif error.fatal():
                raise KafkaClientError(f"global consumer failed: {error.str()}")
            else:
                log.warning("Global consumer reported an error: %s", error)
        return records, reached_end

    def positions(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        parts = [confluent_kafka.TopicPartition(tp.topic, tp.partition) for tp in partitions]
        if not parts:
            return {}
        result = self._consumer.position(parts)
        return {TopicPartition(p.topic, p.partition): p.offset for p in result if p.offset >= 0}

    def close(self) -> None:
        self._consumer.close()


def _record(message: Any) -> ConsumerRecord:
    _, timestamp = message.timestamp()
    return ConsumerRecord(
        topic=message.topic(),
        partition=message.partition(),
        offset=message.offset(),
        key=message.key(),
        value=message.value(),
        timestamp=timestamp,
    )
