"""The closed set of core node types, one module per family.

Every DSL operation lowers to one of these node types; the runtime (``streamapp.processors``) and the replay
(``streamapp.replay``) implement exactly this set, in modules with the same family names
(``docs/adr/0005-node-families.md``). A node names its upstream node in ``input`` (sources have none). Keys
in documents are camelCase (``keySerde``); attributes are snake_case (``key_serde``).

==========  ===========================================================================================
family      node types (each module's docstring gives their parameters and Kafka Streams classes)
==========  ===========================================================================================
io          source, table, to_table, sink, repartition, global_table
stateless   filter, filter_not, map, map_values, select_key, flat_map, flat_map_values, peek, foreach,
            merge, to_stream, split, branch
aggregate   group_by, count, reduce, aggregate, cogroup_aggregate, cogroup_merge
windowed    windowed_count, windowed_reduce, windowed_aggregate, suppress
joins       stream_global_join, stream_table_join, table_table_join, stream_stream_join, fk_subscription_send,
            fk_subscription_join, fk_response_join
process     process, process_values
==========  ===========================================================================================

Nothing here is a hand-kept list of node types: ``NODE_TYPES``, ``NODE_FAMILIES`` and the ``Node`` union are
derived from the classes that the family modules define (a class that gives ``type`` a literal default).
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Union

from streamapp.topology.nodes import aggregate, io, joins, process, stateless, windowed
from streamapp.topology.nodes.base import NodeBase

__all__ = ["FAMILIES", "NODE_FAMILIES", "NODE_TYPES", "Node", "NodeBase"]

_FAMILY_MODULES: tuple[ModuleType, ...] = (io, stateless, aggregate, windowed, joins, process)

FAMILIES: tuple[str, ...] = tuple(module.__name__.rpartition(".")[2] for module in _FAMILY_MODULES)
"""The node families, in order: the module names every engine uses for them."""


def _node_classes(module: ModuleType) -> list[type[NodeBase]]:
    """The concrete node classes ``module`` defines, in definition order."""
    return [
        value
        for value in vars(module).values()
        if isinstance(value, type)
        and issubclass(value, NodeBase)
        and value.__module__ == module.__name__
        and value.type_name is not None
    ]


def _node_types() -> dict[str, type[NodeBase]]:
    types: dict[str, type[NodeBase]] = {}
    for module in _FAMILY_MODULES:
        for cls in _node_classes(module):
            assert cls.type_name is not None
            if cls.type_name in types:
                raise TypeError(f"node type '{cls.type_name}' is defined twice: {types[cls.type_name]} and {cls}")
            types[cls.type_name] = cls
    return types


NODE_TYPES: dict[str, type[NodeBase]] = _node_types()
"""The closed set of core node types: the node class of each ``type`` value, family by family."""

NODE_FAMILIES: dict[str, tuple[str, ...]] = {
    family: tuple(t for t, cls in NODE_TYPES.items() if cls.family == family) for family in FAMILIES
}
"""The node types of each family (``{"io": ("source", "table", ...), ...}``)."""

if TYPE_CHECKING:
    Node = NodeBase
else:
    Node = Union[tuple(NODE_TYPES.values())]  # noqa: UP007 (built from a tuple of classes)
"""The union of the node classes (pydantic discriminates it on ``type``); a ``NodeBase`` for type checkers."""
