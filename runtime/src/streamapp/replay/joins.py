"""The ``joins`` family on the replay: stream-table, table-table and stream-stream joins run in the task through
the runtime's processors; both sides of a task are interleaved by the runtime's ``PartitionGroup`` rule
(smallest head timestamp first). A join with a global table is not supported (see ``streamapp.replay.io``)."""

from streamapp.replay.base import FamilyTranslations
from streamapp.topology.nodes.joins import (
    StreamGlobalJoinNode,
    StreamStreamJoinNode,
    StreamTableJoinNode,
    TableTableJoinNode,
)

TRANSLATIONS = (
    FamilyTranslations("joins")
    .in_task(StreamTableJoinNode, TableTableJoinNode, StreamStreamJoinNode)
    .unsupported(StreamGlobalJoinNode, "joins a global table, which the replay does not support yet")
)
