"""The replay's SparkSession: pyspark's own jars only (the replay reads and writes Kafka in its Python workers with
the runtime's client, ``streamapp.kafka``: no Spark Kafka connector), defaults for a short local batch job."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping

from pyspark.sql import SparkSession

__all__ = ["LOCAL_TASK_ATTEMPTS", "build_session", "with_task_retries", "worker_python"]

DEFAULT_CONF: dict[str, str] = {
    # no spark.sql.shuffle.partitions: a replay sizes its shuffles from the cores (engine.run_replay's parallelism)
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.speculation": "false",  # a speculative copy of a writer task would only be fenced, but costs a producer
    "spark.sql.execution.arrow.maxRecordsPerBatch": "10000",
    # A replay is a short batch job on few cores (local[2] by default): the shuffle files and the cached stage
    # outputs stay on this machine, so compressing them costs CPU and saves nothing worth it, and the throughput
    # collector spends less CPU beside the tasks than G1's concurrent threads (docs/benchmarks.md, the replay).
    "spark.shuffle.compress": "false",
    "spark.shuffle.spill.compress": "false",
    "spark.sql.inMemoryColumnarStorage.compressed": "false",
    "spark.driver.extraJavaOptions": "-XX:+UseParallelGC",
}


LOCAL_TASK_ATTEMPTS = 4
"""Attempts of a task under a local master: Spark's ``spark.task.maxFailures`` default, which a cluster master
applies and ``local[N]`` does not (one failed task fails the job there). A failed task is retried as a whole:
its Kafka reads start again with a fresh consumer (after a transient error such as a fresh topic's partitions
answering ``OFFSET_OUT_OF_RANGE`` under load) and its transactional writers fence the failed attempt (ADR 0006)."""

_LOCAL_MASTER = re.compile(r"local(?:\[(?P<threads>[^,\]]+)\])?")


def with_task_retries(master: str) -> str:
    """``master`` with ``LOCAL_TASK_ATTEMPTS`` task attempts when it is ``local`` or ``local[N]`` (``local[N,F]``,
    ``local-cluster`` and cluster masters are returned as given: they say their own)."""
    match = _LOCAL_MASTER.fullmatch(master)
    if match is None:
        return master
    return f"local[{match.group('threads') or 1},{LOCAL_TASK_ATTEMPTS}]"


def build_session(
    master: str = "local[2]",
    conf: Mapping[str, str] | None = None,
    *,
    app_name: str = "streamapp-replay",
    driver_memory: str = "1g",
) -> SparkSession:
    """A SparkSession with ``DEFAULT_CONF``; a local ``master`` retries a failed task like a cluster does
    (``with_task_retries``); its Python workers run ``worker_python(conf)``.

    ``getOrCreate`` semantics: a session already running in this process is returned (its memory and workers'
    Python cannot change any more).
    """
    builder = SparkSession.builder.master(with_task_retries(master)).appName(app_name)
    settings = {**DEFAULT_CONF, "spark.driver.memory": driver_memory, **(conf or {})}
    # pyspark takes the workers' interpreter from the environment only (SparkContext.pythonExec)
    os.environ["PYSPARK_PYTHON"] = worker_python(settings, os.environ)
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def worker_python(conf: Mapping[str, str], environ: Mapping[str, str]) -> str:
    """The interpreter of Spark's Python workers: ``spark.pyspark.python`` of ``conf`` if set, else
    ``PYSPARK_PYTHON``, else the one running this process (``sys.executable``), so that the workers import the
    same installation of ``streamapp`` as the driver (a virtualenv included). Spark's own default, ``python3`` on
    the ``PATH``, is another installation wherever the replay runs from a virtualenv (``ModuleNotFoundError: No
    module named 'streamapp'`` in every worker). The conf before the variable is Spark's order (``spark-submit``'s
    ``PythonRunner``); a session started from Python reads only the variable, which ``build_session`` sets."""
    return conf.get("spark.pyspark.python") or environ.get("PYSPARK_PYTHON") or sys.executable
