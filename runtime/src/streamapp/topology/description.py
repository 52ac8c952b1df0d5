"""TopologyDescription: the topology as data, the contract between DSL, runtime and operator.

A document (YAML or JSON, camelCase keys) with ``nodes`` (the closed set of core node types in
``streamapp.topology.nodes``, one module per family) and ``stores``. Everything else (sub-topologies,
internal topics, task ids) is derived from it by pure functions, without importing user code.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from streamapp.topology.errors import TopologyError, problems_error
from streamapp.topology.functions import InProcessFunction, in_process_reason, resolve_function
from streamapp.topology.internal_topics import InternalTopic, PartitionCounts, internal_topics
from streamapp.topology.nodes import NODE_TYPES, Node
from streamapp.topology.nodes.base import changelog_topic_suffix, node_to_dict
from streamapp.topology.nodes.io import GlobalTableNode, RepartitionNode, SinkNode, SourceNode
from streamapp.topology.stores import StoreSpec
from streamapp.topology.subtopologies import Subtopology, split_subtopologies
from streamapp.topology.validation import output_kinds, validate_graph

_TOP_LEVEL_KEYS = ("nodes", "stores")


class TopologyDescription(BaseModel):
    """A validated topology description.

    Construct it with ``from_yaml`` / ``from_dict`` (or the DSL's ``StreamsBuilder.build()``); invalid input
    raises TopologyError naming the node and the problem. Instances are immutable.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    nodes: list[Annotated[Node, Field(discriminator="type")]]
    stores: list[StoreSpec] = Field(default_factory=list)
    _in_process: dict[str, dict[str, InProcessFunction]] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _validate_graph(self) -> TopologyDescription:
        validate_graph(self.nodes, self.stores)
        subtopologies = split_subtopologies(self.nodes)
        _check_store_owners(self, subtopologies)
        return self

    # -- parsing and printing ----------------------------------------------------------------------

    @classmethod
    def from_yaml(cls, text: str) -> TopologyDescription:
        """Parse a YAML (or JSON) document; raises TopologyError."""
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise TopologyError(f"topology description is not valid YAML: {exc}") from exc
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: Any) -> TopologyDescription:
        """Parse the document form (camelCase keys); raises TopologyError."""
        if not isinstance(data, Mapping):
            raise TopologyError(
                f"topology description must be a mapping with 'nodes' and 'stores', got {type(data).__name__}"
            )
        unknown = [key for key in data if key not in _TOP_LEVEL_KEYS]
        if unknown:
            raise TopologyError(
                f"topology description: unknown key '{unknown[0]}'; allowed keys: {', '.join(_TOP_LEVEL_KEYS)}"
            )
        raw_nodes = data.get("nodes")
        raw_stores = data.get("stores") or []
        if not isinstance(raw_nodes, list):
            raise TopologyError("topology description: 'nodes' must be a list of nodes")
        if not isinstance(raw_stores, list):
            raise TopologyError("topology description: 'stores' must be a list of stores")
        nodes = [_parse_node(i, raw) for i, raw in enumerate(raw_nodes)]
        stores = [_parse_store(i, raw) for i, raw in enumerate(raw_stores)]
        return cls.of(nodes, stores)

    @classmethod
    def of(cls, nodes: list[Node], stores: list[StoreSpec]) -> TopologyDescription:
        """Build from parsed nodes and stores, validating the graph; raises TopologyError."""
        try:
            return cls(nodes=nodes, stores=stores)
        except ValidationError as exc:
            raise _topology_error(exc, "topology description") from None

    def with_in_process_functions(
        self, functions: Mapping[str, Mapping[str, InProcessFunction]]
    ) -> TopologyDescription:
        """This description with user functions that only this process has (``{node: {parameter: function}}``,
        see ``streamapp.topology.functions``): ``resolve_functions`` returns them, ``check_exportable`` refuses them.

        Raises TopologyError for a node or parameter the description does not have."""
        for node_name, params in functions.items():
            try:
                node = self.node(node_name)
            except KeyError:
                raise TopologyError(f"in-process function of unknown node '{node_name}'") from None
            for param in params:
                if param not in type(node).function_params:
                    raise TopologyError(f"node '{node_name}': '{param}' is not a function parameter of {node.type}")
        copy = self.model_copy()
        copy._in_process = {node: dict(params) for node, params in functions.items() if params}
        return copy

    def in_process_functions(self) -> dict[str, dict[str, InProcessFunction]]:
        """The user functions kept with this description because no other process can import them."""
        return {node: dict(params) for node, params in self._in_process.items()}

    def export_problems(self) -> list[str]:
        """Every function another process could not import (a lambda, a nested function, one defined in
        ``__main__``), as ``"node '<node>': <parameter>: <why>"`` lines in description order; ``[]`` when the
        description can be exported."""
        problems = []
        for node in self.nodes:
            for param, ref in node.functions().items():
                kept = self._in_process.get(node.name, {}).get(param)
                reason = kept.reason if kept is not None else in_process_reason(ref)
                if reason is not None:
                    problems.append(f"node '{node.name}': {param}: {reason}")
        return problems

    def check_exportable(self) -> None:
        """Raises one TopologyError listing every node and parameter whose function another process could not
        import, and why (``export_problems``). Exporting (``to_yaml``, ``to_json``; ``streamapp topology export``,
        a StreamApp spec) calls it; running in-process does not."""
        problems = self.export_problems()
        if problems:
            raise problems_error(
                problems,
                "functions cannot be exported",
                "Only a topology that runs in this process (the TopologyTestDriver) may use such functions; "
                "exporting it as a description (streamapp topology export, a StreamApp spec) needs importable "
                "'module:attr' references",
            )

    def to_dict(self) -> dict[str, Any]:
        """The document form: camelCase keys, unset optional fields left out; ``from_dict`` inverts it (without
        the in-process functions: use ``check_exportable`` before handing it to another process)."""
        return {
            "nodes": [node_to_dict(node) for node in self.nodes],
            "stores": [store.model_dump(by_alias=True, exclude_none=True, mode="json") for store in self.stores],
        }

    def to_yaml(self) -> str:
        """YAML with one line per node and per store, so a topology change is a readable Git diff.

        Raises TopologyError when a function cannot be exported (``check_exportable``)."""
        self.check_exportable()
        doc = {
            "nodes": [_Flow(n) for n in self.to_dict()["nodes"]],
            "stores": [_Flow(s) for s in self.to_dict()["stores"]],
        }
        return yaml.dump(doc, Dumper=_Dumper, sort_keys=False, width=1_000_000, allow_unicode=True)

    def to_json(self, indent: int | None = 2) -> str:
        """JSON document form. Raises TopologyError when a function cannot be exported (``check_exportable``)."""
        self.check_exportable()
        return json.dumps(self.to_dict(), indent=indent)

    # -- derived structure (pure, no user code, no cluster) ------------------------------------------

    def node(self, name: str) -> Node:
        """The node called ``name``; KeyError if there is none."""
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)

    def children(self, name: str) -> list[str]:
        """Names of the nodes whose input is ``name``, in description order."""
        return [node.name for node in self.nodes if name in node.inputs()]

    def store(self, name: str) -> StoreSpec:
        """The store called ``name``; KeyError if there is none."""
        for store in self.stores:
            if store.name == name:
                return store
        raise KeyError(name)

    def output_kinds(self) -> dict[str, str | None]:
        """The kind of every node's output: ``"stream"``, ``"table"``, ``"grouped_table"``, or ``None`` for a
        terminal node (see ``streamapp.topology.nodes.base``)."""
        return output_kinds(self.nodes)

    def subtopologies(self) -> list[Subtopology]:
        """Sub-topologies split at repartition nodes, numbered 0.. (see ``streamapp.topology.subtopologies``)."""
        return split_subtopologies(self.nodes)

    def external_source_topics(self) -> list[str]:
        """Topics read by source nodes, then the topics of global tables (read whole by every worker, outside
        the group), in description order."""
        topics = [t for node in self.nodes if isinstance(node, SourceNode) for t in node.topics]
        return topics + [node.topic for node in self.nodes if isinstance(node, GlobalTableNode)]

    def sink_topics(self) -> list[str]:
        """External topics written by sink nodes, in description order, without duplicates (topics a
        ``topicExtractor`` picks per record are not known here)."""
        topics: list[str] = []
        for node in self.nodes:
            if isinstance(node, SinkNode) and node.topic is not None and node.topic not in topics:
                topics.append(node.topic)
        return topics

    def repartition_topic(self, application_id: str, node: str) -> str:
        """``<applicationId>-<node>-repartition`` of a repartition node; TopologyError for other names."""
        found = self._repartitions().get(node)
        if found is None:
            raise TopologyError(f"node '{node}': not a repartition node of this topology")
        return f"{application_id}-{found.topic_suffix}"

    def changelog_topic(self, application_id: str, store: str) -> str:
        """``<applicationId>-<store>-changelog``; TopologyError for an unknown store."""
        if store not in {s.name for s in self.stores}:
            raise TopologyError(f"store '{store}': not a store of this topology")
        return f"{application_id}-{changelog_topic_suffix(store)}"

    def task_counts(self, partitions: Mapping[str, int]) -> dict[int, int]:
        """Tasks per sub-topology id, given the partition count of every external source topic.

        Raises TopologyError when a count is missing or a sub-topology is not co-partitioned.
        """
        subs = self.subtopologies()
        counts = PartitionCounts(subs, self._repartitions(), partitions)
        return {sub.id: counts.tasks(sub) for sub in subs}

    def task_ids(self, application_id: str, partitions: Mapping[str, int]) -> list[str]:
        """Every task id ``<subtopologyId>_<partition>``, by sub-topology then partition.

        ``application_id`` does not change task ids; it is accepted for symmetry with ``internal_topics``.
        """
        del application_id
        return [f"{sub}_{p}" for sub, n in self.task_counts(partitions).items() for p in range(n)]

    def internal_topics(self, application_id: str, partitions: Mapping[str, int]) -> list[InternalTopic]:
        """Repartition and changelog topics with partition counts and configs.

        ``partitions`` gives the partition count of every external source topic. Raises TopologyError
        when one is missing or co-partitioning is violated.
        """
        subs = self.subtopologies()
        repartitions = self._repartitions()
        counts = PartitionCounts(subs, repartitions, partitions)
        return internal_topics(application_id, subs, repartitions, self.stores, counts)

    def resolve_functions(self) -> dict[str, dict[str, Callable[..., Any]]]:
        """Import every user function: ``{node: {parameter: callable}}``.

        Raises one TopologyError listing every function that cannot be imported (``problems_error``). This
        imports user code; only the runtime (and ``streamapp topology export``) should call it. Functions kept
        with the description (``in_process_functions``) are returned as kept.
        """
        resolved: dict[str, dict[str, Callable[..., Any]]] = {}
        problems: list[str] = []
        for node in self.nodes:
            for param, ref in node.functions().items():
                kept = self._in_process.get(node.name, {}).get(param)
                if kept is not None:
                    resolved.setdefault(node.name, {})[param] = kept.function
                    continue
                try:
                    resolved.setdefault(node.name, {})[param] = resolve_function(ref)
                except TopologyError as exc:
                    problems.append(f"node '{node.name}': {param}: {exc}")
        if problems:
            raise problems_error(problems, "user functions cannot be imported")
        return resolved

    def _repartitions(self) -> dict[str, RepartitionNode]:
        return {node.name: node for node in self.nodes if isinstance(node, RepartitionNode)}


def _check_store_owners(desc: TopologyDescription, subtopologies: list[Subtopology]) -> None:
    owners: dict[str, int] = {}
    for sub in subtopologies:
        for store in sub.stores:
            if store in owners:
                raise TopologyError(
                    f"store '{store}': used by sub-topologies {owners[store]} and {sub.id}; "
                    "a store belongs to exactly one sub-topology"
                )
            owners[store] = sub.id


def _parse_node(position: int, raw: Any) -> Node:
    if not isinstance(raw, Mapping):
        raise TopologyError(f"node #{position}: must be a mapping, got {type(raw).__name__}")
    name = raw.get("name")
    label = f"node '{name}'" if isinstance(name, str) and name else f"node #{position}"
    if not isinstance(name, str) or not name:
        raise TopologyError(f"{label}: 'name' is required and must be a non-empty string")
    node_type = raw.get("type")
    if node_type is None:
        raise TopologyError(f"{label}: 'type' is required; allowed types: {', '.join(NODE_TYPES)}")
    model = NODE_TYPES.get(node_type) if isinstance(node_type, str) else None
    if model is None:
        raise TopologyError(f"{label}: unknown type '{node_type}'; allowed types: {', '.join(NODE_TYPES)}")
    try:
        return model.model_validate(dict(raw))
    except ValidationError as exc:
        raise _topology_error(exc, label) from None


def _parse_store(position: int, raw: Any) -> StoreSpec:
    if not isinstance(raw, Mapping):
        raise TopologyError(f"store #{position}: must be a mapping, got {type(raw).__name__}")
    name = raw.get("name")
    label = f"store '{name}'" if isinstance(name, str) and name else f"store #{position}"
    try:
        return StoreSpec.model_validate(dict(raw))
    except ValidationError as exc:
        raise _topology_error(exc, label) from None


def _topology_error(exc: ValidationError, label: str) -> TopologyError:
    """One readable TopologyError from a pydantic error; a TopologyError raised inside is kept as is."""
    problems: list[str] = []
    for error in exc.errors():
        cause = error.get("ctx", {}).get("error")
        if isinstance(cause, TopologyError):
            return cause
        field = ".".join(str(part) for part in error["loc"])
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "missing":
            problems.append(f"'{field}' is required")
        elif error["type"] == "extra_forbidden":
            problems.append(f"unknown field '{field}'")
        elif not field:
            problems.append(message)
        else:
            problems.append(f"'{field}': {message}")
    return TopologyError(f"{label}: {'; '.join(problems)}")


class _Flow(dict[str, Any]):
    """A mapping printed in YAML flow style (one line)."""


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(
    _Flow, lambda dumper, data: dumper.represent_mapping("tag:yaml.org,2002:map", data, flow_style=True)
)
