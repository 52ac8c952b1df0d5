"""The ``windowed`` family on the replay: windowed count/reduce/aggregate and suppress run in the task through the
runtime's processors, with the task's stream time, grace and late-drop rule exactly as in the runtime (the task
processes its records in the runtime's order, docs/replay.md). Windows still open at the end stay in the stores
and reach the new version through the changelog. A windowed count of a source topic over tumbling or hopping
windows runs as Spark operators instead when its bytes allow (``streamapp.replay.spark.native``), with the same records
out; a record that needs the runtime's handlers sends it back to the task."""

from streamapp.replay.base import FamilyTranslations
from streamapp.topology.nodes.windowed import SuppressNode, WindowedAggregateNode, WindowedCountNode, WindowedReduceNode

TRANSLATIONS = FamilyTranslations("windowed").in_task(
    WindowedCountNode, WindowedReduceNode, WindowedAggregateNode, SuppressNode
)
