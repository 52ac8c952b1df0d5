"""The ``joins`` family on the replay: stream-table, table-table and stream-stream joins run in the task through
the runtime's processors; both sides of a task are interleaved by the runtime's ``PartitionGroup`` rule
(smallest head timestamp first). A stream-global join reads the task's global store, bootstrapped from the whole
global topic before the task's first record (``streamapp.replay.io``)."""

from streamapp.replay.base import FamilyTranslations
from streamapp.topology.nodes.joins import (
    StreamGlobalJoinNode,
    StreamStreamJoinNode,
    StreamTableJoinNode,
    TableTableJoinNode,
)

TRANSLATIONS = FamilyTranslations("joins").in_task(
    StreamTableJoinNode, TableTableJoinNode, StreamStreamJoinNode, StreamGlobalJoinNode
)
