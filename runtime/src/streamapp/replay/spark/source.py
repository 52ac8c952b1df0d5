"""The replay's Kafka reads: bounded offset ranges read by Spark's Python workers with the runtime's own client.

A topic's plan range is cut into splits (``splits``): one per partition, or several sub-ranges per partition when
the replay may run more tasks than the topic has partitions. ``read_frame`` makes one Spark task per split
(``spark.range`` with one row per Spark partition) whose ``mapInArrow`` function (``RangeRead``) consumes the
split with ``streamapp.kafka.range_reader`` (librdkafka: ``read_committed``, the plan's own client settings and
security, no Java client or connector jars) and yields Arrow batches, either:

- the records as they are (``records.RECORD_SCHEMA``, kind ``source``), for the runtime's tasks; or
- what a native stage's classifier makes of them (``streamapp.replay.spark.native``): narrow rows (partition, offset,
  key, timestamp, status, ...) computed in the reading worker, so a record's value never enters the JVM.

Splitting a partition changes no result: every stage orders its input by partition and offset itself.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from streamapp.kafka.range_reader import RecordColumns, read_range
from streamapp.replay.spark.native import Columns
from streamapp.replay.spark.records import record_batch

__all__ = ["RangeRead", "Split", "raw_batch", "read_frame", "splits"]


@dataclass(frozen=True)
class Split:
    """Offsets ``[start, end)`` of ``topic``'s ``partition``, read by one Spark task."""

    topic: str
    partition: int
    start: int
    end: int


def splits(topic: str, start: Mapping[int, int], end: Mapping[int, int], min_splits: int = 1) -> list[Split]:
    """The splits of ``topic``'s range (``start``/``end``: partition -> offset, end exclusive), in partition and
    offset order: one per partition, and when the topic has fewer partitions than ``min_splits``, each
    partition's range cut into ``ceil(min_splits / partitions)`` contiguous sub-ranges of nearly equal size (Spark's
    ``minPartitions`` of its Kafka source). Empty ranges give no split."""
    partitions = sorted(end)
    pieces = max(1, -(-min_splits // max(1, len(partitions))))
    found: list[Split] = []
    for partition in partitions:
        first, last = start[partition], end[partition]
        size = last - first
        if size <= 0:
            continue
        count = min(pieces, size)
        bounds = [first + size * i // count for i in range(count + 1)]
        found.extend(Split(topic, partition, lo, hi) for lo, hi in pairwise(bounds))
    return found


class RangeRead:
    """The ``mapInArrow`` function of ``read_frame``: for each split id in its input (``spark.range``'s ``id``),
    the split's records as ``raw_batch``es, or, given a ``classifier`` (``native._Classifier``), its
    classified batches: the classifier reads the consumed columns (``native.Columns``) as Python lists, so the
    values are never copied into Arrow."""

    def __init__(
        self,
        settings: Mapping[str, Any],
        parts: Sequence[Split],
        classifier: Any = None,
        *,
        with_headers: bool = True,
        batch_records: int = 10_000,
    ) -> None:
        self.settings = dict(settings)
        self.parts = list(parts)
        self.classifier = classifier
        self.with_headers = with_headers
        self.batch_records = batch_records

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for split_id in batch.column(0).to_pylist():
                split = self.parts[split_id]
                if self.classifier is None:
                    yield from (raw_batch(split, columns) for columns in self._read(split))
                else:
                    consumed = self._read(split)
                    yield from self.classifier.classify_read(
                        Columns(split.partition, c.offsets, c.keys, c.values, c.timestamps) for c in consumed
                    )

    def _read(self, split: Split) -> Iterator[RecordColumns]:
        return read_range(
            self.settings,
            split.topic,
            split.partition,
            split.start,
            split.end,
            batch_records=self.batch_records,
            with_headers=self.with_headers,
        )


def raw_batch(split: Split, columns: RecordColumns) -> pa.RecordBatch:
    """``columns`` of ``split``'s partition as records read from Kafka (``RECORD_ARROW_SCHEMA``: producer -1, kind
    ``source``)."""
    return record_batch(
        len(columns),
        topic=split.topic,
        partition=split.partition,
        offset=columns.offsets,
        key=columns.keys,
        value=columns.values,
        timestamp=columns.timestamps,
        producer_sub=-1,
        producer_part=-1,
        kind="source",
        headers=columns.headers,
    )


def read_frame(
    spark: SparkSession,
    parts: Sequence[Split],
    settings: Mapping[str, Any],
    schema: str,
    classifier: Any = None,
    *,
    with_headers: bool = True,
) -> DataFrame:
    """The records of ``parts``, one Spark task per split, as ``schema`` rows: the records (``raw_batch``) without a
    ``classifier``, else the classifier's schema. ``settings``: librdkafka consumer settings (bootstrap servers,
    security). A read that fails (``KafkaClientError`` naming the partition and offset) fails its task, which Spark
    retries as a whole."""
    if not parts:
        return spark.createDataFrame([], schema)
    ids = spark.range(0, len(parts), 1, numPartitions=len(parts))
    read = RangeRead(settings, parts, classifier, with_headers=with_headers)
    return ids.mapInArrow(read, schema)
