"""The replay: a topology run as a PySpark batch job over bounded offset ranges, with the streaming runtime's
results (docs/replay.md). The only package of ``streamapp`` that imports pyspark (extra ``streamapp-runtime[replay]``).

    from streamapp.replay import ReplayPlan, build_session, run_replay

    plan = ReplayPlan(description, {"application.id": "flights-v2"}, "kafka:9092",
                      start_offsets={"flights": {0: 0, 1: 0}}, end_offsets={"flights": {0: 812, 1: 790}},
                      partitions={"departures": 2}, replay_id="flights-v2-1")
    result = run_replay(build_session(), plan)

Only the ``spark`` folder imports pyspark, pyarrow and numpy (import-linter contract ``pyspark-fenced``): the stage
order (``spark.engine``), each stage kind and family (``spark.native_stage``, ``spark.task_stage``,
``spark.count``, ``spark.windowed_count``), the session, the reads, the native counts' classifiers and folds, and the
write; this package imports them on first use of their names. The plan and its checks (``check_topology``), the
stages (``stages``: which sub-topology runs when, a foreign-key join's left one twice), the shapes, the task runner
(``tasks``), the transactional writer (``output``) and the node-type tables (``translate`` and the family modules,
ADR 0005) are plain Python: the operator uses them without the replay extra.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from streamapp.replay.plan import ReplayPlan, check_topology
from streamapp.replay.translate import UNSUPPORTED, UnsupportedTopologyError

if TYPE_CHECKING:
    from streamapp.replay.spark.engine import ReplayResult, run_replay
    from streamapp.replay.spark.session import build_session

#: Names whose modules import pyspark, imported on first use (PEP 562), so that checking a plan or a topology
#: (the operator does, before it launches a Job) needs no pyspark.
_SPARK_NAMES = {
    "ReplayResult": "streamapp.replay.spark.engine",
    "run_replay": "streamapp.replay.spark.engine",
    "build_session": "streamapp.replay.spark.session",
}


def __getattr__(name: str) -> Any:
    module = _SPARK_NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'streamapp.replay' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "UNSUPPORTED",
    "ReplayPlan",
    "ReplayResult",
    "UnsupportedTopologyError",
    "build_session",
    "check_topology",
    "run_replay",
]
