"""The ``joins`` family on the replay: stream-table, table-table and stream-stream joins run in the task through
the runtime's processors; both sides of a task are interleaved by the runtime's ``PartitionGroup`` rule
(smallest head timestamp first). A stream-global join reads the task's global store, bootstrapped from the whole
global topic before the task's first record (``streamapp.replay.io``). The foreign-key join (KIP-213) is refused:
its sub-topologies feed each other in a cycle (subscription topic, response topic), which the replay's stage order
cannot run (``FK_JOIN_REASON``)."""

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

FK_JOIN_REASON = (
    "a foreign-key table-table join (KIP-213) runs as a cycle between the left and the right table's sub-topologies "
    "(subscription and response topics); the replay runs sub-topologies once each, in topic order"
)

TRANSLATIONS = (
    FamilyTranslations("joins")
    .in_task(StreamTableJoinNode, TableTableJoinNode, StreamStreamJoinNode, StreamGlobalJoinNode)
    .unsupported(FkSubscriptionSendNode, FK_JOIN_REASON)
    .unsupported(FkSubscriptionJoinNode, FK_JOIN_REASON)
    .unsupported(FkResponseJoinNode, FK_JOIN_REASON)
)
