"""Reading one partition's bounded offset range, column by column: what a replay's read task consumes.

``read_range`` assigns one partition (no group membership, nothing committed) at an explicit start offset and
yields the committed records (``isolation.level=read_committed``) of ``[start, end)`` in offset order, in batches
of columns (no per-record objects beyond librdkafka's messages). It stops at ``end``: the records after it are
never returned, and control records and aborted transactions inside the range are skipped, as a Kafka consumer
skips them. Offsets missing inside the range (a compacted topic) are skipped too; a start below the partition's
log-start offset (deleted history) is an error, never a silent skip (Spark's ``failOnDataLoss``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import confluent_kafka
from confluent_kafka import KafkaException

from streamapp.kafka.types import KafkaClientError

__all__ = ["READ_SETTINGS", "RecordColumns", "read_range"]

READ_SETTINGS: dict[str, Any] = {
    "fetch.max.bytes": 64 << 20,
    "max.partition.fetch.bytes": 16 << 20,
    "queued.max.messages.kbytes": 64 << 10,
}
"""librdkafka fetch sizes for a range read (before the caller's settings, which win): large fetches, at most 64
MiB queued per reader."""

_POLL_S = 1.0


@dataclass(slots=True)
class RecordColumns:
    """A batch of one partition's records, in offset order: one list per field, all of the same length.
    ``timestamps``: milliseconds since the epoch (CreateTime or LogAppendTime, as the record has it; -1: none).
    ``headers``: per record a list of ``(key, value)`` pairs, or None (no headers, or not asked for)."""

    offsets: list[int] = field(default_factory=list)
    keys: list[bytes | None] = field(default_factory=list)
    values: list[bytes | None] = field(default_factory=list)
    timestamps: list[int] = field(default_factory=list)
    headers: list[list[tuple[str, bytes | None]] | None] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.offsets)


def read_range(
    settings: Mapping[str, Any],
    topic: str,
    partition: int,
    start: int,
    end: int,
    *,
    batch_records: int = 10_000,
    with_headers: bool = True,
    stall_timeout_s: float = 120.0,
) -> Iterator[RecordColumns]:
    """The committed records of ``topic``'s ``partition`` at offsets ``[start, end)``, in batches of at most
    ``batch_records``.

    ``settings``: librdkafka consumer settings (``bootstrap.servers``, security), after ``READ_SETTINGS``.
    ``with_headers``: False leaves ``RecordColumns.headers`` all None (cheaper).
    Raises KafkaClientError naming the topic, partition and offset when the broker reports an error (``start``
    below the log-start offset included: ``auto.offset.reset=error``), or when the position stays below ``end``
    for ``stall_timeout_s`` seconds without a record (a range past the partition's last stable offset).
    """
    if start >= end:
        return
    consumer = confluent_kafka.Consumer(
        {
            **READ_SETTINGS,
            **settings,
            "group.id": f"streamapp-range-reader-{uuid.uuid4()}",  # never joined: the partition is assigned
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "error",
        }
    )
    where = f"{topic}-{partition}"
    try:
        tp = confluent_kafka.TopicPartition(topic, partition, start)
        consumer.assign([tp])
        position, progress_at = start, time.monotonic()
        while position < end:
            messages: list[Any] = consumer.consume(num_messages=batch_records, timeout=_POLL_S)
            batch = RecordColumns()
            for message in messages:
                error = message.error()
                if error is not None:
                    raise KafkaClientError(f"cannot read {where} at offset {position}: {error.str()}")
                offset = message.offset()
                if offset >= end:
                    position = end
                    break
                batch.offsets.append(offset)
                batch.keys.append(message.key())
                batch.values.append(message.value())
                batch.timestamps.append(message.timestamp()[1])
                batch.headers.append(message.headers() if with_headers else None)
                position = offset + 1
            if batch.offsets:
                progress_at = time.monotonic()
                yield batch
            elif position < end:
                position = max(position, _position(consumer, tp, where))  # past control records at the range's end
                if position >= end:
                    break
                if time.monotonic() - progress_at > stall_timeout_s:
                    raise KafkaClientError(
                        f"cannot read {where}: no record after offset {position - 1} for {stall_timeout_s:.0f} s "
                        f"though the range ends at {end} (is the range past the last stable offset?)"
                    )
    except KafkaException as exc:
        raise KafkaClientError(f"cannot read {where}: {exc.args[0].str()}") from exc
    finally:
        consumer.close()


def _position(consumer: Any, tp: Any, where: str) -> int:
    """The consumer's next offset of ``tp`` (-1 when it has none yet)."""
    try:
        (found,) = consumer.position([tp])
    except KafkaException as exc:
        raise KafkaClientError(f"cannot read the position of {where}: {exc.args[0].str()}") from exc
    return int(found.offset) if found.offset >= 0 else -1
