"""A replay uses more Spark tasks than its topic has partitions (``run_replay``'s ``parallelism``): each partition's
offset range is read in several Spark partitions, and the stages order the records by partition and offset
themselves, so the output is the same record for record as with one read task per partition and as the
runtime's task path."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from streamapp.dsl.windows import TimeWindows
from streamapp.replay.shapes import PATH_NATIVE_WINDOWED_COUNT, PATH_TASK

from replay import test_native_windowed_count as windowed
from replay.native_paths import replay_both_paths

pytestmark = pytest.mark.integration

PARTITIONS = 2


def read_tasks(spark: Any, run: Any) -> list[int]:
    """Run ``run()`` in a job group of its own and return, per replay it made, the tasks of its first stage: the
    first job of a replay runs its first sub-topology, whose first stage reads the Kafka topic."""
    group = f"parallelism-{uuid.uuid4().hex[:8]}"
    context = spark.sparkContext
    context.setJobGroup(group, "test_parallelism")
    try:
        run()
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    tracker = context.statusTracker()
    jobs = sorted(tracker.getJobIdsForGroup(group))
    first_stages = [min(tracker.getJobInfo(job).stageIds) for job in jobs]
    return [tracker.getStageInfo(stage).numTasks for stage in sorted(set(first_stages))]


def inputs() -> Iterator[tuple[int, bytes | None, bytes | None, int]]:
    """The windowed count's records (late ones, null keys, JSON nulls) on ``PARTITIONS`` partitions."""
    for i, (_, key, value, timestamp) in enumerate(windowed.inputs()):
        yield i % PARTITIONS, key, value, timestamp


def test_a_two_partition_topic_is_replayed_in_more_than_two_read_tasks_with_the_same_output(
    spark_session: Any, conformance_bootstrap: str
) -> None:
    records = list(inputs())
    windows = TimeWindows.of_size_and_grace(windowed.SIZE_MS, windowed.GRACE_MS).advance_by(4_000)
    runs: dict[int, dict[str, Any]] = {}
    tasks: dict[int, list[int]] = {}

    def replay(parallelism: int) -> None:
        runs[parallelism] = replay_both_paths(
            conformance_bootstrap,
            spark_session,
            records,
            {},
            windowed.windowed_count(windows),
            windowed.STORE,
            input_partitions=PARTITIONS,
            parallelism=parallelism,
        )

    for parallelism in (PARTITIONS, 4):
        tasks[parallelism] = read_tasks(spark_session, lambda p=parallelism: replay(p))
    assert tasks[PARTITIONS] and set(tasks[PARTITIONS]) == {PARTITIONS}, tasks
    assert tasks[4] and min(tasks[4]) > PARTITIONS, tasks
    split, whole = runs[4], runs[PARTITIONS]
    assert set(split["native"]["result"].paths.values()) == {PATH_NATIVE_WINDOWED_COUNT}
    assert set(split["task"]["result"].paths.values()) == {PATH_TASK}
    for path in ("native", "task"):
        assert split[path]["sink"] == whole[path]["sink"]
        assert split[path]["changelog"] == whole[path]["changelog"]
        assert split[path]["result"].dropped_records == whole[path]["result"].dropped_records
    assert split["native"]["sink"] == split["task"]["sink"]
    assert split["native"]["changelog"] == split["task"]["changelog"]
    assert split["native"]["sink"] and split["native"]["result"].dropped_records.get("late")
