"""The test session's SparkSession for the replay (conformance ``SparkEngine`` and ``tests/replay``).

Spark starts in 10-20 s, so one session serves the whole test session: ``local[2]``, 1 GiB driver, two shuffle
partitions. Spark's Python workers import the tests' user functions by ``module:attr``,
so they get this process's ``sys.path`` as ``PYTHONPATH``.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def replay_spark_session() -> Iterator[object]:
    from streamapp.replay import build_session

    paths = [p for p in (*sys.path, os.environ.get("PYTHONPATH", "")) if p and Path(p).is_dir()]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = build_session(
        "local[2]",
        {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2", "spark.log.level": "WARN"},
        app_name="streamapp-replay-tests",
    )
    try:
        yield spark
    finally:
        # SparkContext.stop can hang in its accumulator server's shutdown under load; the JVM ends with this
        # process anyway (its gateway reads our stdin), so the test session does not wait for it forever
        stopping = threading.Thread(target=spark.stop, name="spark-stop", daemon=True)
        stopping.start()
        stopping.join(60)
