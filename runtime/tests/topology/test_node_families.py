"""One node-family axis (docs/adr/0005-node-families.md): every node type is in exactly one family, and every
engine has one module per family and implements every node type.

To add an engine (the Spark replay), append one ``EngineSpec`` to ``ENGINES``.
"""

from __future__ import annotations

import importlib
import pkgutil
import typing
from dataclasses import dataclass
from typing import Any

import pytest
import streamapp.topology.nodes as nodes_package
from streamapp.processors import PROCESSOR_BUILDERS
from streamapp.processors.base import FamilyBuilders
from streamapp.topology import FAMILIES, NODE_FAMILIES, NODE_TYPES, NodeBase
from streamapp.topology.nodes.aggregate import CountNode
from streamapp.topology.nodes.stateless import FilterNode


@dataclass(frozen=True)
class EngineSpec:
    """An engine that runs topology descriptions.

    ``package`` holds one module per node family (``<package>.<family>``); ``table`` (``"module:attribute"``)
    maps each node type it runs to its implementation; ``unsupported`` (``"module:attribute"``, optional)
    names the node types it refuses, with a clear error, before running anything.
    """

    name: str
    package: str
    table: str
    unsupported: str | None = None


ENGINES = [
    EngineSpec("runtime", package="streamapp.processors", table="streamapp.processors:PROCESSOR_BUILDERS"),
    EngineSpec(
        "replay",
        package="streamapp.replay",
        table="streamapp.replay.translate:TRANSLATIONS",
        unsupported="streamapp.replay.translate:UNSUPPORTED",
    ),
]


def _attribute(reference: str) -> Any:
    module, _, attribute = reference.partition(":")
    return getattr(importlib.import_module(module), attribute)


def test_every_node_type_is_in_exactly_one_family() -> None:
    listed = [node_type for types in NODE_FAMILIES.values() for node_type in types]
    assert sorted(listed) == sorted(NODE_TYPES)
    assert len(listed) == len(set(listed))
    for family, types in NODE_FAMILIES.items():
        for node_type in types:
            assert NODE_TYPES[node_type].family == family
            assert NODE_TYPES[node_type].type_name == node_type


def test_the_families_are_the_modules_of_the_nodes_package() -> None:
    modules = {info.name for info in pkgutil.iter_modules(nodes_package.__path__)} - {"base"}
    assert set(FAMILIES) == modules


@pytest.mark.parametrize("engine", ENGINES, ids=lambda engine: engine.name)
def test_an_engine_has_one_module_per_family(engine: EngineSpec) -> None:
    missing = [family for family in FAMILIES if importlib.util.find_spec(f"{engine.package}.{family}") is None]
    assert not missing, f"{engine.name}: no module {engine.package}.<family> for families {missing}"


@pytest.mark.parametrize("engine", ENGINES, ids=lambda engine: engine.name)
def test_an_engine_implements_every_node_type(engine: EngineSpec) -> None:
    implemented = set(_attribute(engine.table))
    unsupported = set(_attribute(engine.unsupported)) if engine.unsupported else set()
    assert not implemented & unsupported, (
        f"{engine.name}: both implemented and unsupported: {implemented & unsupported}"
    )
    missing = sorted(set(NODE_TYPES) - implemented - unsupported)
    assert not missing, f"{engine.name}: node types without an implementation: {missing}"
    unknown = sorted((implemented | unsupported) - set(NODE_TYPES))
    assert not unknown, f"{engine.name}: implements node types that do not exist: {unknown}"


@pytest.mark.parametrize("family", FAMILIES)
def test_each_runtime_family_module_builds_exactly_its_family(family: str) -> None:
    builders = importlib.import_module(f"streamapp.processors.{family}").BUILDERS
    assert builders.family == family
    assert set(builders) == set(NODE_FAMILIES[family])


@pytest.mark.parametrize("node_type", list(NODE_TYPES))
def test_a_runtime_builder_accepts_the_node_class_it_is_registered_for(node_type: str) -> None:
    builder = PROCESSOR_BUILDERS[node_type]
    annotation = typing.get_type_hints(builder)["node"]
    accepted = typing.get_args(annotation) or (annotation,)
    assert any(issubclass(NODE_TYPES[node_type], cls) for cls in accepted), (builder, annotation)


def test_function_parameters_are_the_function_reference_fields() -> None:
    assert NODE_TYPES["aggregate"].function_params == ("initializer", "aggregator", "adder", "subtractor")
    assert NODE_TYPES["windowed_aggregate"].function_params == ("initializer", "aggregator", "merger")
    assert NODE_TYPES["sink"].function_params == ("topic_extractor",)
    assert NODE_TYPES["source"].function_params == ()
    node = NODE_TYPES["reduce"].model_validate(
        {"name": "r", "type": "reduce", "input": "i", "store": "s", "reducer": "m:f"}
    )
    assert node.functions() == {"reducer": "m:f"}


def test_a_family_table_refuses_a_node_class_of_another_family_or_a_second_builder() -> None:
    builders = FamilyBuilders("stateless")
    builders.builds(FilterNode)(lambda node, children, ctx: None)
    with pytest.raises(TypeError, match="two processor builders"):
        builders.builds(FilterNode)(lambda node, children, ctx: None)
    with pytest.raises(TypeError, match="CountNode is not a node type of family 'stateless'"):
        builders.builds(CountNode)(lambda node, children, ctx: None)
    with pytest.raises(TypeError, match="NodeBase is not a node type"):
        builders.builds(NodeBase)(lambda node, children, ctx: None)
    with pytest.raises(ValueError, match="unknown node family 'routing'"):
        FamilyBuilders("routing")
