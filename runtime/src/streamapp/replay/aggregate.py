"""The ``aggregate`` family on the replay: group_by (re-keying into a repartition topic, which is a Spark shuffle
between stages), count, reduce and aggregate run in the task through the runtime's processors, so every update
is emitted as the runtime emits it and the final store contents become changelog records."""

from streamapp.replay.base import FamilyTranslations
from streamapp.topology.nodes.aggregate import AggregateNode, CountNode, GroupByNode, ReduceNode

TRANSLATIONS = FamilyTranslations("aggregate").in_task(GroupByNode, CountNode, ReduceNode, AggregateNode)
