"""Effectively-once replay output: one transactional writer per output partition, with done markers.

docs/adr/0006-replay-output.md says why. Each output partition (a sink, changelog or repartition topic's
partition) has exactly one writer, ``transactional.id = streamapp-replay-<replay id>-<writer index>``, and one
partition of the replay's markers topic (``markers_topic``, one partition per writer, created before the
writers start). The writer:

1. ``init_transactions``: fences every earlier incarnation of its id (a killed or retried Spark task) and
   aborts its open transaction, so nothing of it can still become visible;
2. reads its markers partition with ``read_committed`` (no other id writes there, so after step 1 nothing in
   it is open): the chunks already committed, always a prefix 0..k-1;
3. writes the remaining chunks of ``chunk_records`` records, each in one transaction together with its marker.

The records of a partition and their chunking are a deterministic function of the plan (same input offsets,
same canonical order), so a rerun writes exactly the chunks that are missing: a ``read_committed`` consumer sees
every record once, with no duplicate and no gap, however often the job was killed. Timestamps are kept.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from streamapp.kafka.admin import TopicAdmin, TopicSpec
from streamapp.kafka.clients import KafkaRestoreConsumer
from streamapp.kafka.producer import KafkaProducer
from streamapp.kafka.types import ConsumerRecord, TopicPartition

__all__ = ["WriteResult", "Writer", "ensure_markers_topic", "markers_topic", "transactional_id", "write_partition"]

_TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class Writer:
    """The writer of one output partition: its index (markers partition, transactional id suffix)."""

    index: int
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class WriteResult:
    topic: str
    partition: int
    records: int
    """Records the partition gets from this replay in total."""
    chunks_written: int
    chunks_skipped: int
    """Chunks an earlier attempt had already committed."""


def markers_topic(replay_id: str) -> str:
    """The replay's done markers: one partition per writer, compacted (key = chunk number)."""
    return f"streamapp-replay-{replay_id}-markers"


def transactional_id(replay_id: str, writer: Writer) -> str:
    return f"streamapp-replay-{replay_id}-{writer.index}"


def ensure_markers_topic(settings: Mapping[str, Any], replay_id: str, writers: int) -> None:
    """Create the markers topic with ``writers`` partitions (kept if it exists with that count: a rerun).

    Raises TopicMismatchError when it exists with another count (the plan changed under the same replay id).
    """
    admin = TopicAdmin(settings)
    admin.ensure_topics([TopicSpec(markers_topic(replay_id), max(writers, 1), {"cleanup.policy": "compact"})])


def write_partition(
    settings: Mapping[str, Any],
    replay_id: str,
    writer: Writer,
    records: Iterable[ConsumerRecord],
    chunk_records: int,
) -> WriteResult:
    """Write ``records`` (already in canonical order, consumed lazily) to ``writer``'s partition, effectively once
    (module doc).

    ``settings``: librdkafka settings with ``bootstrap.servers`` (and security settings). Raises KafkaClientError
    (e.g. ProducerFencedError when a newer incarnation of this writer started).
    """
    chunks = _chunks(records, chunk_records)
    producer = KafkaProducer(
        {
            **settings,
            "transactional.id": transactional_id(replay_id, writer),
            "transaction.timeout.ms": 60_000,
            "enable.idempotence": True,
            "linger.ms": 20,
        }
    )
    try:
        producer.init_transactions(_TIMEOUT_S)
        done = _committed_chunks(settings, replay_id, writer)
        written = total = count = 0
        for number, chunk in enumerate(chunks):
            total, count = total + len(chunk), count + 1
            if number < done:
                continue
            producer.begin_transaction()
            for record in chunk:
                producer.send(
                    writer.topic, record.key, record.value, record.timestamp, writer.partition, None, record.headers
                )
            marker = {"topic": writer.topic, "partition": writer.partition, "chunk": number, "records": len(chunk)}
            producer.send(markers_topic(replay_id), str(number).encode(), json.dumps(marker).encode(), -1, writer.index)
            producer.commit_transaction(_TIMEOUT_S)
            written += 1
    finally:
        producer.close(5.0)
    return WriteResult(writer.topic, writer.partition, total, written, min(done, count))


def _chunks(records: Iterable[ConsumerRecord], size: int) -> Iterator[list[ConsumerRecord]]:
    iterator = iter(records)
    while chunk := list(itertools.islice(iterator, size)):
        yield chunk


def _committed_chunks(settings: Mapping[str, Any], replay_id: str, writer: Writer) -> int:
    """How many chunks of ``writer`` are committed: 1 + the highest chunk number in its markers partition."""
    tp = TopicPartition(markers_topic(replay_id), writer.index)
    consumer = KafkaRestoreConsumer(
        {
            **settings,
            "group.id": f"streamapp-replay-{replay_id}-markers-reader",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
    )
    try:
        end = consumer.end_offset(tp, _TIMEOUT_S)
        if end == 0:
            return 0
        consumer.assign({tp: 0})
        highest = -1
        deadline = time.monotonic() + _TIMEOUT_S
        while time.monotonic() < deadline:
            records, at_end = consumer.poll(500, 0.5)
            for record in records:
                highest = max(highest, int(record.key or b"-1"))
            if tp in at_end:
                return highest + 1
        raise TimeoutError(f"markers partition {tp} not read to its end within {_TIMEOUT_S:.0f}s")
    finally:
        consumer.close()
