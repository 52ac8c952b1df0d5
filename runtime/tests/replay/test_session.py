"""The replay's SparkSession retries a failed task under a local master as a cluster master does (Spark's
``spark.task.maxFailures`` default of 4), so one transient Kafka read error does not fail the replay."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from streamapp.replay.session import LOCAL_TASK_ATTEMPTS, with_task_retries

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    ("master", "expected"),
    [
        ("local", f"local[1,{LOCAL_TASK_ATTEMPTS}]"),
        ("local[2]", f"local[2,{LOCAL_TASK_ATTEMPTS}]"),
        ("local[*]", f"local[*,{LOCAL_TASK_ATTEMPTS}]"),
        ("local[2,1]", "local[2,1]"),
        ("k8s://https://10.0.0.1:443", "k8s://https://10.0.0.1:443"),
        ("local-cluster[2,1,1024]", "local-cluster[2,1,1024]"),
    ],
)
def test_a_local_master_gets_the_task_attempts_of_a_cluster(master: str, expected: str) -> None:
    assert with_task_retries(master) == expected


def _fail_first_attempt(rows: Iterator[int]) -> Iterator[int]:
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is not None and context.attemptNumber() == 0:
        raise RuntimeError("a transient failure of the first attempt")
    yield from rows


def test_a_task_that_fails_once_is_retried_and_the_job_succeeds(spark_session: Any) -> None:
    rdd = spark_session.sparkContext.parallelize(range(8), 2).mapPartitions(_fail_first_attempt)
    assert sorted(rdd.collect()) == list(range(8))
