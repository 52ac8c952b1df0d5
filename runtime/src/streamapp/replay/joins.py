"""The ``joins`` family on the replay: stream-table, table-table and stream-stream joins run in the task through
the runtime's processors; both sides of a task are interleaved by the runtime's ``PartitionGroup`` rule
(smallest head timestamp first). A stream-global join reads the task's global store, bootstrapped from the whole
global topic before the task's first record (``streamapp.replay.io``). The foreign-key join's nodes (KIP-213) run
in the task too; its two sub-topologies feed each other (subscription and response topics), so the left table's
runs twice, before and after the right table's (``streamapp.replay.stages``)."""

from streamapp.replay.base import FamilyTranslations
from streamapp.topology.nodes.joins import (
    FkResponseJoinNode,
    FkSubscriptionJoinNode,
    FkSubscriptionSendNode,
    StreamGlobalJoinNode,
    StreamStreamJoinNode,
    StreamTableJoinNode,
    TableTableJoinNode,
)

TRANSLATIONS = (
    FamilyTranslations("joins")
    .in_task(StreamTableJoinNode, TableTableJoinNode, StreamStreamJoinNode, StreamGlobalJoinNode)
    .in_task(FkSubscriptionSendNode, FkSubscriptionJoinNode, FkResponseJoinNode)
)
