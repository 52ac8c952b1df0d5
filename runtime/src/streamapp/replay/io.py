"""The ``io`` family on the replay: sources read from Kafka by Spark (explicit offset ranges, ``read_committed``),
sinks and repartition nodes run in the task (the runtime's serializers and murmur2 partitioner decide bytes and
partition; ``streamapp.replay.engine`` writes them). Global tables are not supported yet: the runtime reads them
whole in every worker, outside the tasks, and the replay has no global store."""

from streamapp.replay.base import FamilyTranslations
from streamapp.topology.nodes.io import GlobalTableNode, RepartitionNode, SinkNode, SourceNode, TableSourceNode

TRANSLATIONS = (
    FamilyTranslations("io")
    .in_task(SourceNode, TableSourceNode, SinkNode, RepartitionNode)
    .unsupported(GlobalTableNode, "global tables are read whole outside the tasks; the replay has no global store yet")
)
