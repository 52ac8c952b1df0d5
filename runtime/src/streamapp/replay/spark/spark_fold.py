"""The Spark columns of the native counts (``spark.count``, ``spark.windowed_count``): the running count of a
group as one Spark window (or, for ``emit: final``, one ``groupBy``), and the records it becomes, in Kafka's layouts.
Used when a task's partition is read in several ranges; a whole partition is folded in the reading worker
(``spark.folds``)."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from streamapp.replay.shapes import NativeCount
from streamapp.replay.spark.records import HEADERS_DDL

__all__ = ["count_bytes", "fold", "long_bytes", "native_record"]


def fold(
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


def native_record(
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
        F.lit(None).cast(HEADERS_DDL).alias("headers"),
    ]


def long_bytes(number: Column) -> Column:
    """A non-negative long as 8 bytes big-endian (window starts, timestamps: Kafka's key and value layouts)."""
    return F.unhex(F.lpad(F.hex(number.cast("long")), 16, "0"))


def count_bytes(count: Column, serde: str) -> Column:
    """A positive count as the serde writes it: ``json`` = its decimal digits, ``long`` = 8-byte big-endian."""
    if serde == "json":
        return count.cast("string").cast("binary")
    return long_bytes(count)
