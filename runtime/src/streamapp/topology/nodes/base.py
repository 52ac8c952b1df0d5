"""What every node model of a topology description shares: fields, kinds, families and helpers.

The node classes live in one module per family (``streamapp.topology.nodes.<family>``); the module a class
is defined in is its ``family``, and ``streamapp.topology.nodes`` derives the closed set of node types from
those modules. A node's user functions are its fields typed ``FunctionRef`` (``function_params``).

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
from typing import Annotated, Any, ClassVar, Literal, get_args, get_origin

from pydantic import AfterValidator
from pydantic.fields import FieldInfo

from streamapp.topology.document import DescriptionModel

__all__ = [
    "FAMILY_PACKAGE",
    "GLOBAL_TABLE_KIND",
    "KINDS",
    "FunctionRef",
    "Kind",
    "NodeBase",
    "changelog_topic_suffix",
    "describe_kinds",
    "node_to_dict",
    "repartition_topic_suffix",
    "store_type_problem",
]

FAMILY_PACKAGE = __name__.rpartition(".")[0]
"""The package whose modules are the node families: a node class's family is its module's name in it."""

_QUALNAME_PART = r"(?:[A-Za-z_]\w*|<[a-z]+>)"
_FUNCTION_REF = re.compile(rf"^[A-Za-z_][\w.]*:{_QUALNAME_PART}(?:\.{_QUALNAME_PART})*$")
"""``module:qualname``; a qualname part may be ``<lambda>`` / ``<locals>``: the reference of a function that exists
only in the process that built the topology (``streamapp.topology.functions.describe_function``)."""

Kind = Literal["stream", "table", "grouped_table", "global_table"]
"""The kind of record flow a node outputs (see the module docstring)."""

KINDS: tuple[Kind, ...] = ("stream", "table", "grouped_table", "global_table")

GLOBAL_TABLE_KIND: Kind = "global_table"
"""The output kind of a ``global_table`` node; only ``stream_global_join`` reads it (at position 1)."""

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


class _UserFunction:
    """The marker of ``FunctionRef`` fields (how ``NodeBase.function_params`` finds them)."""

    def __repr__(self) -> str:
        return "UserFunction"


_USER_FUNCTION = _UserFunction()

FunctionRef = Annotated[str, AfterValidator(_check_function_ref), _USER_FUNCTION]
"""A user function referenced by import path: ``"package.module:qualname"``. A node field of this type (or
``FunctionRef | None``) is one of the node's user functions."""


def _is_function_field(field: FieldInfo) -> bool:
    """True when ``field`` is typed ``FunctionRef`` or ``FunctionRef | None``."""
    if _USER_FUNCTION in field.metadata:
        return True
    return any(
        get_origin(arg) is Annotated and _USER_FUNCTION in arg.__metadata__ for arg in get_args(field.annotation)
    )


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

    # Derived per class in ``__pydantic_init_subclass__`` (never set them by hand):
    type_name: ClassVar[str | None] = None
    """The node type (the default of ``type``, e.g. ``"filter"``); ``None`` for an abstract base."""
    family: ClassVar[str | None] = None
    """The family (``"stateless"``, ...): the module of ``streamapp.topology.nodes`` defining the class."""
    function_params: ClassVar[tuple[str, ...]] = ()
    """The fields typed ``FunctionRef`` (snake_case), in field order: the node's user-function parameters."""

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        default = cls.model_fields["type"].default
        cls.type_name = default if isinstance(default, str) else None
        package, _, module = cls.__module__.rpartition(".")
        cls.family = module if package == FAMILY_PACKAGE else None
        cls.function_params = tuple(name for name, field in cls.model_fields.items() if _is_function_field(field))

    def inputs(self) -> list[str]:
        """Names of the upstream nodes, in order (empty for a source). Multi-input nodes override."""
        upstream = getattr(self, "input", None)
        return [upstream] if upstream else []

    def stores(self) -> list[str]:
        """Names of the state stores this node reads or writes."""
        return []

    def functions(self) -> dict[str, str]:
        """User-function references of this node, by parameter name (snake_case); unset optional ones left out."""
        return {name: ref for name in self.function_params if (ref := getattr(self, name)) is not None}

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


def store_type_problem(spec: Any, expected: str) -> str | None:
    """``"store 's' must be a window store, not key_value"`` when store spec ``spec`` has another type."""
    actual = getattr(spec, "type", "key_value")
    if actual != expected:
        return f"store '{spec.name}' must be a {expected} store, not {actual}"
    return None
