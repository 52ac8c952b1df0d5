"""The replay's SparkSession retries a failed task under a local master as a cluster master does (Spark's
``spark.task.maxFailures`` default of 4), so one transient Kafka read error does not fail the replay; its Python
workers run the driver's interpreter unless the conf or the environment names another."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest
from streamapp.replay.spark.session import LOCAL_TASK_ATTEMPTS, with_task_retries, worker_python

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


@pytest.mark.parametrize(
    ("conf", "environ", "expected"),
    [
        ({}, {}, sys.executable),
        ({}, {"PYSPARK_PYTHON": "/opt/python"}, "/opt/python"),
        ({"spark.pyspark.python": "/conf/python"}, {"PYSPARK_PYTHON": "/opt/python"}, "/conf/python"),
        ({}, {"PYSPARK_PYTHON": ""}, sys.executable),
    ],
)
def test_spark_workers_run_the_drivers_interpreter_unless_the_conf_or_pyspark_python_names_one(
    conf: dict[str, str], environ: dict[str, str], expected: str
) -> None:
    assert worker_python(conf, environ) == expected


def _fail_first_attempt(rows: Iterator[int]) -> Iterator[int]:
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is not None and context.attemptNumber() == 0:
        raise RuntimeError("a transient failure of the first attempt")
    yield from rows


def test_a_task_that_fails_once_is_retried_and_the_job_succeeds(spark_session: Any) -> None:
    rdd = spark_session.sparkContext.parallelize(range(8), 2).mapPartitions(_fail_first_attempt)
    assert sorted(rdd.collect()) == list(range(8))
