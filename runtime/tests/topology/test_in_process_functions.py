"""Functions that only this process has (lambdas, nested functions, ``__main__``, objects without a module-level
name) are kept with a built description and run in-process; exporting it names the node, parameter and reason."""

from __future__ import annotations

import functools
import sys
from typing import Any

import pytest
from streamapp import StreamsBuilder
from streamapp.topology import TopologyDescription, TopologyError
from streamapp.topology.functions import InProcessFunction

EXPORT_NEEDS = r"exporting it as a description \(streamapp topology export, a StreamApp spec\) needs importable"


def times(factor: int, value: int) -> int:
    return factor * value


def one_map(mapper: Any) -> TopologyDescription:
    builder = StreamsBuilder()
    builder.stream("in", key_serde="string", value_serde="long", name="in").map_values(mapper, name="scale").to(
        "out", name="out"
    )
    return builder.build()


def in_main(value: int) -> int:
    return value


@pytest.mark.parametrize(
    ("mapper", "reason"),
    [
        (lambda value: value, r"a lambda in .* cannot be exported"),
        (functools.partial(times, 2), r"functools.partial\(.*\) has no module-level name"),
        ("main", r"function in_main is defined in __main__, which the runtime cannot import"),
    ],
    ids=["lambda", "partial", "main"],
)
def test_export_names_the_node_the_parameter_and_why(mapper: Any, reason: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if mapper == "main":
        monkeypatch.setattr(in_main, "__module__", "__main__")
        monkeypatch.setattr(sys.modules["__main__"], "in_main", in_main, raising=False)
        mapper = in_main
    description = one_map(mapper)

    assert description.resolve_functions() == {"scale": {"mapper": mapper}}
    with pytest.raises(TopologyError, match=rf"^node 'scale': mapper: {reason}.*{EXPORT_NEEDS}"):
        description.to_yaml()


def test_a_nested_function_outside_its_process_fails_saying_where_it_exists() -> None:
    def double(value: int) -> int:
        return 2 * value

    copied = TopologyDescription.from_dict(one_map(double).to_dict())  # what another process receives

    assert copied.node("scale").functions() == {"mapper": f"{__name__}:{double.__qualname__}"}
    with pytest.raises(TopologyError, match=r"node 'scale': mapper: .* exists only in the process that built"):
        copied.resolve_functions()
    with pytest.raises(TopologyError, match=r"node 'scale': mapper: function .*double .* inside another function"):
        copied.check_exportable()


def test_importable_functions_keep_nothing_in_process() -> None:
    description = one_map(f"{__name__}:in_main")

    assert description.in_process_functions() == {}
    assert description == TopologyDescription.from_yaml(description.to_yaml())


def test_in_process_functions_must_belong_to_a_function_parameter_of_a_node() -> None:
    description = one_map(f"{__name__}:in_main")
    kept = InProcessFunction(in_main, "test")

    with pytest.raises(TopologyError, match="unknown node 'nope'"):
        description.with_in_process_functions({"nope": {"mapper": kept}})
    with pytest.raises(TopologyError, match="node 'scale': 'predicate' is not a function parameter of map_values"):
        description.with_in_process_functions({"scale": {"predicate": kept}})
