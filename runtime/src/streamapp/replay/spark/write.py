"""The replay's final write: every output record once, in the canonical order, through one transactional writer
per output partition (``streamapp.replay.output``, ADR 0006).

The canonical order of an output partition written by several producers (tasks ``<sub-topology>_<partition>``)
is the head-timestamp merge of their sequences, ties to the producer with the lower ``(sub-topology,
partition)`` (``tasks.iter_merged``, the runtime's ``PartitionGroup.next_record``). That merge equals a stable
sort by ``(running max of the timestamps within the producer's own sequence, producer, position)``: a record
whose timestamp is below its producer's running max leaves right after the record that set that max, because at
that moment every other head was at least that max (docs/replay.md "Canonical order";
``runtime/tests/replay/test_write_order_equals_the_head_timestamp_merge.py``). So Spark does the merge:

1. one shuffle of the output records by writer (``repartitionById``; writer ``i`` goes to write task
   ``i % tasks``);
2. a running ``max(timestamp)`` over each producer's records of each writer in offset order (a Spark window; the
   shuffle above already clusters it, so it only sorts);
3. a sort by ``(writer, running max, producer, offset)``, then ``mapInArrow``: ``_WriteFunction`` streams each
   writer's run of rows straight into ``output.write_partition`` (nothing spooled, no heap).

The worker that unpickles ``_WriteFunction`` imports this module, pyarrow and ``streamapp.replay.output``
(confluent-kafka), not the engine, its tasks or the runtime's ``StreamTask``.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from streamapp.kafka.admin import TopicAdmin, TopicSpec
from streamapp.kafka.types import ConsumerRecord
from streamapp.replay.output import Writer, WriteResult, ensure_markers_topic, write_partition

if TYPE_CHECKING:
    from streamapp.replay.plan import ReplayPlan

__all__ = ["HEAD", "WRITER", "in_write_order", "write_outputs", "writer_index"]

WRITER = "writer"
"""Column of a row's writer index (``output.Writer.index``)."""
HEAD = "head_timestamp"
"""Column of the running max timestamp of the row's producer sequence, up to and including the row (ms)."""
_PRODUCER = ("producer_sub", "producer_part")
_TASK = "write_task"
_COUNTS = ("records", "chunks_written", "chunks_skipped")
_WRITE_SCHEMA = "topic string, partition int, records long, chunks_written long, chunks_skipped long"
_WRITE_ARROW_SCHEMA = pa.schema({"topic": pa.string(), "partition": pa.int32()} | dict.fromkeys(_COUNTS, pa.int64()))


def write_outputs(
    plan: ReplayPlan,
    outputs: Sequence[DataFrame],
    targets: Sequence[tuple[str, int]],
    kinds: Sequence[str],
    chunk_records: int,
    client_settings: Mapping[str, str],
    tasks: int | None = None,
) -> list[WriteResult]:
    """Write the records of ``outputs`` (``records.RECORD_SCHEMA`` rows) whose ``kind`` is one of ``kinds`` to
    ``targets`` (the ``(topic, partition)`` pairs they hold, sorted; writer ``i`` = ``targets[i]``), effectively
    once (module doc). Creates the plan's internal topics and the markers topic first.

    ``tasks``: Spark write tasks, each writing its writers one after the other (default: one per writer).
    Returns one ``WriteResult`` per target, sorted by ``(topic, partition)``. Raises KafkaClientError (e.g.
    ProducerFencedError) through the failed Spark job.
    """
    writers = {target: Writer(i, *target) for i, target in enumerate(targets)}
    settings = {"bootstrap.servers": plan.bootstrap_servers, **client_settings}
    internal = plan.description.internal_topics(plan.application_id, plan.source_partitions())
    TopicAdmin(settings).ensure_topics([TopicSpec(t.name, t.partitions, t.config) for t in internal])
    ensure_markers_topic(settings, plan.replay_id, len(writers))
    if not writers:
        return []
    written = outputs[0]
    for stage in outputs[1:]:
        written = written.unionByName(stage)
    written = written.where(F.col("kind").isin(list(kinds))).select(
        writer_index(targets).alias(WRITER), "offset", "key", "value", "timestamp", *_PRODUCER, "headers"
    )
    function = _WriteFunction(settings, plan.replay_id, list(writers.values()), chunk_records)
    rows = (
        in_write_order(written, min(tasks or len(writers), len(writers)))
        .select(WRITER, "key", "value", "timestamp", "headers")
        .mapInArrow(function, _WRITE_SCHEMA)
        .collect()
    )
    results = [
        WriteResult(row["topic"], row["partition"], row["records"], row["chunks_written"], row["chunks_skipped"])
        for row in rows
    ]
    return sorted(results, key=lambda w: (w.topic, w.partition))


def writer_index(targets: Sequence[tuple[str, int]]) -> Column:
    """The index in ``targets`` of a row's ``(topic, partition)``: a ``CASE`` over the topics (not over every
    writer), each a lookup in a constant array by partition. Null for a pair not in ``targets``."""
    by_topic: dict[str, dict[int, int]] = {}
    for i, (topic, partition) in enumerate(targets):
        by_topic.setdefault(topic, {})[partition] = i
    index: Column | None = None
    partition_column = F.col("partition")
    for topic, writers in by_topic.items():
        table = F.array(*[F.lit(writers.get(p, -1)) for p in range(max(writers) + 1)])
        found = F.when(partition_column <= max(writers), F.element_at(table, partition_column + 1))
        of_topic = F.col("topic") == topic
        index = F.when(of_topic, found) if index is None else index.when(of_topic, found)
    assert index is not None
    return F.when(index >= 0, index).cast("int")


def in_write_order(rows: DataFrame, tasks: int) -> DataFrame:
    """``rows`` (columns ``WRITER``, ``producer_sub``, ``producer_part``, ``offset``, ``timestamp``, ...) in
    ``tasks`` Spark partitions, writer ``w`` in partition ``w % tasks``, each sorted by writer and then in the
    canonical order of the writer's partition (module doc), with the ``HEAD`` column added."""
    # the window clusters by the shuffle's own column, so the shuffle satisfies it (no second exchange)
    producer = Window.partitionBy(_TASK, WRITER, *_PRODUCER).orderBy("offset").rowsBetween(Window.unboundedPreceding, 0)
    return (
        rows.withColumn(_TASK, F.col(WRITER) % tasks)
        .repartitionById(tasks, F.col(_TASK))
        .withColumn(HEAD, F.max("timestamp").over(producer))
        .sortWithinPartitions(WRITER, HEAD, *_PRODUCER, "offset")
        .drop(_TASK)
    )


class _WriteFunction:
    """The ``mapInArrow`` function of the write: its rows (``WRITER``, key, value, timestamp, headers) come in
    runs of one writer each, already in canonical order; each run goes to ``output.write_partition`` as it is
    read (memory: one Arrow batch and one chunk of records). Yields one result row per writer."""

    def __init__(self, settings: dict[str, Any], replay_id: str, writers: list[Writer], chunk_records: int) -> None:
        self.settings = settings
        self.replay_id = replay_id
        self.writers = writers
        self.chunk_records = chunk_records

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for index, rows in itertools.groupby(_records(batches), key=lambda pair: pair[0]):
            writer = self.writers[index]
            records = (record for _, record in rows)
            write = write_partition(self.settings, self.replay_id, writer, records, self.chunk_records)
            yield pa.RecordBatch.from_pylist([dataclasses.asdict(write)], schema=_WRITE_ARROW_SCHEMA)


def _records(batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[int, ConsumerRecord]]:
    """``(writer index, record)`` per row, column by column (no dict per row). The record's topic, partition and
    offset are not read by the writer (it writes to its own partition; the broker assigns offsets)."""
    for batch in batches:
        writers = batch.column(WRITER).to_pylist()
        keys = batch.column("key").to_pylist()
        values = batch.column("value").to_pylist()
        timestamps = batch.column("timestamp").to_pylist()
        headers = batch.column("headers")
        header_lists = headers.to_pylist() if headers.null_count < len(headers) else [None] * len(headers)
        for writer, key, value, timestamp, record_headers in zip(
            writers, keys, values, timestamps, header_lists, strict=True
        ):
            yield (
                writer,
                ConsumerRecord(
                    "",
                    -1,
                    -1,
                    key,
                    value,
                    timestamp,
                    [(h["key"], h["value"]) for h in record_headers] if record_headers else None,
                ),
            )
