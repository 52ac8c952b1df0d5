"""The task path's Spark stage function: the runtime's own ``StreamTask`` (``streamapp.replay.tasks``) run over
each task's records in a ``mapInArrow`` worker, for any sub-topology."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from streamapp.kafka.types import ConsumerRecord
from streamapp.replay.drops import DROPPED_KIND
from streamapp.replay.spark.records import record_batch
from streamapp.replay.spark.topic_reads import GlobalRecord
from streamapp.replay.tasks import ReplayTask, merge_by_head_timestamp
from streamapp.topology import TopologyDescription

__all__ = ["CHANGELOG_KIND", "RESUMED_OFFSET", "StageFunction"]

CHANGELOG_KIND = "changelog"
"""``kind`` of a changelog record in the stages' records (``records.RECORD_SCHEMA``)."""
RESUMED_OFFSET = 1 << 40
"""Where a resumed stage's records start in their producer's sequence: after anything the producer's first run
wrote (a task writes fewer than 2^40 records), so the final write and the next stages order them after it."""

_WORKER_CACHE: dict[str, tuple[TopologyDescription, dict[str, dict[str, Callable[..., Any]]]]] = {}
"""Per Python worker: the parsed description and its imported user functions, by document."""


def _worker_topology(document: str) -> tuple[TopologyDescription, dict[str, dict[str, Callable[..., Any]]]]:
    cached = _WORKER_CACHE.get(document)
    if cached is None:
        description = TopologyDescription.from_dict(json.loads(document))
        cached = (description, description.resolve_functions())  # user code, imported by module:attr
        _WORKER_CACHE[document] = cached
    return cached


class StageFunction:
    """The ``mapInArrow`` function of one stage. Its input partition holds whole tasks, sorted by task, topic,
    producer and offset; it runs them one after the other. A task reading one partition of one external topic is
    fed batch by batch (its order is the offset order, its memory the task's state); any other task is buffered
    whole first, because its order merges several sequences (``_ordered_inputs``). Pickled to the workers, so it
    carries only plain data (the description's JSON, not the parsed objects or user functions)."""

    def __init__(
        self,
        document: str,
        sub_id: int,
        counts: dict[str, int],
        config: dict[str, Any],
        wall_clock_ms: int,
        records: Any = None,
        global_records: list[GlobalRecord] | None = None,
        *,
        final: bool = False,
        resumes: bool = False,
    ) -> None:
        self.document = document
        self.global_records = global_records or []
        self.sub_id = sub_id
        self.counts = counts
        self.final = final
        """``EMIT_FINAL``: the tasks cache their stores' updates and flush them once, at the end."""
        self.config = config
        self.wall_clock_ms = wall_clock_ms
        self.records = records
        """Spark accumulator of the input records the stage read (progress), or None."""
        self.resumes = resumes
        """A resumed stage (``streamapp.replay.stages``): its input holds, besides the records to process, the
        ``changelog`` records the first run of the sub-topology wrote, which the tasks restore their stores from;
        what it writes follows the first run's records in each producer's sequence (offsets from
        ``RESUMED_OFFSET``)."""

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        description, functions = _worker_topology(self.document)
        sub = next(s for s in description.subtopologies() if s.id == self.sub_id)
        application_id = str(self.config["application.id"])
        sources = [ref.resolve(application_id) for ref in sub.source_topics]
        streamed = len(sources) == 1 and not sub.source_topics[0].internal and not self.resumes
        repartition = frozenset(ref.resolve(application_id) for ref in sub.sink_topics if ref.internal)

        def new_task(partition: int, restored: list[ConsumerRecord]) -> ReplayTask:
            return ReplayTask(
                description,
                sub,
                partition,
                self.counts,
                self.config,
                functions=functions,
                wall_clock_ms=self.wall_clock_ms,
                global_records=(ConsumerRecord(*record) for record in self.global_records),
                final=self.final,
                restored=restored,
            )

        task: ReplayTask | None = None
        current: int | None = None
        buffered: list[dict[str, Any]] = []
        for batch in batches:
            if self.records is not None:
                self.records.add(batch.num_rows - _changelog_rows(batch))
            records = list(_records_of(batch)) if streamed else []
            for partition, start, end in _runs_by_partition(batch.column("partition").to_pylist()):
                if current is not None and current != partition:
                    yield from self._finish(task, current, buffered, new_task, repartition)
                    task, buffered = None, []
                current = partition
                if streamed:
                    task = task or new_task(partition, [])
                    task.add(sources[0], records[start:end])
                    yield self._batch(task.process(), task, repartition)
                else:
                    buffered.extend(batch.slice(start, end - start).to_pylist())
        if current is not None:
            yield from self._finish(task, current, buffered, new_task, repartition)

    def _finish(
        self,
        task: ReplayTask | None,
        partition: int,
        buffered: list[dict[str, Any]],
        new_task: Callable[[int, list[ConsumerRecord]], ReplayTask],
        repartition: frozenset[str],
    ) -> Iterator[pa.RecordBatch]:
        """End task ``partition``: a streamed ``task`` has processed its input; a buffered one is created now, its
        stores restored from the ``changelog`` rows among ``buffered`` (a resumed stage), and fed the rest."""
        written: list[ConsumerRecord] = []
        if task is None:
            restored = [_record(row) for row in buffered if row["kind"] == CHANGELOG_KIND]
            task = new_task(partition, restored)
        try:
            if buffered:
                inputs = [row for row in buffered if row["kind"] != CHANGELOG_KIND]
                for topic, records in _ordered_inputs(inputs).items():
                    task.add(topic, records)
                written = task.process()
            written += task.finish()
        finally:
            task.close()
        yield self._batch(written, task, repartition)
        yield self._dropped(task)

    @property
    def _offset_base(self) -> int:
        return RESUMED_OFFSET if self.resumes else 0

    def _dropped(self, task: ReplayTask) -> pa.RecordBatch:
        """The finished ``task``'s drop rows: one per reason it dropped records for (``streamapp.replay.drops``)."""
        dropped = sorted(task.dropped_by_reason.items())
        return record_batch(
            len(dropped),
            topic=[reason for reason, _ in dropped],
            partition=task.partition,
            offset=[records for _, records in dropped],
            key=None,
            value=None,
            timestamp=-1,
            producer_sub=self.sub_id,
            producer_part=task.partition,
            kind=DROPPED_KIND,
            headers=None,
        )

    def _batch(self, records: list[ConsumerRecord], task: ReplayTask, repartition: frozenset[str]) -> pa.RecordBatch:
        changelog = task.changelog_topics
        return record_batch(
            len(records),
            topic=[r.topic for r in records],
            partition=[r.partition for r in records],
            offset=[r.offset + self._offset_base for r in records],
            key=[r.key for r in records],
            value=[r.value for r in records],
            timestamp=[r.timestamp for r in records],
            producer_sub=self.sub_id,
            producer_part=task.partition,
            kind=[
                CHANGELOG_KIND if r.topic in changelog else "repartition" if r.topic in repartition else "sink"
                for r in records
            ],
            headers=[[{"key": k, "value": v} for k, v in r.headers] if r.headers else None for r in records],
        )


def _changelog_rows(batch: pa.RecordBatch) -> int:
    """The rows of ``batch`` of kind ``changelog`` (a resumed stage's restore records: not input records)."""
    kinds = batch.column("kind")
    return int(pc.sum(pc.equal(kinds, CHANGELOG_KIND)).as_py() or 0)


def _runs_by_partition(partitions: list[int]) -> Iterator[tuple[int, int, int]]:
    """``(partition, start, end)`` of each run of consecutive rows of one task (the ``partition`` column)."""
    start = 0
    for i in range(1, len(partitions) + 1):
        if i == len(partitions) or partitions[i] != partitions[start]:
            yield partitions[start], start, i
            start = i


def _record(row: dict[str, Any]) -> ConsumerRecord:
    headers = [(h["key"], h["value"]) for h in row["headers"]] if row["headers"] else None
    return ConsumerRecord(
        row["topic"], row["partition"], row["offset"], row["key"], row["value"], row["timestamp"], headers
    )


def _records_of(batch: pa.RecordBatch) -> Iterator[ConsumerRecord]:
    """The batch's rows as ``ConsumerRecord``s, column by column (no dict per row)."""
    columns = [batch.column(name).to_pylist() for name in ("topic", "partition", "offset", "key", "value", "timestamp")]
    headers = batch.column("headers")
    header_lists = headers.to_pylist() if headers.null_count < len(headers) else [None] * len(headers)
    for topic, partition, offset, key, value, timestamp, record_headers in zip(*columns, header_lists, strict=True):
        yield ConsumerRecord(
            topic,
            partition,
            offset,
            key,
            value,
            timestamp,
            [(h["key"], h["value"]) for h in record_headers] if record_headers else None,
        )


def _ordered_inputs(rows: list[dict[str, Any]]) -> dict[str, list[ConsumerRecord]]:
    """A task's input per topic in processing order: records read from Kafka in offset order; records of a
    repartition topic merged over their producing tasks (``merge_by_head_timestamp``)."""
    by_producer: dict[str, dict[tuple[int, int], list[ConsumerRecord]]] = {}
    for row in rows:  # sorted by topic, producer, offset
        producers = by_producer.setdefault(row["topic"], {})
        producers.setdefault((row["producer_sub"], row["producer_part"]), []).append(_record(row))
    ordered: dict[str, list[ConsumerRecord]] = {}
    for topic, producers in by_producer.items():
        if set(producers) == {(-1, -1)}:
            ordered[topic] = producers[(-1, -1)]  # read from Kafka: offset order
            continue
        # a repartition topic's records get the offsets of the merged order (what a broker would assign)
        merged = merge_by_head_timestamp([producers[p] for p in sorted(producers)])
        ordered[topic] = [
            ConsumerRecord(r.topic, r.partition, i, r.key, r.value, r.timestamp, r.headers)
            for i, r in enumerate(merged)
        ]
    return ordered
