"""The replay on Spark: a topology's sub-topologies as stages of one batch job over bounded offset ranges.

For each stage in dependency order (``streamapp.replay.stages``: each sub-topology once, a foreign-key join's left
sub-topology twice):

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
runs natively instead of step 2 (``native_stage``: the reading worker classifies each batch with the runtime's
serdes and, when it reads a whole partition, folds the counts itself, ``spark.folds``; else Spark's window
functions fold), with the same records out; a record that needs the runtime's handlers discards
that attempt and the sub-topology runs through the tasks.

The final write (``streamapp.replay.spark.write``) sorts each output partition's records into the canonical order
(the head-timestamp merge of the tasks' sequences, as a Spark sort) and streams them into one transactional
writer per output partition, effectively once (``streamapp.replay.output``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streamapp.replay.drops import DROPPED_KIND, add_counts
from streamapp.replay.output import WriteResult
from streamapp.replay.plan import EMIT_FINAL, ReplayPlan
from streamapp.replay.progress import ReplayProgress, log_progress
from streamapp.replay.security import client_settings
from streamapp.replay.shapes import PATH_TASK
from streamapp.replay.spark.native_stage import NativeRead, native_drops, native_stage
from streamapp.replay.spark.progress_tracker import ProgressTracker
from streamapp.replay.spark.records import RECORD_SCHEMA
from streamapp.replay.spark.source import splits
from streamapp.replay.spark.summary import StageSummary, summarize, window_retentions, without_expired_windows
from streamapp.replay.spark.task_stage import CHANGELOG_KIND, StageFunction
from streamapp.replay.spark.topic_reads import global_records, read_topic
from streamapp.replay.spark.write import write_outputs
from streamapp.replay.stages import replay_stages

__all__ = ["JOB_DESCRIPTION_PREFIX", "RECORD_SCHEMA", "ReplayResult", "replay_parallelism", "run_replay"]

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
    by the end (``without_expired_windows``): a new version restores the same windows from fewer records (the
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
    tracker = ProgressTracker(spark, plan, on_progress, progress_interval_s)
    context = spark.sparkContext
    cached: list[DataFrame] = []
    cores = parallelism or replay_parallelism(spark)
    with tracker, _shuffle_partitions(spark, 2 * cores):
        started = time.monotonic()
        retentions = window_retentions(plan) if expire_windows else {}
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
    tracker: ProgressTracker,
    cached: list[DataFrame],
    cores: int,
    retentions: Mapping[str, int],
) -> tuple[list[DataFrame], list[tuple[str, int]]]:
    """The stages' outputs in stage order (without their drop rows, ``streamapp.replay.drops``; the persisted
    frames they filter are appended to ``cached``) and the output partitions they write to (``_write``'s
    writers), sorted. ``settings``: the reads' librdkafka settings. ``cores``: the tasks Spark runs at once
    (``read_topic``'s splits); ``retentions``: the window stores whose expired windows are left out of the
    changelogs (``window_retentions``; empty: none)."""
    application_id = plan.application_id
    counts = plan.topic_partitions()
    document = plan.description.to_json(indent=None)
    outputs: list[DataFrame] = []
    repartitioned: dict[str, DataFrame] = {}
    global_table_records = global_records(spark, plan, settings)
    written_kinds = _written_kinds(plan)
    targets: set[tuple[str, int]] = set()
    first_runs: dict[int, DataFrame] = {}
    for replay_stage in replay_stages(plan.description, application_id):
        sub = replay_stage.subtopology
        # Spark's jobs say what they run (event log, status tracker): "streamapp-replay stage <id>" / "... write"
        spark.sparkContext.setJobDescription(f"{JOB_DESCRIPTION_PREFIX} stage {sub.id}")
        parts: list[DataFrame] = []
        for ref in replay_stage.sources:
            topic = ref.resolve(application_id)
            if ref.internal:
                parts.append(repartitioned[topic])
            else:
                parts.append(read_topic(spark, plan, topic, settings, min_partitions=cores))
        if replay_stage.resumes:  # the first run's changelog records: the tasks restore their stores from them
            parts.append(first_runs[sub.id].where(F.col("kind") == CHANGELOG_KIND))
        stage_input = parts[0]
        for part in parts[1:]:
            stage_input = stage_input.unionByName(part)
        tasks = max(counts.get(ref.resolve(application_id), 1) for ref in sub.source_topics)
        final = plan.emit == EMIT_FINAL
        native = None
        if native_ok and len(sub.source_topics) == 1 and not sub.source_topics[0].internal:
            topic = sub.source_topics[0].resolve(application_id)
            read = NativeRead(spark, splits(topic, plan.start_offsets[topic], plan.end_offsets[topic], cores), settings)
            native = native_stage(spark, plan, sub, read, tasks, tracker.records, final)
        stage: DataFrame | None = None
        summary: StageSummary | None = None
        if native is not None:
            stage = native.frame.persist(StorageLevel.MEMORY_AND_DISK)
            summary = summarize(stage, retentions)  # runs the stage now: its time is the stage's, not the write's
            if native.fallbacks.value:  # a record needs the runtime's handlers: nothing of the attempt is kept
                stage.unpersist()
                stage = None
            else:
                result.paths[sub.id] = native.path
                add_counts(result.dropped_records, native_drops(native, stage))
        if stage is None:
            result.paths[sub.id] = PATH_TASK
            task = StageFunction(
                document,
                sub.id,
                dict(counts),
                dict(plan.config),
                plan.wall_clock_ms,
                tracker.records,
                global_table_records,
                final=final,
                resumes=replay_stage.resumes,
            )
            stage = (
                # one Spark partition per task (the task's partition number is the Spark partition's id): hashing
                # the number, as repartition() does, put 3 of 4 tasks into one Spark partition and left a core idle
                stage_input.repartitionById(tasks, F.col("partition").cast("int"))
                .sortWithinPartitions("partition", "topic", "producer_sub", "producer_part", "offset")
                .mapInArrow(task, RECORD_SCHEMA)
            )
            stage = stage.persist(StorageLevel.MEMORY_AND_DISK)
            summary = summarize(stage, retentions)
        assert summary is not None
        cached.append(stage)
        stage = stage.where(F.col("kind") != DROPPED_KIND)
        if not replay_stage.resumes:
            first_runs[sub.id] = stage
        add_counts(result.dropped_records, summary.dropped)
        result.records_written_by_stage[sub.id] = result.records_written_by_stage.get(sub.id, 0) + summary.records
        targets.update(t for kind, t in summary.partitions if kind in written_kinds)
        tracker.stages_done += 1
        outputs.append(without_expired_windows(stage, summary.window_horizons))
        for topic in replay_stage.writes:
            written = stage.where(F.col("topic") == topic)
            repartitioned[topic] = repartitioned[topic].unionByName(written) if topic in repartitioned else written
    for ref_topic in plan.description.external_source_topics():
        ranges = zip(plan.start_offsets[ref_topic].items(), plan.end_offsets[ref_topic].values(), strict=True)
        result.records_read[ref_topic] = sum(end - start for (_, start), end in ranges)
    return outputs, sorted(targets)


def _written_kinds(plan: ReplayPlan) -> list[str]:
    """The kinds of records the final write writes."""
    return ["sink", "changelog", *(["repartition"] if plan.write_repartition_topics else [])]


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
