"""A readable text form of a topology, like Kafka Streams' ``TopologyDescription.toString()``.

Shape::

    Topologies:
       Sub-topology: 0
        Source: flights (topics: [flights])
          --> departed
        Processor: departed (type: filter, stores: [])
          --> per-carrier-key
          <-- flights
        ...
    Stores:
      departures-per-carrier-store (key_value, string -> long), sub-topology 1, changelog: app-...-changelog
    Internal topics:
      app-per-carrier-repartition (partitions: 4, cleanup.policy=delete, retention.ms=-1)
    Tasks:
      sub-topology 0: 0_0, 0_1, 0_2, 0_3

Without an application id, internal topic names start with ``<application.id>``; without the partition
counts of all external source topics, partition counts and tasks are shown as unknown.
"""

from __future__ import annotations

from collections.abc import Mapping

from streamapp.topology.description import TopologyDescription
from streamapp.topology.errors import TopologyError
from streamapp.topology.nodes.base import NodeBase
from streamapp.topology.nodes.io import GlobalTableNode, RepartitionNode, SinkNode, SourceNode
from streamapp.topology.subtopologies import Subtopology

APPLICATION_ID_PLACEHOLDER = "<application.id>"


def describe(
    desc: TopologyDescription,
    application_id: str | None = None,
    partitions: Mapping[str, int] | None = None,
) -> str:
    """The text description of ``desc`` (see the module docstring); never raises for missing counts."""
    app = application_id or APPLICATION_ID_PLACEHOLDER
    subs = desc.subtopologies()
    lines = ["Topologies:"]
    for sub in subs:
        lines.append(f"   Sub-topology: {sub.id}")
        for name in sub.nodes:
            lines.extend(_node_lines(desc, sub, desc.node(name), app))
        lines.append("")
    for node in desc.nodes:
        if isinstance(node, GlobalTableNode):
            readers = ", ".join(desc.children(node.name))
            lines.append(f"   Global table: {node.name} (topic: {node.topic}, store: {node.store}) --> {readers}")
            lines.append("")
    lines.extend(_store_lines(desc, subs, app))
    lines.extend(_counted_lines(desc, app, partitions or {}))
    return "\n".join(lines) + "\n"


def _node_lines(desc: TopologyDescription, sub: Subtopology, node: NodeBase, app: str) -> list[str]:
    downstream = [child for child in desc.children(node.name) if child in sub.nodes]
    upstream = [parent for parent in node.inputs() if parent in sub.nodes]
    if isinstance(node, SourceNode):
        head = f"Source: {node.name} (topics: [{', '.join(node.topics)}])"
    elif isinstance(node, RepartitionNode) and node.input not in sub.nodes:
        head = f"Source: {node.name} (topics: [{app}-{node.topic_suffix}])"
    elif isinstance(node, RepartitionNode):
        head = f"Sink: {node.name} (topic: {app}-{node.topic_suffix})"
        downstream = []
    elif isinstance(node, SinkNode):
        head = f"Sink: {node.name} (topic: {node.topic or 'extracted by ' + str(node.topic_extractor)})"
    else:
        head = f"Processor: {node.name} (type: {node.type}, stores: [{', '.join(node.stores())}])"
    lines = [f"    {head}"]
    if downstream:
        lines.append(f"      --> {', '.join(downstream)}")
    if upstream:
        lines.append(f"      <-- {', '.join(upstream)}")
    return lines


def _store_lines(desc: TopologyDescription, subs: list[Subtopology], app: str) -> list[str]:
    owner = {store: sub.id for sub in subs for store in sub.stores}
    lines = ["Stores:"]
    for store in desc.stores:
        where = (
            f"sub-topology {owner[store.name]}, changelog: {app}-{store.name}-changelog"
            if store.name in owner
            else "global (a full copy in every worker; its topic is its changelog)"
        )
        history = "" if store.history_retention_ms is None else f", history {store.history_retention_ms} ms"
        lines.append(f"  {store.name} ({store.type}{history}, {store.key_serde} -> {store.value_serde}), {where}")
    if not desc.stores:
        lines.append("  (none)")
    return lines


def _counted_lines(desc: TopologyDescription, app: str, partitions: Mapping[str, int]) -> list[str]:
    try:
        topics = desc.internal_topics(app, partitions)
        tasks = desc.task_counts(partitions)
    except TopologyError as exc:
        if any(t not in partitions for t in desc.external_source_topics()):
            missing = " ".join(f"--partitions {t}=N" for t in desc.external_source_topics())
            reason = f"unknown; pass {missing}"
        else:
            reason = f"invalid: {exc}"
        return ["Internal topics:", *_uncounted_topics(desc, app), "Tasks:", f"  {reason}"]
    lines = ["Internal topics:"]
    for topic in topics:
        config = ", ".join(f"{k}={v}" for k, v in topic.config.items())
        lines.append(f"  {topic.name} (partitions: {topic.partitions}, {config})")
    if not topics:
        lines.append("  (none)")
    lines.append("Tasks:")
    for sub_id, count in tasks.items():
        lines.append(f"  sub-topology {sub_id}: {', '.join(f'{sub_id}_{p}' for p in range(count))}")
    return lines


def _uncounted_topics(desc: TopologyDescription, app: str) -> list[str]:
    names = [f"{app}-{node.topic_suffix}" for node in desc.nodes if isinstance(node, RepartitionNode)]
    owned = {store for sub in desc.subtopologies() for store in sub.stores}
    names += [f"{app}-{store.name}-changelog" for store in desc.stores if store.name in owned]
    return [f"  {name} (partitions: unknown)" for name in names] or ["  (none)"]
