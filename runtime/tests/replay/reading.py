"""Reading what a replay wrote, as a ``read_committed`` consumer sees it."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping

from confluent_kafka import Consumer, TopicPartition

Record = tuple[int, bytes | None, bytes | None, int]
"""``(partition, key, value, timestamp)``."""


def read_committed(
    bootstrap: str, topic: str, partitions: int, timeout_s: float = 60.0, settings: Mapping[str, str] | None = None
) -> list[Record]:
    """Every committed record of ``topic``, partition by partition in offset order (``settings``: more client
    settings, e.g. SASL)."""
    consumer = Consumer(
        {
            **(settings or {}),
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:8]}",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    records: dict[int, list[Record]] = {p: [] for p in range(partitions)}
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout_s
        while len(at_end) < partitions and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            partition = int(message.partition() or 0)
            if message.error():
                at_end.add(partition)
                continue
            records[partition].append((partition, message.key(), message.value(), message.timestamp()[1]))
    finally:
        consumer.close()
    return [record for p in range(partitions) for record in records[p]]
