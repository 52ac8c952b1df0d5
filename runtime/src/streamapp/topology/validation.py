"""Graph checks of a topology description, run on every parse and build.

They read nothing but the description (no user code, no cluster), so the operator runs the same checks
as the runtime. Each failure raises TopologyError naming the node or store and the problem.
"""

from __future__ import annotations

from collections.abc import Sequence

from streamapp.topology.errors import TopologyError
from streamapp.topology.names import check_name
from streamapp.topology.nodes.base import NodeBase, describe_kinds
from streamapp.topology.nodes.io import RepartitionNode, SinkNode, SourceNode
from streamapp.topology.stores import StoreSpec


def validate_graph(nodes: Sequence[NodeBase], stores: Sequence[StoreSpec]) -> None:
    """Raise TopologyError unless ``nodes`` and ``stores`` form a valid topology.

    Checks, in order: legal and unique names; every input exists; no cycle; stream/table kinds match;
    stateful nodes see input partitioned by its current key; stores exist and are used; a topic is read
    by at most one source node; every repartition node is read by some node; each node's own graph rule
    (``NodeBase.check_graph``).
    """
    if not nodes:
        raise TopologyError("topology has no nodes")
    by_name = _unique_nodes(nodes)
    _check_inputs_exist(nodes, by_name)
    _check_acyclic(nodes, by_name)
    _check_kinds(nodes, by_name)
    _check_keys_partitioned(nodes, by_name)
    _check_stores(nodes, stores)
    _check_topics(nodes)
    stores_by_name = {store.name: store for store in stores}
    for node in nodes:
        problem = node.check_graph(by_name, stores_by_name)
        if problem is not None:
            raise TopologyError(f"node '{node.name}': {problem}")


def _unique_nodes(nodes: Sequence[NodeBase]) -> dict[str, NodeBase]:
    by_name: dict[str, NodeBase] = {}
    for node in nodes:
        check_name("node", node.name)
        if node.name in by_name:
            raise TopologyError(f"node '{node.name}': duplicate node name")
        by_name[node.name] = node
    return by_name


def _check_inputs_exist(nodes: Sequence[NodeBase], by_name: dict[str, NodeBase]) -> None:
    for node in nodes:
        for upstream in node.inputs():
            if upstream == node.name:
                raise TopologyError(f"node '{node.name}': input refers to the node itself")
            if upstream not in by_name:
                raise TopologyError(f"node '{node.name}': input '{upstream}' does not exist")


def _check_acyclic(nodes: Sequence[NodeBase], by_name: dict[str, NodeBase]) -> None:
    done: set[str] = set()
    for start in nodes:
        path: list[str] = []
        _visit(start.name, by_name, done, path, set(path))


def _visit(name: str, by_name: dict[str, NodeBase], done: set[str], path: list[str], on_path: set[str]) -> None:
    if name in done:
        return
    if name in on_path:
        cycle = [*path[path.index(name) :], name]
        raise TopologyError(f"node '{name}': inputs form a cycle: {' <- '.join(cycle)}")
    path.append(name)
    on_path.add(name)
    for upstream in by_name[name].inputs():
        _visit(upstream, by_name, done, path, on_path)
    path.pop()
    on_path.discard(name)
    done.add(name)


def output_kinds(nodes: Sequence[NodeBase]) -> dict[str, str | None]:
    """The kind each node outputs (``"stream"``, ``"table"``, ``"grouped_table"``; ``None`` for a terminal node).

    Expects a graph whose inputs exist and that has no cycle (``validate_graph`` checks both first).
    """
    by_name = {node.name: node for node in nodes}
    kinds: dict[str, str | None] = {}

    def kind(name: str) -> str | None:
        if name not in kinds:
            node = by_name[name]
            kinds[name] = node.output_kind([kind(upstream) or "stream" for upstream in node.inputs()])
        return kinds[name]

    for node in nodes:
        kind(node.name)
    return kinds


def _check_kinds(nodes: Sequence[NodeBase], by_name: dict[str, NodeBase]) -> None:
    kinds = output_kinds(nodes)
    for node in nodes:
        if isinstance(node, SourceNode) or not node.accepts:
            continue  # a source reads topics; a node accepting no kind (global_table) has no inputs
        if not node.inputs():
            raise TopologyError(f"node '{node.name}': a {node.type} node needs an input")
        input_kinds: list[str] = []
        for position, upstream_name in enumerate(node.inputs()):
            upstream = by_name[upstream_name]
            upstream_kind = kinds[upstream_name]
            if upstream_kind is None:
                raise TopologyError(
                    f"node '{node.name}': input '{upstream_name}' is a {upstream.type}, which has no output"
                )
            accepted = node.accepted_kinds(position)
            if upstream_kind not in accepted:
                hint = "; put a to_stream node in between" if upstream_kind == "table" and "stream" in accepted else ""
                raise TopologyError(
                    f"node '{node.name}': a {node.type} node needs {describe_kinds(accepted)} as input, "
                    f"but '{upstream_name}' ({upstream.type}) is {describe_kinds({upstream_kind})}{hint}"
                )
            input_kinds.append(upstream_kind)
        problem = node.check_input_kinds(input_kinds)
        if problem is not None:
            raise TopologyError(f"node '{node.name}': {problem}")


def _check_keys_partitioned(nodes: Sequence[NodeBase], by_name: dict[str, NodeBase]) -> None:
    for node in nodes:
        if not node.requires_copartitioned_input:
            continue
        changer = _key_changer_upstream(node, by_name)
        if changer is not None:
            raise TopologyError(
                f"node '{node.name}': its input is keyed by {changer.type} node '{changer.name}' "
                f"and not repartitioned; put a repartition node between them "
                f"(the DSL's group_by does this)"
            )


def _key_changer_upstream(node: NodeBase, by_name: dict[str, NodeBase]) -> NodeBase | None:
    """The nearest upstream node that changed the key since the last source or repartition, if any."""
    for upstream_name in node.inputs():
        upstream = by_name[upstream_name]
        if isinstance(upstream, SourceNode | RepartitionNode):
            continue
        if upstream.changes_key:
            return upstream
        found = _key_changer_upstream(upstream, by_name)
        if found is not None:
            return found
    return None


def _check_stores(nodes: Sequence[NodeBase], stores: Sequence[StoreSpec]) -> None:
    declared: dict[str, StoreSpec] = {}
    for store in stores:
        check_name("store", store.name)
        if store.name in declared:
            raise TopologyError(f"store '{store.name}': duplicate store name")
        declared[store.name] = store
    used: set[str] = set()
    for node in nodes:
        for store_name in node.stores():
            if store_name not in declared:
                raise TopologyError(f"node '{node.name}': store '{store_name}' is not declared in stores")
            used.add(store_name)
    for store in stores:
        if store.name not in used:
            raise TopologyError(f"store '{store.name}': not used by any node")


def _check_topics(nodes: Sequence[NodeBase]) -> None:
    readers: dict[str, str] = {}
    consumed = {upstream for node in nodes for upstream in node.inputs()}
    for node in nodes:
        if isinstance(node, SourceNode):
            for topic in node.topics:
                check_name("topic", topic)
                if topic in readers:
                    raise TopologyError(
                        f"node '{node.name}': topic '{topic}' is already read by source node '{readers[topic]}'"
                    )
                readers[topic] = node.name
        elif isinstance(node, SinkNode) and node.topic is not None:
            check_name("topic", node.topic)
        elif isinstance(node, RepartitionNode) and node.name not in consumed:
            raise TopologyError(f"node '{node.name}': repartition topic '{node.topic_suffix}' is not read by any node")
