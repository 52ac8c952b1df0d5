"""The ``io`` family on the replay: sources read from Kafka by Spark (explicit offset ranges, ``read_committed``),
tables of streams (``to_table``), sinks and repartition nodes run in the task (the runtime's serializers and murmur2
partitioner decide bytes and partition; ``streamapp.replay.spark.engine`` writes them). A global table's topic is
read whole (up to the plan's end offsets) and bootstrapped into in-memory global stores of every task before its
first record, as the runtime's global consumer does before its tasks start.
"""

from streamapp.replay.base import FamilyTranslations
from streamapp.topology.nodes import io as nodes

TRANSLATIONS = FamilyTranslations("io").in_task(
    nodes.SourceNode,
    nodes.TableSourceNode,
    nodes.ToTableNode,
    nodes.SinkNode,
    nodes.RepartitionNode,
    nodes.GlobalTableNode,
)
