"""Records a replay dropped, by reason (``streamapp.drop_reasons``), so that its result compares with the streaming
run's ``status.droppedRecords`` reason by reason.

How each stage counts them:

- the runtime's task path (``spark.task_stage.StageFunction``): each task's ``ProcessorMetrics.dropped`` (the same
  processors as the streaming run) as *drop rows* in the stage's output, one per task and reason: ``kind`` =
  ``DROPPED_KIND``, ``topic`` = the reason, ``offset`` = the records. They travel with the stage's persisted output,
  so a Spark task retried or recomputed never counts twice; ``spark.summary.summarize`` sums them (in the job that
  counts the stage's records) and the stage's output is used without them;
- the native classifiers: the records they drop (null key or value) are counted in a Spark accumulator
  (``DropCounts``), kept only when the native stage is (a stage that falls back to the task path counts there);
- the native windowed count: a (record, window) pair behind the close time is dropped as ``late`` in Spark SQL;
  its classifier counts every pair of the counted records into the same accumulator, and the late ones are those
  the stage's changelog does not count (``spark.native_stage.window_counts_sum``: each window's final count), so no
  second pass over the input is needed. (A Spark task retried after it ran counts its accumulator updates again: rare.)

Plain Python: pyspark is imported by ``streamapp.replay.spark``'s modules only (the import fence), so the
frame-reading halves (``summarize``, ``window_counts_sum``) live in ``streamapp.replay.spark``.
"""

from __future__ import annotations

__all__ = ["DROPPED_KIND", "DropCounts", "add_counts"]

DROPPED_KIND = "dropped"
"""The ``kind`` of a drop row in a stage's ``RECORD_SCHEMA`` output."""


def add_counts(into: dict[str, int], counts: dict[str, int]) -> dict[str, int]:
    """``into`` with ``counts`` added per reason (returned for chaining)."""
    for reason, records in counts.items():
        into[reason] = into.get(reason, 0) + records
    return into


class DropCounts:
    """The ``AccumulatorParam`` of a Spark accumulator of ``{reason: records}``
    (``sparkContext.accumulator({}, DropCounts())``; Spark needs only these two methods)."""

    def zero(self, value: dict[str, int]) -> dict[str, int]:
        return {}

    def addInPlace(self, value1: dict[str, int], value2: dict[str, int]) -> dict[str, int]:
        return add_counts(value1, value2)
