"""The topology description: data model, validation, sub-topologies and internal topics.

Read by the DSL (which builds it), the runtime (which runs it), the replay and the operator (which deploys
it); it never imports user code except in ``resolve_function`` / ``TopologyDescription.resolve_functions``.
The node types are grouped in families, one module each in ``streamapp.topology.nodes`` (``FAMILIES``).
"""

from streamapp.topology.description import TopologyDescription
from streamapp.topology.errors import TopologyError
from streamapp.topology.functions import function_reference, resolve_function
from streamapp.topology.internal_topics import CHANGELOG_TOPIC_CONFIG, REPARTITION_TOPIC_CONFIG, InternalTopic
from streamapp.topology.nodes import FAMILIES, NODE_FAMILIES, NODE_TYPES, Node, NodeBase
from streamapp.topology.nodes.aggregate import CountNode
from streamapp.topology.nodes.io import GlobalTableNode, RepartitionNode, SinkNode, SourceNode
from streamapp.topology.nodes.joins import (
    StreamGlobalJoinNode,
    StreamStreamJoinNode,
    StreamTableJoinNode,
    TableTableJoinNode,
)
from streamapp.topology.nodes.stateless import FilterNode, MapValuesNode, MergeNode, SelectKeyNode, ToStreamNode
from streamapp.topology.stores import StoreSpec
from streamapp.topology.subtopologies import Subtopology, TopicRef

__all__ = [
    "CHANGELOG_TOPIC_CONFIG",
    "FAMILIES",
    "NODE_FAMILIES",
    "NODE_TYPES",
    "REPARTITION_TOPIC_CONFIG",
    "CountNode",
    "FilterNode",
    "GlobalTableNode",
    "InternalTopic",
    "MapValuesNode",
    "MergeNode",
    "Node",
    "NodeBase",
    "RepartitionNode",
    "SelectKeyNode",
    "SinkNode",
    "SourceNode",
    "StoreSpec",
    "StreamGlobalJoinNode",
    "StreamStreamJoinNode",
    "StreamTableJoinNode",
    "Subtopology",
    "TableTableJoinNode",
    "ToStreamNode",
    "TopicRef",
    "TopologyDescription",
    "TopologyError",
    "function_reference",
    "resolve_function",
]
