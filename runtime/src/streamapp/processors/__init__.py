"""The runtime meaning of each core node type, and the builder of a task's processor graph.

One module per node family (``streamapp.processors.<family>``, the families of ``streamapp.topology.nodes``),
each with a ``BUILDERS`` table filled next to its builders. ``PROCESSOR_BUILDERS`` is their union: it maps
node types of ``streamapp.topology.NODE_TYPES`` to the function that builds the processor; a node type
without an entry is an error when a task is built, never skipped.
"""

from __future__ import annotations

from streamapp.processors import aggregate, io, joins, process, stateless, windowed
from streamapp.processors.base import (
    BuildContext,
    FamilyBuilders,
    Processor,
    ProcessorBuilder,
    ProcessorMetrics,
    RecordSender,
)
from streamapp.topology import (
    FAMILIES,
    NODE_TYPES,
    RepartitionNode,
    SourceNode,
    Subtopology,
    TopologyDescription,
    TopologyError,
)
from streamapp.topology.nodes.stateless import SplitNode

__all__ = [
    "PROCESSOR_BUILDERS",
    "BuildContext",
    "Processor",
    "ProcessorBuilder",
    "ProcessorMetrics",
    "RecordSender",
    "build_task_processors",
    "source_node_names",
    "source_node_of_topic",
    "terminal_nodes",
]


def _processor_builders(families: tuple[FamilyBuilders, ...]) -> dict[str, ProcessorBuilder]:
    by_family = {builders.family: builders for builders in families}
    missing = [family for family in FAMILIES if family not in by_family]
    if missing:
        raise ImportError(f"streamapp.processors has no module for node families {', '.join(missing)}")
    table = {node_type: builder for family in FAMILIES for node_type, builder in by_family[family].items()}
    return {node_type: table[node_type] for node_type in NODE_TYPES if node_type in table}


PROCESSOR_BUILDERS: dict[str, ProcessorBuilder] = _processor_builders(
    (io.BUILDERS, stateless.BUILDERS, aggregate.BUILDERS, windowed.BUILDERS, joins.BUILDERS, process.BUILDERS)
)
"""The builder of every node type the runtime runs, in ``NODE_TYPES`` order (all of them: a test checks)."""


def source_node_names(description: TopologyDescription, subtopology: Subtopology) -> set[str]:
    """The nodes that receive consumed records in ``subtopology``: its source nodes and the repartition
    nodes it reads (those whose input lies in another sub-topology)."""
    members = set(subtopology.nodes)
    names: set[str] = set()
    for name in subtopology.nodes:
        node = description.node(name)
        if isinstance(node, SourceNode) or (isinstance(node, RepartitionNode) and node.input not in members):
            names.add(name)
    return names


def _child(processor: Processor, parent: str) -> Processor:
    """The processor ``parent`` forwards to: a multi-input processor (a join) may give each parent its own
    entry point through ``for_input(parent_name) -> Processor``; others are shared by every parent."""
    for_input = getattr(processor, "for_input", None)
    return for_input(parent) if for_input is not None else processor


def build_task_processors(
    description: TopologyDescription, subtopology: Subtopology, ctx: BuildContext
) -> dict[str, Processor]:
    """Build one task's processor graph; the source processors by the topic they read.

    Raises TopologyError for a node type without a runtime processor.
    """
    ctx.metrics.record_context = ctx.record_context  # drops are logged with the record being processed
    members = set(subtopology.nodes)
    built: dict[str, Processor] = {}

    def build(name: str) -> Processor:
        if name in built:
            return built[name]
        node = description.node(name)
        builder = PROCESSOR_BUILDERS.get(node.type)
        if builder is None:
            raise TopologyError(
                f"node '{name}': the runtime has no processor for type '{node.type}'; "
                f"supported types: {', '.join(PROCESSOR_BUILDERS)}"
            )
        writes_repartition = isinstance(node, RepartitionNode) and name not in ctx.source_nodes
        names = [] if writes_repartition else [c for c in description.children(name) if c in members]
        children = [_child(build(c), name) for c in names]
        if sensors is not None and not isinstance(node, SplitNode):  # a split calls its branches' predicates
            children = [
                sensors.node(c, child, terminal=c in terminal) for c, child in zip(names, children, strict=True)
            ]
        built[name] = builder(node, children, ctx)
        return built[name]

    sensors = ctx.sensors
    terminal = terminal_nodes(description, subtopology, ctx.source_nodes)
    return {topic: build(name) for topic, name in source_node_of_topic(description, subtopology, ctx).items()}


def terminal_nodes(description: TopologyDescription, subtopology: Subtopology, sources: set[str]) -> frozenset[str]:
    """The nodes of ``subtopology`` that forward to no node of it (sinks, repartition writers, ``foreach``):
    Kafka's ``ProcessorNode.isTerminalNode``, where ``record-e2e-latency`` is recorded besides the sources."""
    members = set(subtopology.nodes)
    return frozenset(
        name
        for name in subtopology.nodes
        if name not in sources
        and (
            isinstance(description.node(name), RepartitionNode)
            or not any(c in members for c in description.children(name))
        )
    )


def source_node_of_topic(
    description: TopologyDescription, subtopology: Subtopology, ctx: BuildContext
) -> dict[str, str]:
    """The source node (a source or a repartition node the sub-topology reads) of each topic the task reads."""
    nodes: dict[str, str] = {}
    for name in sorted(ctx.source_nodes, key=subtopology.nodes.index):
        node = description.node(name)
        for topic in node.topics if isinstance(node, SourceNode) else [ctx.topic_of(name)]:
            nodes[topic] = name
    return nodes
