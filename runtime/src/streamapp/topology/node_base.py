"""What every node model of a topology description shares: fields, markers and helpers.

Node model modules (``streamapp.topology.nodes`` for the core set, and the modules of joins and windows)
import ``NodeBase`` from here; ``streamapp.topology.nodes`` assembles the closed union of node types.

**Kinds.** Every node outputs one of three kinds of record flow, which validation checks edge by edge:

- ``stream`` (a KStream): independent events ``(key, value)``;
- ``table`` (a KTable): updates of a table; the value a processor receives is
  ``streamapp.processors.base.Change(new_value, old_value)`` (``None`` = absent / deleted);
- ``grouped_table`` (a KGroupedTable): the ``Change`` records a table's ``group_by`` emits, re-keyed by the
  new key (old and new values travel separately when the key changed, Kafka's ``KTableRepartitionMap``);
  only a repartition node and a table aggregation (count / reduce / aggregate) may read them;
- ``global_table`` (a GlobalKTable): a table every worker holds whole; its node belongs to no sub-topology
  and only a stream-global-table join reads it.

A node class declares its kinds with two class variables: ``output`` (a kind, ``"input"`` = the kind of its
first input, or ``None`` for a terminal node such as ``sink``) and ``accepts`` (the kinds every input may
have). Nodes whose inputs need different kinds (a stream-table join) override ``accepted_kinds(position)``;
nodes with field rules that depend on the input kind (``reduce`` needs ``reducer`` on a stream but
``adder`` + ``subtractor`` on a grouped table) override ``check_input_kinds``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from streamapp.serdes import SERDE_NAMES, is_serde_name, registry_serde_name

__all__ = [
    "KINDS",
    "DescriptionModel",
    "FunctionRef",
    "Kind",
    "NodeBase",
    "SerdeName",
    "changelog_topic_suffix",
    "check_serde",
    "describe_kinds",
    "node_to_dict",
    "repartition_topic_suffix",
]

_FUNCTION_REF = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")

Kind = Literal["stream", "table", "grouped_table", "global_table"]
"""The kind of record flow a node outputs (see the module docstring)."""

KINDS: tuple[Kind, ...] = ("stream", "table", "grouped_table", "global_table")

_KIND_WORDS: dict[str, str] = {
    "stream": "a stream",
    "table": "a table",
    "grouped_table": "a grouped table",
    "global_table": "a global table",
}


def _check_function_ref(value: str) -> str:
    if not _FUNCTION_REF.match(value):
        raise ValueError(f"must be a function reference 'package.module:function', got '{value}'")
    return value


FunctionRef = Annotated[str, AfterValidator(_check_function_ref)]
"""A user function referenced by import path: ``"package.module:qualname"``."""

SerdeName = Annotated[str, Field(min_length=1)]


class DescriptionModel(BaseModel):
    """Base of every document model: camelCase aliases, unknown fields rejected, immutable."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


def check_serde(value: str) -> str:
    """Validator of serde name fields: ``value`` if it names a known serde, else ValueError."""
    if value not in SERDE_NAMES and not is_serde_name(value):  # is_serde_name: windowed, Schema Registry serdes
        registry_serde_name(value)  # a malformed avro:/protobuf: name raises its own SerdeError (a ValueError)
        raise ValueError(f"unknown serde '{value}'; known serdes: {', '.join(SERDE_NAMES)}, see docs/serdes.md")
    return value


def describe_kinds(kinds: frozenset[str] | set[str]) -> str:
    """``"a stream or a grouped table"``: kinds in the words validation messages use."""
    return " or ".join(_KIND_WORDS.get(kind, kind) for kind in KINDS if kind in kinds)


class NodeBase(DescriptionModel):
    """Fields every node has. ``type`` is the discriminator; subclasses narrow it to one literal."""

    name: str
    type: str

    output: ClassVar[str | None] = "stream"
    """The kind this node outputs: ``"stream"``, ``"table"``, ``"grouped_table"``, ``"input"`` (the kind of its
    first input, e.g. ``filter`` of a table is a table) or ``None`` (terminal: ``sink``, ``foreach``)."""
    accepts: ClassVar[frozenset[str]] = frozenset({"stream"})
    """The kinds each input may have (see ``accepted_kinds`` for per-position rules)."""
    changes_key: ClassVar[bool] = False
    """True when the node's output key may differ from its input key (repartition needed before grouping)."""
    requires_copartitioned_input: ClassVar[bool] = False
    """True for stateful nodes that need their input partitioned by the current key (``count``)."""

    # Compatibility markers of issue 2 (read-only views of ``output`` / ``accepts``; a subclass that sets them
    # instead of ``output`` / ``accepts`` is translated in ``__pydantic_init_subclass__``).
    produces_table: ClassVar[bool] = False
    accepts_table: ClassVar[bool] = False

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        own = cls.__dict__
        if own.get("produces_table") and "output" not in own:
            cls.output = "table"
        if own.get("accepts_table") and "accepts" not in own:
            cls.accepts = frozenset({"table"})
        cls.produces_table = cls.output == "table"
        cls.accepts_table = cls.accepts == frozenset({"table"})

    def inputs(self) -> list[str]:
        """Names of the upstream nodes, in order (empty for a source). Multi-input nodes override."""
        upstream = getattr(self, "input", None)
        return [upstream] if upstream else []

    def stores(self) -> list[str]:
        """Names of the state stores this node reads or writes."""
        return []

    def functions(self) -> dict[str, str]:
        """User-function references of this node, by parameter name (snake_case)."""
        return {}

    def accepted_kinds(self, position: int) -> frozenset[str]:
        """Kinds the input at ``position`` (0-based, in ``inputs()`` order) may have."""
        del position
        return self.accepts

    def output_kind(self, input_kinds: Sequence[str]) -> str | None:
        """The kind of this node's output given its inputs' kinds (``None`` for a terminal node)."""
        if self.output == "input":
            return input_kinds[0] if input_kinds else "stream"
        return self.output

    def check_graph(self, nodes: Mapping[str, NodeBase], stores: Mapping[str, Any]) -> str | None:
        """A rule on the rest of the graph (e.g. a suppress needs a windowed aggregation upstream, a window
        node needs a window store): the problem as text (without the node's name), or ``None``. Called last
        by validation, with every node and store spec (``StoreSpec``) by name."""
        del nodes, stores
        return None

    def check_input_kinds(self, input_kinds: Sequence[str]) -> str | None:
        """An extra rule on the inputs' kinds (already checked against ``accepted_kinds``): the problem as
        text (without the node's name), or ``None`` when the node is fine."""
        del input_kinds
        return None


def repartition_topic_suffix(node_name: str) -> str:
    """``<node>-repartition``: the repartition topic's name without the application id."""
    return f"{node_name}-repartition"


def changelog_topic_suffix(store_name: str) -> str:
    """``<store>-changelog``: the changelog topic's name without the application id."""
    return f"{store_name}-changelog"


def node_to_dict(node: NodeBase) -> dict[str, Any]:
    """The camelCase document form of a node (``None`` fields left out)."""
    return node.model_dump(by_alias=True, exclude_none=True, mode="json")
