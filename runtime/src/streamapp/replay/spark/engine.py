"""The replay on Spark: a topology's sub-topologies as stages of one batch job over bounded offset ranges.

For each sub-topology in dependency order (``plan.stage_order``):

1. its input is the union of the Kafka reads of its external source topics (``spark.source``: offset ranges read
   by Spark's Python workers with the runtime's client, ``read_committed``) and the repartition records upstream stages
   produced (kept in Spark: a repartition topic is a shuffle keyed by the partition the runtime's murmur2
   partitioner gave each record, never a round trip through Kafka);
2. ``repartitionById(partition)`` + ``sortWithinPartitions(partition, topic, producer, offset)`` + ``mapInArrow``: each
   run of one ``partition`` value is one task ``<subtopology>_<p>``; ``streamapp.replay.tasks`` runs its records,
   in the order the runtime would, through the runtime's own ``StreamTask``;
3. what the tasks wrote (sink, repartition and changelog records, each with the partition the runtime's
   partitioner computed) is persisted for the next stages and the final write.

A sub-topology of a shape ``streamapp.replay.spark.native`` recognises (a keyed or windowed count of a source topic)
runs natively instead of step 2 (``_native_stage``: the reading worker classifies each batch with the runtime's
serdes and, when it reads a whole partition, folds the counts itself, ``spark.folds``; else Spark's window
functions fold), with the same records out; a record that needs the runtime's handlers discards
that attempt and the sub-topology runs through the tasks.

The final write (``streamapp.replay.spark.write``) sorts each output partition's records into the canonical order
(the head-timestamp merge of the tasks' sequences, as a Spark sort) and streams them into one transactional
writer per output partition, effectively once (``streamapp.replay.output``).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from streamapp.drop_reasons import LATE
from streamapp.kafka.types import ConsumerRecord
from streamapp.replay.drops import DROPPED_KIND, DropCounts, add_counts
from streamapp.replay.output import WriteResult
from streamapp.replay.plan import EMIT_FINAL, ReplayPlan, stage_order
from streamapp.replay.progress import ReplayProgress, log_progress
from streamapp.replay.security import client_settings
from streamapp.replay.shapes import (
    PATH_NATIVE_COUNT,
    PATH_NATIVE_WINDOWED_COUNT,
    PATH_TASK,
    NativeCount,
    NativeWindowedCount,
    native_count,
    native_windowed_count,
)
from streamapp.replay.spark.folds import FoldedCount
from streamapp.replay.spark.native import COUNTED, WINDOW_PAIRS, BatchClassifier, WindowedBatchClassifier
from streamapp.replay.spark.records import record_batch
from streamapp.replay.spark.source import Split, read_frame, splits
from streamapp.replay.spark.write import write_outputs
from streamapp.replay.tasks import ReplayTask, merge_by_head_timestamp
from streamapp.topology import GlobalTableNode, Subtopology, TopologyDescription

__all__ = ["JOB_DESCRIPTION_PREFIX", "RECORD_SCHEMA", "ReplayResult", "replay_parallelism", "run_replay"]

RECORD_SCHEMA = (
    "topic string, partition int, offset long, key binary, value binary, timestamp long, "
    "producer_sub int, producer_part int, kind string, headers array<struct<key: string, value: binary>>"
)
"""Records between stages: ``producer_*`` = the task that wrote it (-1 for records read from Kafka), ``kind`` =
``source`` | ``sink`` | ``repartition`` | ``changelog``, ``offset`` = position in the producer's sequence,
``headers`` as the record had them (null: none)."""
JOB_DESCRIPTION_PREFIX = "streamapp-replay"
"""Spark job descriptions: ``streamapp-replay stage <sub-topology id>`` for a stage's jobs (reading, processing,
materializing), ``streamapp-replay write`` for the final write's."""
DEFAULT_CHUNK_RECORDS = 10_000


@dataclass
class ReplayResult:
    """What a replay did: records read per source topic, how each sub-topology ran, records each stage's tasks
    wrote (sub-topology id -> count, changelog and repartition records included), records written per output
    topic, writer results, and seconds per phase (``read_and_process``: the stages; ``write``: merging and
    writing the output)."""

    records_read: dict[str, int] = field(default_factory=dict)
    paths: dict[int, str] = field(default_factory=dict)
    """Sub-topology id -> how it ran: ``native.PATH_NATIVE_COUNT``, ``native.PATH_NATIVE_WINDOWED_COUNT`` or
    ``native.PATH_TASK``."""
    records_written_by_stage: dict[int, int] = field(default_factory=dict)
    records_written: dict[str, int] = field(default_factory=dict)
    writes: list[WriteResult] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    dropped_records: dict[str, int] = field(default_factory=dict)
    """Records dropped, by reason (``streamapp.drop_reasons``, ``streamapp.replay.drops``): what the streaming run
    counts in ``streamapp_task_dropped_records_total`` and ``StreamApp.status.droppedRecords``."""


def run_replay(
    spark: SparkSession,
    plan: ReplayPlan,
    *,
    chunk_records: int = DEFAULT_CHUNK_RECORDS,
    native: bool = True,
    on_progress: Callable[[ReplayProgress], None] | None = log_progress,
    progress_interval_s: float = 5.0,
    parallelism: int | None = None,
    expire_windows: bool = True,
) -> ReplayResult:
    """Run ``plan`` on ``spark`` and write its output (see the module docstring).

    ``on_progress`` is called every ``progress_interval_s`` while Spark computes, and at the end
    (``streamapp.replay.progress``; ``None``: no reports).

    ``native``: run the sub-topologies ``streamapp.replay.spark.native`` recognises with Spark's operators (the
    default); ``False`` runs every one through the runtime's task (the reference the native path must equal).

    ``parallelism``: the tasks Spark may run at once (default: ``replay_parallelism(spark)``, the cores of the
    session). A topic with fewer partitions is read in that many offset ranges (Spark's ``minPartitions``), and
    the shuffles have twice as many partitions unless the session's conf sets ``spark.sql.shuffle.partitions``.

    ``expire_windows`` (default on): leave out of the window stores' changelogs the windows the stores have expired
    by the end (``_without_expired_windows``): a new version restores the same windows from fewer records (the
    changelog holds what the new version's store will hold, not the streaming run's record for record; the
    conformance harness compares the stores as a restore reads them). ``False`` writes every window's record.

    ``plan.emit == EMIT_FINAL``: what a streaming run whose record cache flushes once, at the end, writes (Kafka
    Streams' ``statestore.cache.max.bytes``: only the latest value per key of a cached store is the cache's
    contract): a native stage writes each task's last value per key or window; a task-path stage runs the
    runtime's own caching stores with a cache nothing evicts and flushes it when the task ends
    (``tasks.ReplayTask``'s ``final``), so a downstream stage reads what such a run would have repartitioned.

    Raises UnsupportedTopologyError / ValueError (``ReplayPlan.check``) before any job starts; a failing task
    fails the job (Spark's error names the Python exception, e.g. ProcessingError naming the record).
    """
    plan.check()
    settings = client_settings(plan.kafka_settings, os.environ)
    read_settings = {"bootstrap.servers": plan.bootstrap_servers, **settings}
    result = ReplayResult()
    tracker = _ProgressTracker(spark, plan, on_progress, progress_interval_s)
    context = spark.sparkContext
    cached: list[DataFrame] = []
    cores = parallelism or replay_parallelism(spark)
    with tracker, _shuffle_partitions(spark, 2 * cores):
        started = time.monotonic()
        retentions = _window_retentions(plan) if expire_windows else {}
        outputs, targets = _run_stages(spark, plan, result, native, read_settings, tracker, cached, cores, retentions)
        result.seconds["read_and_process"] = time.monotonic() - started
        tracker.phase = "write"
        context.setJobDescription(f"{JOB_DESCRIPTION_PREFIX} write")
        started = time.monotonic()
        _write(plan, outputs, targets, result, chunk_records, settings)
        result.seconds["write"] = time.monotonic() - started
        context.setJobDescription(None)  # type: ignore[arg-type]
        tracker.phase = "done"
    for stage in cached:
        stage.unpersist()
    return result


def replay_parallelism(spark: SparkSession) -> int:
    """The tasks ``spark`` runs at once: ``spark.default.parallelism`` if set, else the executors' cores
    (``spark.executor.instances`` x ``spark.executor.cores``, as the operator's ``spark.mode: kubernetes`` sets
    them), else Spark's default parallelism (``local[N]``: N)."""
    conf = spark.sparkContext.getConf()
    if conf.contains("spark.default.parallelism"):
        return max(1, int(conf.get("spark.default.parallelism")))  # type: ignore[arg-type]
    if conf.contains("spark.executor.instances") and conf.contains("spark.executor.cores"):
        instances, cores = conf.get("spark.executor.instances"), conf.get("spark.executor.cores")
        return max(1, int(instances) * int(cores))  # type: ignore[arg-type]
    return max(1, spark.sparkContext.defaultParallelism)


@contextmanager
def _shuffle_partitions(spark: SparkSession, partitions: int) -> Iterator[None]:
    """``spark.sql.shuffle.partitions`` = ``partitions`` while the replay runs, unless the session's Spark conf
    sets it (``spark-defaults.conf``, the builder's conf): that setting is kept."""
    if spark.sparkContext.getConf().contains("spark.sql.shuffle.partitions"):
        yield
        return
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    try:
        yield
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", str(before))


# -- stages ------------------------------------------------------------------------------------------


def _run_stages(
    spark: SparkSession,
    plan: ReplayPlan,
    result: ReplayResult,
    native_ok: bool,
    settings: Mapping[str, Any],
    tracker: _ProgressTracker,
    cached: list[DataFrame],
    cores: int,
    retentions: Mapping[str, int],
) -> tuple[list[DataFrame], list[tuple[str, int]]]:
    """The stages' outputs in stage order (without their drop rows, ``streamapp.replay.drops``; the persisted
    frames they filter are appended to ``cached``) and the output partitions they write to (``_write``'s
    writers), sorted. ``settings``: the reads' librdkafka settings. ``cores``: the tasks Spark runs at once
    (``read_topic``'s splits); ``retentions``: the window stores whose expired windows are left out of the
    changelogs (``_window_retentions``; empty: none)."""
    application_id = plan.application_id
    counts = plan.topic_partitions()
    document = plan.description.to_json(indent=None)
    outputs: list[DataFrame] = []
    repartitioned: dict[str, DataFrame] = {}
    global_records = _global_records(spark, plan, settings)
    written_kinds = _written_kinds(plan)
    targets: set[tuple[str, int]] = set()
    for sub in stage_order(plan.description, application_id):
        # Spark's jobs say what they run (event log, status tracker): "streamapp-replay stage <id>" / "... write"
        spark.sparkContext.setJobDescription(f"{JOB_DESCRIPTION_PREFIX} stage {sub.id}")
        parts: list[DataFrame] = []
        for ref in sub.source_topics:
            topic = ref.resolve(application_id)
            if ref.internal:
                parts.append(repartitioned[topic])
            else:
                parts.append(read_topic(spark, plan, topic, settings, min_partitions=cores))
        stage_input = parts[0]
        for part in parts[1:]:
            stage_input = stage_input.unionByName(part)
        tasks = max(counts.get(ref.resolve(application_id), 1) for ref in sub.source_topics)
        final = plan.emit == EMIT_FINAL
        native = None
        if native_ok and len(sub.source_topics) == 1 and not sub.source_topics[0].internal:
            topic = sub.source_topics[0].resolve(application_id)
            read = NativeRead(spark, splits(topic, plan.start_offsets[topic], plan.end_offsets[topic], cores), settings)
            native = _native_stage(spark, plan, sub, read, tasks, tracker.records, final)
        stage: DataFrame | None = None
        summary: _StageSummary | None = None
        if native is not None:
            stage = native.frame.persist(StorageLevel.MEMORY_AND_DISK)
            summary = _summarize(stage, retentions)  # runs the stage now: its time is the stage's, not the write's
            if native.fallbacks.value:  # a record needs the runtime's handlers: nothing of the attempt is kept
                stage.unpersist()
                stage = None
            else:
                result.paths[sub.id] = native.path
                add_counts(result.dropped_records, native_drops(native, stage))
        if stage is None:
            result.paths[sub.id] = PATH_TASK
            task = _StageFunction(
                document,
                sub.id,
                dict(counts),
                dict(plan.config),
                plan.wall_clock_ms,
                tracker.records,
                global_records,
                final=final,
            )
            stage = (
                # one Spark partition per task (the task's partition number is the Spark partition's id): hashing
                # the number, as repartition() does, put 3 of 4 tasks into one Spark partition and left a core idle
                stage_input.repartitionById(tasks, F.col("partition").cast("int"))
                .sortWithinPartitions("partition", "topic", "producer_sub", "producer_part", "offset")
                .mapInArrow(task, RECORD_SCHEMA)
            )
            stage = stage.persist(StorageLevel.MEMORY_AND_DISK)
            summary = _summarize(stage, retentions)
        assert summary is not None
        cached.append(stage)
        stage = stage.where(F.col("kind") != DROPPED_KIND)
        add_counts(result.dropped_records, summary.dropped)
        result.records_written_by_stage[sub.id] = summary.records
        targets.update(t for kind, t in summary.partitions if kind in written_kinds)
        tracker.stages_done += 1
        outputs.append(_without_expired_windows(stage, summary.window_horizons))
        for ref in sub.sink_topics:
            if ref.internal:
                topic = ref.resolve(application_id)
                repartitioned[topic] = stage.where(F.col("topic") == topic)
    for ref_topic in plan.description.external_source_topics():
        ranges = zip(plan.start_offsets[ref_topic].items(), plan.end_offsets[ref_topic].values(), strict=True)
        result.records_read[ref_topic] = sum(end - start for (_, start), end in ranges)
    return outputs, sorted(targets)


def _written_kinds(plan: ReplayPlan) -> list[str]:
    """The kinds of records the final write writes."""
    return ["sink", "changelog", *(["repartition"] if plan.write_repartition_topics else [])]


def _window_retentions(plan: ReplayPlan) -> dict[str, int]:
    """The changelog topic of each window store of ``plan`` (without duplicates: a join buffer's windows are not
    keyed by start alone) -> the store's retention (ms)."""
    return {
        plan.description.changelog_topic(plan.application_id, store.name): store.retention_ms
        for store in plan.description.stores
        if store.type == "window" and not store.retain_duplicates and store.retention_ms is not None
    }


@dataclass(frozen=True)
class _StageSummary:
    """A persisted stage's output: its records (drop rows not included), the records it dropped per reason
    (``streamapp.replay.drops``), the ``(kind, (topic, partition))`` its records go to, and per window store
    changelog partition the start below which a window is expired (``_without_expired_windows``)."""

    records: int
    dropped: dict[str, int]
    partitions: list[tuple[str, tuple[str, int]]]
    window_horizons: dict[tuple[str, int], int]


def _summarize(stage: DataFrame, retentions: Mapping[str, int]) -> _StageSummary:
    """``stage``'s summary in one job (which runs and persists the stage): rows per kind and output partition;
    a drop row's ``offset`` is the records it dropped, its ``topic`` the reason. ``retentions``: the window
    stores' changelog topics and retentions (``_window_retentions``)."""
    window_changelog = (F.col("kind") == "changelog") & F.col("topic").isin(list(retentions))
    rows = (
        stage.groupBy("kind", "topic", "partition")
        .agg(
            F.count(F.lit(1)).alias("rows"),
            F.sum("offset").alias("offsets"),
            F.max(F.when(window_changelog, _window_start(F.col("key")))).alias("last_start"),
        )
        .collect()
    )
    records = 0
    dropped: dict[str, int] = {}
    partitions: list[tuple[str, tuple[str, int]]] = []
    horizons: dict[tuple[str, int], int] = {}
    for row in rows:
        if row["kind"] == DROPPED_KIND:
            add_counts(dropped, {str(row["topic"]): int(row["offsets"])})
            continue
        target = (str(row["topic"]), int(row["partition"]))
        records += int(row["rows"])
        partitions.append((str(row["kind"]), target))
        if row["last_start"] is not None:
            horizons[target] = int(row["last_start"]) - retentions[target[0]]
    return _StageSummary(records, dropped, partitions, horizons)


def _window_start(key: Column) -> Column:
    """The window start of a window store's changelog key: ``key bytes + start (8 bytes) + seqnum (4 bytes)``
    (Kafka's ``WindowKeySchema``, ``streamapp.state.window_store``); starts are not negative."""
    return F.conv(F.hex(F.substring(key, -12, 8)), 16, 10).cast("long")


def _without_expired_windows(stage: DataFrame, horizons: Mapping[tuple[str, int], int]) -> DataFrame:
    """``stage`` without the changelog records of windows its window stores have expired by the end: a window
    store's observed stream time is the largest window start put into it, and a window with ``start < observed -
    retention`` is hidden and never written again (``streamapp.state.window_store``). A new version restoring the
    changelog therefore sees the same windows with or without them (the latest window is always kept, so its
    observed stream time is the same); the streaming app's changelog holds them until the broker deletes them
    (``retention.ms`` = retention + 1 day). ``horizons``: ``(changelog topic, partition)`` -> the first start kept
    (``_summarize``)."""
    expired: Column | None = None
    for topic in sorted({topic for topic, _ in horizons}):
        bounds = [horizons.get((topic, p)) for p in range(max(p for t, p in horizons if t == topic) + 1)]
        bound = F.element_at(F.array(*[F.lit(b).cast("long") for b in bounds]), F.col("partition") + 1)
        condition = (F.col("topic") == topic) & (_window_start(F.col("key")) < bound)
        expired = condition if expired is None else expired | condition
    if expired is None:
        return stage
    return stage.where(~F.coalesce(expired, F.lit(False)))


_GlobalRecord = tuple[str, int, int, bytes | None, bytes | None, int]
"""``(topic, partition, offset, key, value, timestamp)`` of a global table's topic."""


def _global_records(spark: SparkSession, plan: ReplayPlan, settings: Mapping[str, Any]) -> list[_GlobalRecord]:
    """Every record of the global tables' topics in the plan's ranges, in offset order per partition: what the
    runtime's global consumer bootstraps before any task runs. Collected to the driver and shipped with each
    stage's function (a global table is read whole by every task, as by every stream thread)."""
    records: list[_GlobalRecord] = []
    for node in plan.description.nodes:
        if isinstance(node, GlobalTableNode):
            rows = (
                read_topic(spark, plan, node.topic, settings, with_headers=False)
                .select("topic", "partition", "offset", "key", "value", "timestamp")
                .orderBy("partition", "offset")
                .collect()
            )
            records.extend((r.topic, r.partition, r.offset, r.key, r.value, r.timestamp) for r in rows)
    return records


def read_topic(
    spark: SparkSession,
    plan: ReplayPlan,
    topic: str,
    settings: Mapping[str, Any],
    *,
    min_partitions: int = 1,
    with_headers: bool = True,
) -> DataFrame:
    """The records of ``topic`` in the plan's offset ranges, as ``RECORD_SCHEMA`` rows (kind ``source``), read by
    Spark's Python workers with the runtime's Kafka client (``spark.source``; ``read_committed``; a start offset
    below the log start fails the task). ``settings``: librdkafka consumer settings (``security.client_settings``
    with the bootstrap servers). ``min_partitions``: read in at least that many Spark tasks: a topic with fewer
    partitions has its offset ranges split (the stages order by partition and offset themselves, so a split
    changes no result)."""
    parts = splits(topic, plan.start_offsets[topic], plan.end_offsets[topic], min_partitions)
    return read_frame(spark, parts, settings, RECORD_SCHEMA, with_headers=with_headers)


_HEADERS_TYPE = "array<struct<key: string, value: binary>>"


@dataclass(frozen=True)
class _NativeStage:
    """A sub-topology as Spark operators (``streamapp.replay.spark.native``), computed optimistically: ``fallbacks``
    counts the records that need the runtime's task, known once the stage ran; any such record means the stage's
    output is dropped and the task path runs instead (before anything is written)."""

    frame: DataFrame
    path: str
    fallbacks: Any
    """A Spark accumulator of the classified records whose status is ``FALLBACK``."""
    drops: Any
    """A Spark accumulator of the records the classifiers dropped, by reason (``replay.drops.DropCounts``), and,
    of a windowed count, the (record, window) pairs of the counted records (``native.WINDOW_PAIRS``)."""
    changelog: tuple[str, str] | None = None
    """A windowed count's changelog topic and store value serde: its records' counts are the accepted pairs."""


def window_counts_sum(stage: DataFrame, changelog_topic: str, value_serde: str) -> int:
    """The sum of the counts in a windowed count's changelog records in ``stage`` (its persisted output): the
    (record, window) pairs it accepted. A changelog value is the 8-byte timestamp then the count, as
    ``value_serde`` writes it (``long``: 8-byte big-endian, ``json``: decimal digits)."""
    value = F.expr("substring(value, 9, length(value) - 8)")
    digits = value.cast("string") if value_serde == "json" else F.conv(F.hex(value), 16, 10)
    count = digits.cast("long")
    rows = stage.where((F.col("topic") == changelog_topic) & (F.col("kind") == "changelog"))
    found = rows.agg(F.sum(count).alias("pairs")).collect()[0]["pairs"]
    return int(found or 0)


def native_drops(native: _NativeStage, stage: DataFrame) -> dict[str, int]:
    """The records a native stage dropped, by reason: its classifiers' counts and, of a windowed count, the late
    (record, window) pairs: all pairs minus those its changelog counts (``stage``: its persisted output)."""
    counts = dict(native.drops.value)
    pairs = counts.pop(WINDOW_PAIRS, 0)
    if native.changelog is not None:
        topic, serde = native.changelog
        late = pairs - window_counts_sum(stage, topic, serde)
        if late > 0:
            counts[LATE] = late
    return counts


@dataclass(frozen=True)
class NativeRead:
    """The read of a native stage's one source topic: its splits, classified in the reading worker."""

    spark: SparkSession
    parts: list[Split]
    settings: Mapping[str, Any]

    @property
    def whole_partitions(self) -> bool:
        """Each read task reads one whole partition (a task's records in one read, in offset order)."""
        return len({part.partition for part in self.parts}) == len(self.parts)

    def classified(self, classifier: Any, schema: str) -> DataFrame:
        """The splits' records as ``classifier`` makes them (``schema`` rows), without headers: a record's value
        is read and deserialized in the Python worker and never enters the JVM."""
        return read_frame(self.spark, self.parts, self.settings, schema, classifier, with_headers=False)


def _native_stage(
    spark: SparkSession,
    plan: ReplayPlan,
    sub: Subtopology,
    read: NativeRead,
    tasks: int,
    records: Any,
    final: bool,
) -> _NativeStage | None:
    """The sub-topology as Spark operators, or ``None`` when its shape has no native translation."""
    counts = plan.topic_partitions()
    fallbacks = spark.sparkContext.accumulator(0)
    counts_param: Any = DropCounts()  # an AccumulatorParam by its two methods (replay.drops: no pyspark import)
    drops: Any = spark.sparkContext.accumulator({}, counts_param)
    count = native_count(plan.description, sub, plan.config)
    if count is not None:
        classifier: Any = BatchClassifier(count, counts[count.sink_topic], records, fallbacks, drops)
        if read.whole_partitions:  # one pass per task: classified and folded in the reading worker
            return _NativeStage(
                read.classified(FoldedCount(classifier, final), RECORD_SCHEMA), PATH_NATIVE_COUNT, fallbacks, drops
            )
        frame = _native_count_stage(read.classified(classifier, _CLASSIFIED_SCHEMA), count, final)
        return _NativeStage(frame, PATH_NATIVE_COUNT, fallbacks, drops)
    windowed = native_windowed_count(plan.description, sub, plan.config)
    if windowed is not None:
        classifier = WindowedBatchClassifier(windowed, counts[windowed.count.sink_topic], records, fallbacks, drops)
        changelog = (windowed.count.changelog_topic, windowed.count.store_value_serde)
        if read.whole_partitions:  # one pass per task: classified and folded in the reading worker
            frame = read.classified(FoldedCount(classifier, final), RECORD_SCHEMA)
            return _NativeStage(frame, PATH_NATIVE_WINDOWED_COUNT, fallbacks, drops, changelog)
        classified = read.classified(classifier, _WINDOWED_CLASSIFIED_SCHEMA)
        frame = _native_windowed_count_stage(classified, windowed, tasks, final)
        return _NativeStage(frame, PATH_NATIVE_WINDOWED_COUNT, fallbacks, drops, changelog)
    return None


_CLASSIFIED_SCHEMA = "partition int, offset long, key binary, timestamp long, status tinyint, out_partition int"


def _native_count_stage(classified: DataFrame, count: NativeCount, final: bool) -> DataFrame:
    """A keyed count sub-topology with Spark's operators (``streamapp.replay.spark.native``): the records its tasks
    write, as ``RECORD_SCHEMA`` rows, from ``classified`` (``native.CLASSIFIED_SCHEMA`` rows).

    Per task (the ``partition`` column): the sink record of every counted record is its key's ``row_number``
    ordered by offset (the running count the runtime's ``CountProcessor`` emits) at the record's offset, with the
    largest timestamp of the key so far (KIP-258: the aggregate's timestamp is the later of the record's and the
    stored aggregate's); the changelog has one record per key at the offset where the key was first seen (the
    order the store's write buffer keeps), with the final count and the key's largest timestamp. ``final``
    (``EMIT_FINAL``): of the sink records only each key's last.
    """
    counted = classified.where(F.col("status") == COUNTED)
    return _fold(
        counted,
        ["partition", "key"],
        "offset",
        final,
        sink=_native_record(
            count,
            "sink",
            F.col("out_partition"),
            F.col("offset"),
            F.col("key"),
            _count_bytes(F.col("running_count"), count.sink_value_serde),
            F.col("running_timestamp"),
        ),
        changelog=_native_record(
            count,
            "changelog",
            F.col("partition"),
            F.col("first_sequence"),
            F.col("key"),
            _count_bytes(F.col("running_count"), count.store_value_serde),
            F.col("running_timestamp"),
        ),
    )


def _fold(
    rows: DataFrame, group: list[str], sequence: str, final: bool, sink: list[Column], changelog: list[Column]
) -> DataFrame:
    """Count ``rows`` per ``group`` in ``sequence`` order with one Spark window (one shuffle and sort): every row
    gives a sink record (``sink``'s columns), the last row of each group also the group's changelog record
    (``changelog``'s columns). The columns may read ``running_count`` (the row's ``row_number``),
    ``running_timestamp`` (the largest timestamp so far), ``first_sequence`` (the group's first sequence: where
    the runtime's write buffer put the key), ``sequence`` and ``out_partition`` (the row's own).

    ``final``: only the groups' last rows, as a ``groupBy`` (Spark aggregates each input partition's rows before
    the shuffle, so only about one row per group and input partition is shuffled, and nothing is sorted): the
    last row's ``running_count`` is the group's count, its ``sequence`` the largest, its ``running_timestamp``
    the group's largest timestamp."""
    if final:
        last_rows = rows.groupBy(*group).agg(
            F.count(F.lit(1)).alias("running_count"),
            F.max("timestamp").alias("running_timestamp"),
            F.min(sequence).alias("first_sequence"),
            F.max(sequence).alias(sequence),
            F.min("out_partition").alias("out_partition"),  # a function of the group's key: one value per group
        )
        return last_rows.select(F.explode(F.array(F.struct(*sink), F.struct(*changelog))).alias("record")).select(
            "record.*"
        )
    running = Window.partitionBy(*group).orderBy(sequence)
    whole = running.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    folded = rows.select(
        "*",
        F.row_number().over(running).alias("running_count"),
        F.max("timestamp").over(running).alias("running_timestamp"),
        F.count(F.lit(1)).over(whole).alias("final_count"),
        F.first(sequence).over(whole).alias("first_sequence"),
    )
    last = F.col("running_count") == F.col("final_count")
    records = F.when(last, F.array(F.struct(*sink), F.struct(*changelog))).otherwise(F.array(F.struct(*sink)))
    return folded.select(F.explode(records).alias("record")).select("record.*")


_WINDOWED_CLASSIFIED_SCHEMA = (
    "partition int, offset long, key binary, timestamp long, status tinyint, starts array<long>, "
    "out_partitions array<int>, stream_time long"
)


def _native_windowed_count_stage(
    classified: DataFrame, windowed: NativeWindowedCount, tasks: int, final: bool
) -> DataFrame:
    """A windowed count sub-topology with Spark's operators (``streamapp.replay.spark.native``): the records its tasks
    write, as ``RECORD_SCHEMA`` rows, from ``classified`` (``native.WINDOWED_CLASSIFIED_SCHEMA`` rows).

    Used when a task's partition is read in several ranges (else ``folds`` does it in the reading worker). Per task
    (the ``partition`` column, one Spark partition each): stream time is the running ``max(timestamp)`` of the
    counted records ordered by offset (the record's own included, null keys excluded: they are dropped before the
    runtime's processor moves its stream time); each record's windows (``starts``, oldest first) are exploded and
    a window with ``start + size <= streamTime - grace`` is dropped as late; the sink record of an accepted
    (record, window) is the ``row_number`` of the record in its ``(task, key, start)`` ordered by offset, with the
    largest timestamp of the window so far, keyed ``key + start``. Records are ordered within the task by ``offset *
    windows_per_record + window index`` (the order the runtime writes them). The changelog record of a window is its
    final count after its largest timestamp (Kafka's window store value), at that timestamp (Kafka's
    ``ChangeLoggingTimestampedWindowBytesStore`` logs a window at its value's timestamp). ``final``
    (``EMIT_FINAL``): of the sink records only each window's last.
    """
    count, size, grace = windowed.count, windowed.windows.size, windowed.windows.grace_ms
    by_task = (
        Window.partitionBy("partition").orderBy("offset").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    one_per_task = classified.where(F.col("status") == COUNTED).repartitionById(tasks, F.col("partition"))
    counted = one_per_task.withColumn("stream_time", F.max("timestamp").over(by_task))  # no further shuffle
    windows = counted.select(
        "partition",
        "offset",
        "key",
        "timestamp",
        "stream_time",
        F.posexplode(F.arrays_zip("starts", "out_partitions")).alias("window_index", "window"),
    ).select(
        "partition",
        "key",
        "timestamp",
        "stream_time",
        (F.col("offset") * windowed.windows_per_record + F.col("window_index")).alias("sequence"),
        F.col("window.starts").alias("start"),
        F.col("window.out_partitions").alias("out_partition"),
    )
    accepted = windows.where(F.col("start") + size > F.col("stream_time") - grace)
    return _fold(
        accepted,
        ["partition", "key", "start"],
        "sequence",
        final,
        sink=_native_record(
            count,
            "sink",
            F.col("out_partition"),
            F.col("sequence"),
            F.concat(F.col("key"), _long_bytes(F.col("start"))),
            _count_bytes(F.col("running_count"), count.sink_value_serde),
            F.col("running_timestamp"),
        ),
        changelog=_native_record(
            count,
            "changelog",
            F.col("partition"),
            F.col("first_sequence"),
            F.concat(F.col("key"), _long_bytes(F.col("start")), F.unhex(F.lit("00000000"))),
            F.concat(
                _long_bytes(F.col("running_timestamp")), _count_bytes(F.col("running_count"), count.store_value_serde)
            ),
            F.col("running_timestamp"),
        ),
    )


def _native_record(
    count: NativeCount,
    kind: str,
    partition: Column,
    offset: Column,
    key: Column,
    value: Column,
    timestamp: Column,
) -> list[Column]:
    """The ``RECORD_SCHEMA`` columns of a native stage's ``kind`` (``sink`` | ``changelog``) record: to the count's
    sink or changelog topic, written by task ``<subtopology>_<the partition column>``, no headers."""
    return [
        F.lit(count.sink_topic if kind == "sink" else count.changelog_topic).alias("topic"),
        partition.alias("partition"),
        offset.alias("offset"),
        key.alias("key"),
        value.alias("value"),
        timestamp.alias("timestamp"),
        F.lit(count.subtopology).alias("producer_sub"),
        F.col("partition").alias("producer_part"),
        F.lit(kind).alias("kind"),
        F.lit(None).cast(_HEADERS_TYPE).alias("headers"),
    ]


def _long_bytes(number: Column) -> Column:
    """A non-negative long as 8 bytes big-endian (window starts, timestamps: Kafka's key and value layouts)."""
    return F.unhex(F.lpad(F.hex(number.cast("long")), 16, "0"))


def _count_bytes(count: Column, serde: str) -> Column:
    """A positive count as the serde writes it: ``json`` = its decimal digits, ``long`` = 8-byte big-endian."""
    if serde == "json":
        return count.cast("string").cast("binary")
    return _long_bytes(count)


class _ProgressTracker:
    """Reports ``ReplayProgress`` from a daemon thread while the replay runs (``streamapp.replay.progress``)."""

    def __init__(
        self,
        spark: SparkSession,
        plan: ReplayPlan,
        on_progress: Callable[[ReplayProgress], None] | None,
        interval_s: float,
    ) -> None:
        self.records = spark.sparkContext.accumulator(0)
        self.phase = "stages"
        self.stages_done = 0
        self._spark = spark
        self._on_progress = on_progress
        self._interval_s = interval_s
        self._stages_total = len(plan.description.subtopologies())
        self._total = sum(
            end - plan.start_offsets[topic][p] for topic, ends in plan.end_offsets.items() for p, end in ends.items()
        )
        self._started = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="replay-progress", daemon=True)

    def __enter__(self) -> _ProgressTracker:
        if self._on_progress is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._on_progress is not None:
            self._thread.join(self._interval_s + 5)
            if exc[0] is None:
                self._on_progress(self.snapshot())

    def snapshot(self) -> ReplayProgress:
        tasks_done = tasks_total = 0
        tracker = self._spark.sparkContext.statusTracker()
        for stage_id in tracker.getActiveStageIds():
            info = tracker.getStageInfo(stage_id)
            if info is not None:
                tasks_done += info.numCompletedTasks
                tasks_total += info.numTasks
        processed = self._total if self.phase != "stages" else min(self._total, int(self.records.value))
        return ReplayProgress(
            self.phase,
            processed,
            self._total,
            self.stages_done,
            self._stages_total,
            tasks_done,
            tasks_total,
            time.monotonic() - self._started,
        )

    def _run(self) -> None:
        assert self._on_progress is not None
        while not self._stop.wait(self._interval_s):
            try:
                self._on_progress(self.snapshot())
            except Exception:  # a report must never fail the replay
                logging.getLogger(__name__).debug("progress report failed", exc_info=True)


_WORKER_CACHE: dict[str, tuple[TopologyDescription, dict[str, dict[str, Callable[..., Any]]]]] = {}
"""Per Python worker: the parsed description and its imported user functions, by document."""


def _worker_topology(document: str) -> tuple[TopologyDescription, dict[str, dict[str, Callable[..., Any]]]]:
    cached = _WORKER_CACHE.get(document)
    if cached is None:
        description = TopologyDescription.from_dict(json.loads(document))
        cached = (description, description.resolve_functions())  # user code, imported by module:attr
        _WORKER_CACHE[document] = cached
    return cached


class _StageFunction:
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
        global_records: list[_GlobalRecord] | None = None,
        *,
        final: bool = False,
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

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        description, functions = _worker_topology(self.document)
        sub = next(s for s in description.subtopologies() if s.id == self.sub_id)
        application_id = str(self.config["application.id"])
        sources = [ref.resolve(application_id) for ref in sub.source_topics]
        streamed = len(sources) == 1 and not sub.source_topics[0].internal
        repartition = frozenset(ref.resolve(application_id) for ref in sub.sink_topics if ref.internal)
        task: ReplayTask | None = None
        buffered: list[dict[str, Any]] = []
        for batch in batches:
            if self.records is not None:
                self.records.add(batch.num_rows)
            records = list(_records_of(batch)) if streamed else []
            for partition, start, end in _runs_by_partition(batch.column("partition").to_pylist()):
                if task is not None and task.partition != partition:
                    yield self._batch(self._finish(task, buffered, streamed), task, repartition)
                    yield self._dropped(task)
                    task, buffered = None, []
                if task is None:
                    task = ReplayTask(
                        description,
                        sub,
                        partition,
                        self.counts,
                        self.config,
                        functions=functions,
                        wall_clock_ms=self.wall_clock_ms,
                        global_records=(ConsumerRecord(*record) for record in self.global_records),
                        final=self.final,
                    )
                if streamed:
                    task.add(sources[0], records[start:end])
                    yield self._batch(task.process(), task, repartition)
                else:
                    buffered.extend(batch.slice(start, end - start).to_pylist())
        if task is not None:
            yield self._batch(self._finish(task, buffered, streamed), task, repartition)
            yield self._dropped(task)

    @staticmethod
    def _finish(task: ReplayTask, buffered: list[dict[str, Any]], streamed: bool) -> list[ConsumerRecord]:
        try:
            written: list[ConsumerRecord] = []
            if not streamed:
                for topic, records in _ordered_inputs(buffered).items():
                    task.add(topic, records)
                written = task.process()
            return written + task.finish()
        finally:
            task.close()

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
            offset=[r.offset for r in records],
            key=[r.key for r in records],
            value=[r.value for r in records],
            timestamp=[r.timestamp for r in records],
            producer_sub=self.sub_id,
            producer_part=task.partition,
            kind=[
                "changelog" if r.topic in changelog else "repartition" if r.topic in repartition else "sink"
                for r in records
            ],
            headers=[[{"key": k, "value": v} for k, v in r.headers] if r.headers else None for r in records],
        )


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


# -- the final write ---------------------------------------------------------------------------------


def _write(
    plan: ReplayPlan,
    outputs: list[DataFrame],
    targets: list[tuple[str, int]],
    result: ReplayResult,
    chunk_records: int,
    client_settings: Mapping[str, str],
) -> None:
    """Write the records of ``outputs`` to ``targets`` (``streamapp.replay.spark.write``) into ``result``."""
    writes = write_outputs(plan, outputs, targets, _written_kinds(plan), chunk_records, client_settings)
    for write in writes:
        result.writes.append(write)
        result.records_written[write.topic] = result.records_written.get(write.topic, 0) + write.records
