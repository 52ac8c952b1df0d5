"""Reading one topic outside any consumer group: what ``streamapp topics tail`` prints.

``read_topic`` assigns every partition of the topic (no group membership, nothing committed) from the beginning or
from the end, and yields raw records until ``max_records`` were read or no record came for ``idle_timeout_s``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import confluent_kafka
from confluent_kafka import KafkaException

from streamapp.kafka.clients import to_record
from streamapp.kafka.types import ConsumerRecord, KafkaClientError

__all__ = ["read_topic"]

_POLL_S = 0.5


def read_topic(
    settings: Mapping[str, Any],
    topic: str,
    *,
    from_beginning: bool,
    max_records: int | None = None,
    idle_timeout_s: float | None = None,
) -> Iterator[ConsumerRecord]:
    """The records of ``topic``, partition by partition as librdkafka fetches them (ordered within a partition).

    ``settings``: librdkafka consumer settings (``bootstrap.servers``, security). Starts at each partition's
    earliest offset (``from_beginning``) or its end (only records produced from now on). Stops after
    ``max_records`` records, or once no record arrived for ``idle_timeout_s`` seconds (``None``: never).
    Raises KafkaClientError when the topic does not exist or the cluster cannot be reached.
    """
    consumer = confluent_kafka.Consumer(
        {
            "group.id": f"streamapp-topics-tail-{uuid.uuid4()}",  # never joined: partitions are assigned
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            **settings,
        }
    )
    try:
        start = confluent_kafka.OFFSET_BEGINNING if from_beginning else confluent_kafka.OFFSET_END
        consumer.assign([confluent_kafka.TopicPartition(topic, p, start) for p in _partitions(consumer, topic)])
        read, last_record_at = 0, time.monotonic()
        while max_records is None or read < max_records:
            message = consumer.poll(_POLL_S)
            if message is None:
                if idle_timeout_s is not None and time.monotonic() - last_record_at >= idle_timeout_s:
                    return
                continue
            error = message.error()
            if error is not None:
                raise KafkaClientError(f"cannot read {topic}: {error.str()}")
            read, last_record_at = read + 1, time.monotonic()
            yield to_record(message)
    finally:
        consumer.close()


def _partitions(consumer: Any, topic: str, timeout_s: float = 10.0) -> list[int]:
    try:
        metadata = consumer.list_topics(topic, timeout=timeout_s)
    except KafkaException as exc:
        raise KafkaClientError(f"cannot read cluster metadata: {exc.args[0].str()}") from exc
    found = metadata.topics.get(topic)
    if found is None or found.error is not None or not found.partitions:
        raise KafkaClientError(f"topic {topic} does not exist")
    return sorted(found.partitions)
