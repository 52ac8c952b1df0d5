"""A topic's records in the plan's offset ranges as a Spark frame of ``RECORD_SCHEMA`` rows, and the global tables'
records every task bootstraps (read through ``spark.source``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from streamapp.replay.plan import ReplayPlan
from streamapp.replay.spark.records import RECORD_SCHEMA
from streamapp.replay.spark.source import read_frame, splits
from streamapp.topology import GlobalTableNode

__all__ = ["GlobalRecord", "global_records", "read_topic"]

GlobalRecord = tuple[str, int, int, bytes | None, bytes | None, int]
"""``(topic, partition, offset, key, value, timestamp)`` of a global table's topic."""


def global_records(spark: SparkSession, plan: ReplayPlan, settings: Mapping[str, Any]) -> list[GlobalRecord]:
    """Every record of the global tables' topics in the plan's ranges, in offset order per partition: what the
    runtime's global consumer bootstraps before any task runs. Collected to the driver and shipped with each
    stage's function (a global table is read whole by every task, as by every stream thread)."""
    records: list[GlobalRecord] = []
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
