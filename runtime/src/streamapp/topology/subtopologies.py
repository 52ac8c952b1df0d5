"""Sub-topologies: the independently scheduled pieces of a topology, split at repartition topics.

Kafka Streams groups processors into sub-topologies connected only through topics
(``InternalTopologyBuilder.makeNodeGroups``). Here a sub-topology is a connected component of the node
graph after cutting at every ``repartition`` node: the repartition node is the *sink* of the upstream
sub-topology (it writes the repartition topic) and the *source* of the downstream one (its readers
consume the topic; all readers of one topic are in one sub-topology, as in Kafka Streams). It is therefore
listed in both; in a sub-topology it is a source exactly when its ``input`` is not in that sub-topology.
Edges of multi-input nodes (``inputs``) connect every parent. Global-table nodes (output kind
``global_table``) belong to no sub-topology and their edges connect nothing.

Sub-topologies are numbered 0.. in the order of their first own node in the description's ``nodes``.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from streamapp.topology.nodes.base import NodeBase
from streamapp.topology.nodes.io import RepartitionNode, SinkNode, SourceNode


class TopicRef(BaseModel):
    """A topic a sub-topology reads or writes.

    For an internal (repartition) topic ``name`` is the suffix without the application id
    (``per-carrier-repartition``); ``resolve`` gives the topic's real name.
    """

    model_config = ConfigDict(frozen=True)

    name: str
    internal: bool = False

    def resolve(self, application_id: str) -> str:
        """The topic's name in Kafka: ``<applicationId>-<name>`` when internal, else ``name``."""
        return f"{application_id}-{self.name}" if self.internal else self.name


class Subtopology(BaseModel):
    """One sub-topology: its node names (description order), topics and stores.

    ``nodes`` includes the repartition nodes it reads from (as sources) and those it writes to (as sinks).
    ``stores`` lists the stores its nodes use; the sub-topology owns them (their changelogs have one
    partition per task of this sub-topology).
    """

    model_config = ConfigDict(frozen=True)

    id: int
    nodes: list[str]
    source_topics: list[TopicRef]
    sink_topics: list[TopicRef]
    stores: list[str]


def split_subtopologies(nodes: Sequence[NodeBase]) -> list[Subtopology]:
    """Split a validated node list into sub-topologies (see the module docstring for the rule)."""
    index = {node.name: i for i, node in enumerate(nodes)}
    by_name = {node.name: node for node in nodes}
    parent = {node.name: node.name for node in nodes}

    def root(name: str) -> str:
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    def union(x: str, y: str) -> None:
        a, b = root(x), root(y)
        if a != b:
            parent[max(a, b, key=index.__getitem__)] = min(a, b, key=index.__getitem__)

    first_reader: dict[str, str] = {}
    for node in nodes:
        if _is_global(node):
            continue
        for upstream in node.inputs():
            upstream_node = by_name[upstream]
            if _is_global(upstream_node):
                continue
            if isinstance(upstream_node, RepartitionNode):
                # every reader of one repartition topic lives in one sub-topology (Kafka's node groups)
                union(node.name, first_reader.setdefault(upstream, node.name))
            else:
                union(node.name, upstream)

    components: dict[str, list[str]] = {}
    for node in nodes:
        if not _is_global(node):
            components.setdefault(root(node.name), []).append(node.name)
    ordered = sorted(components.values(), key=lambda members: index[members[0]])
    return [_subtopology(i, members, by_name, index) for i, members in enumerate(ordered)]


def _is_global(node: NodeBase) -> bool:
    """Global-table nodes belong to no sub-topology: every worker reads all partitions of their topic."""
    return node.output == "global_table"


def _subtopology(sub_id: int, members: list[str], by_name: dict[str, NodeBase], index: dict[str, int]) -> Subtopology:
    own = set(members)
    borrowed = {
        upstream
        for name in members
        for upstream in by_name[name].inputs()
        if upstream not in own and isinstance(by_name[upstream], RepartitionNode)
    }
    names = sorted(own | borrowed, key=index.__getitem__)
    sources: list[TopicRef] = []
    sinks: list[TopicRef] = []
    stores: list[str] = []
    for name in names:
        node = by_name[name]
        if isinstance(node, SourceNode):
            sources.extend(TopicRef(name=topic) for topic in node.topics)
        elif isinstance(node, RepartitionNode):
            ref = TopicRef(name=node.topic_suffix, internal=True)
            (sources if name in borrowed else sinks).append(ref)
        elif isinstance(node, SinkNode) and node.topic is not None and TopicRef(name=node.topic) not in sinks:
            sinks.append(TopicRef(name=node.topic))
        if name in own:
            stores.extend(s for s in node.stores() if s not in stores)
    return Subtopology(id=sub_id, nodes=names, source_topics=sources, sink_topics=sinks, stores=stores)
