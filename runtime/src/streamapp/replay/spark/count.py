"""The keyed count family's Spark stage (``streamapp.replay.shapes.NativeCount``), when a task's partition is read
in several ranges."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streamapp.replay.shapes import NativeCount
from streamapp.replay.spark.native import COUNTED
from streamapp.replay.spark.spark_fold import count_bytes, fold, native_record

__all__ = ["CLASSIFIED_SCHEMA", "count_stage"]

CLASSIFIED_SCHEMA = "partition int, offset long, key binary, timestamp long, status tinyint, out_partition int"


def count_stage(classified: DataFrame, count: NativeCount, final: bool) -> DataFrame:
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
    return fold(
        counted,
        ["partition", "key"],
        "offset",
        final,
        sink=native_record(
            count,
            "sink",
            F.col("out_partition"),
            F.col("offset"),
            F.col("key"),
            count_bytes(F.col("running_count"), count.sink_value_serde),
            F.col("running_timestamp"),
        ),
        changelog=native_record(
            count,
            "changelog",
            F.col("partition"),
            F.col("first_sequence"),
            F.col("key"),
            count_bytes(F.col("running_count"), count.store_value_serde),
            F.col("running_timestamp"),
        ),
    )
