"""The replay: a topology run as a PySpark batch job over bounded offset ranges, with the streaming runtime's
results (docs/replay.md). The only package of ``streamapp`` that imports pyspark (extra ``streamapp-runtime[replay]``).

    from streamapp.replay import ReplayPlan, build_session, run_replay

    plan = ReplayPlan(description, {"application.id": "flights-v2"}, "kafka:9092",
                      start_offsets={"flights": {0: 0, 1: 0}}, end_offsets={"flights": {0: 812, 1: 790}},
                      partitions={"departures": 2}, replay_id="flights-v2-1")
    result = run_replay(build_session(), plan)

Only ``engine`` and ``session`` import pyspark; the plan, the task runner (``tasks``), the writer (``output``)
and the node-type tables (``translate`` and the family modules, ADR 0005) are plain Python.
"""

from streamapp.replay.engine import ReplayResult, run_replay
from streamapp.replay.plan import ReplayPlan
from streamapp.replay.session import ConnectorJarsMissingError, build_session, connector_jars
from streamapp.replay.translate import UNSUPPORTED, UnsupportedTopologyError

__all__ = [
    "UNSUPPORTED",
    "ConnectorJarsMissingError",
    "ReplayPlan",
    "ReplayResult",
    "UnsupportedTopologyError",
    "build_session",
    "connector_jars",
    "run_replay",
]
