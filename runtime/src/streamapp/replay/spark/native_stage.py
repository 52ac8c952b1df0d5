"""A sub-topology of a shape ``streamapp.replay.shapes`` recognises, as Spark operators: the keyed count
(``spark.count``) or the windowed count (``spark.windowed_count``), classified in the reading worker
(``spark.native``) and, when each read task reads a whole partition, folded there too (``spark.folds``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streamapp.drop_reasons import LATE
from streamapp.replay.drops import DropCounts
from streamapp.replay.plan import ReplayPlan
from streamapp.replay.shapes import PATH_NATIVE_COUNT, PATH_NATIVE_WINDOWED_COUNT, native_count, native_windowed_count
from streamapp.replay.spark.count import CLASSIFIED_SCHEMA, count_stage
from streamapp.replay.spark.folds import FoldedCount
from streamapp.replay.spark.native import WINDOW_PAIRS, BatchClassifier, WindowedBatchClassifier
from streamapp.replay.spark.records import RECORD_SCHEMA
from streamapp.replay.spark.source import Split, read_frame
from streamapp.replay.spark.windowed_count import WINDOWED_CLASSIFIED_SCHEMA, windowed_count_stage
from streamapp.topology import Subtopology

__all__ = ["NativeRead", "NativeStage", "native_drops", "native_stage", "window_counts_sum"]


@dataclass(frozen=True)
class NativeStage:
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


def native_drops(native: NativeStage, stage: DataFrame) -> dict[str, int]:
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


def native_stage(
    spark: SparkSession,
    plan: ReplayPlan,
    sub: Subtopology,
    read: NativeRead,
    tasks: int,
    records: Any,
    final: bool,
) -> NativeStage | None:
    """The sub-topology as Spark operators, or ``None`` when its shape has no native translation."""
    counts = plan.topic_partitions()
    fallbacks = spark.sparkContext.accumulator(0)
    counts_param: Any = DropCounts()  # an AccumulatorParam by its two methods (replay.drops: no pyspark import)
    drops: Any = spark.sparkContext.accumulator({}, counts_param)
    count = native_count(plan.description, sub, plan.config)
    if count is not None:
        classifier: Any = BatchClassifier(count, counts[count.sink_topic], records, fallbacks, drops)
        if read.whole_partitions:  # one pass per task: classified and folded in the reading worker
            return NativeStage(
                read.classified(FoldedCount(classifier, final), RECORD_SCHEMA), PATH_NATIVE_COUNT, fallbacks, drops
            )
        frame = count_stage(read.classified(classifier, CLASSIFIED_SCHEMA), count, final)
        return NativeStage(frame, PATH_NATIVE_COUNT, fallbacks, drops)
    windowed = native_windowed_count(plan.description, sub, plan.config)
    if windowed is not None:
        classifier = WindowedBatchClassifier(windowed, counts[windowed.count.sink_topic], records, fallbacks, drops)
        changelog = (windowed.count.changelog_topic, windowed.count.store_value_serde)
        if read.whole_partitions:  # one pass per task: classified and folded in the reading worker
            frame = read.classified(FoldedCount(classifier, final), RECORD_SCHEMA)
            return NativeStage(frame, PATH_NATIVE_WINDOWED_COUNT, fallbacks, drops, changelog)
        classified = read.classified(classifier, WINDOWED_CLASSIFIED_SCHEMA)
        frame = windowed_count_stage(classified, windowed, tasks, final)
        return NativeStage(frame, PATH_NATIVE_WINDOWED_COUNT, fallbacks, drops, changelog)
    return None
