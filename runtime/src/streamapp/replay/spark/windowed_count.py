"""The windowed count family's Spark stage (``streamapp.replay.shapes.NativeWindowedCount``), when a task's
partition is read in several ranges."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from streamapp.replay.shapes import NativeWindowedCount
from streamapp.replay.spark.native import COUNTED
from streamapp.replay.spark.spark_fold import count_bytes, fold, long_bytes, native_record

__all__ = ["WINDOWED_CLASSIFIED_SCHEMA", "windowed_count_stage"]

WINDOWED_CLASSIFIED_SCHEMA = (
    "partition int, offset long, key binary, timestamp long, status tinyint, starts array<long>, "
    "out_partitions array<int>, stream_time long"
)


def windowed_count_stage(classified: DataFrame, windowed: NativeWindowedCount, tasks: int, final: bool) -> DataFrame:
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
    return fold(
        accepted,
        ["partition", "key", "start"],
        "sequence",
        final,
        sink=native_record(
            count,
            "sink",
            F.col("out_partition"),
            F.col("sequence"),
            F.concat(F.col("key"), long_bytes(F.col("start"))),
            count_bytes(F.col("running_count"), count.sink_value_serde),
            F.col("running_timestamp"),
        ),
        changelog=native_record(
            count,
            "changelog",
            F.col("partition"),
            F.col("first_sequence"),
            F.concat(F.col("key"), long_bytes(F.col("start")), F.unhex(F.lit("00000000"))),
            F.concat(
                long_bytes(F.col("running_timestamp")), count_bytes(F.col("running_count"), count.store_value_serde)
            ),
            F.col("running_timestamp"),
        ),
    )
