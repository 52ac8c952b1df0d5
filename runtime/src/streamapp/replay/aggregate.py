"""The ``aggregate`` family on the replay: group_by (re-keying into a repartition topic, which is a Spark shuffle
between stages), count, reduce, aggregate and cogroup (``cogroup_aggregate``, ``cogroup_merge``) run in the task
through the runtime's processors, so every update is emitted as the runtime emits it and the final store contents
become changelog records."""

from streamapp.replay.base import FamilyTranslations
from streamapp.topology.nodes import aggregate as nodes

TRANSLATIONS = FamilyTranslations("aggregate").in_task(
    nodes.GroupByNode,
    nodes.CountNode,
    nodes.ReduceNode,
    nodes.AggregateNode,
    nodes.CogroupAggregateNode,
    nodes.CogroupMergeNode,
)
