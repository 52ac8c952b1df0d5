"""The runtime meaning of each core node type, and the builder of a task's processor graph.

``PROCESSOR_BUILDERS`` maps every node type of ``streamapp.topology.NODE_TYPES`` to the function that
builds its processor; a node type without an entry is an error when a task is built, never skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from streamapp.processors.aggregate import build_aggregate, build_count, build_reduce
from streamapp.processors.api import build_process
from streamapp.processors.base import BuildContext, Processor, ProcessorMetrics, RecordSender
from streamapp.processors.io import build_source
from streamapp.processors.join import (
    build_global_table,
    build_stream_global_join,
    build_stream_table_join,
    build_table_table_join,
)
from streamapp.processors.routing import build_any_sink, build_branch, build_split
from streamapp.processors.stateless import (
    build_filter,
    build_flat_map,
    build_flat_map_values,
    build_map,
    build_map_values,
    build_merge,
    build_peek,
    build_select_key,
    build_to_stream,
)
from streamapp.processors.stream_join import build_stream_stream_join
from streamapp.processors.suppress import build_suppress
from streamapp.processors.tables import build_group_by, build_grouped_table_repartition, build_table_source
from streamapp.processors.windowed import build_windowed_aggregation
from streamapp.topology import NodeBase, RepartitionNode, SourceNode, Subtopology, TopologyDescription, TopologyError

__all__ = [
    "PROCESSOR_BUILDERS",
    "BuildContext",
    "Processor",
    "ProcessorMetrics",
    "RecordSender",
    "build_task_processors",
    "source_node_names",
]

ProcessorBuilder = Callable[[NodeBase, Sequence[Processor], BuildContext], Processor]

PROCESSOR_BUILDERS: dict[str, ProcessorBuilder] = {
    "source": build_source,
    "filter": build_filter,
    "map_values": build_map_values,
    "select_key": build_select_key,
    "repartition": build_grouped_table_repartition,
    "count": build_count,
    "to_stream": build_to_stream,
    "sink": build_any_sink,
    "merge": build_merge,
    "filter_not": build_filter,
    "map": build_map,
    "flat_map": build_flat_map,
    "flat_map_values": build_flat_map_values,
    "peek": build_peek,
    "foreach": build_peek,
    "split": build_split,
    "branch": build_branch,
    "table": build_table_source,
    "group_by": build_group_by,
    "reduce": build_reduce,
    "aggregate": build_aggregate,
    "process": build_process,
    "global_table": build_global_table,
    "stream_global_join": build_stream_global_join,
    "stream_table_join": build_stream_table_join,
    "table_table_join": build_table_table_join,
    "stream_stream_join": build_stream_stream_join,
    "windowed_count": build_windowed_aggregation,
    "windowed_reduce": build_windowed_aggregation,
    "windowed_aggregate": build_windowed_aggregation,
    "suppress": build_suppress,
}


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
        children = (
            [] if writes_repartition else [_child(build(c), name) for c in description.children(name) if c in members]
        )
        built[name] = builder(node, children, ctx)
        return built[name]

    sources: dict[str, Processor] = {}
    for name in sorted(ctx.source_nodes, key=subtopology.nodes.index):
        node = description.node(name)
        topics = node.topics if isinstance(node, SourceNode) else [ctx.topic_of(name)]
        for topic in topics:
            sources[topic] = build(name)
    return sources
