"""User functions travel as 'module:attr' references: resolvable ones resolve, others fail clearly."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest
from flights_app import logic
from streamapp.topology import TopologyDescription, TopologyError, function_reference, resolve_function
from topology_samples import flights_doc


def module_level(key: Any, value: Any) -> bool:
    return True


def _wrapping(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any) -> Any:
        return fn(*args)

    return wrapper


@_wrapping
def wrapped_function(key: Any, value: Any) -> bool:
    return True


def test_reference_resolves_to_the_module_level_function() -> None:
    assert resolve_function("flights_app.logic:is_departed") is logic.is_departed


def test_reference_to_a_nested_attribute_resolves() -> None:
    import collections

    assert resolve_function("collections:OrderedDict.fromkeys") == collections.OrderedDict.fromkeys


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("flights_app.logic.is_departed", "must look like 'package.module:function'"),
        ("no_such_module_xyz:fn", "cannot import module 'no_such_module_xyz': No module named 'no_such_module_xyz'"),
        ("flights_app.logic:nope", "module 'flights_app.logic' has no attribute 'nope'"),
        ("flights_app.topology:INPUT_TOPIC", "'INPUT_TOPIC' is not callable"),
    ],
    ids=["no_colon", "missing_module", "missing_attribute", "not_callable"],
)
def test_bad_reference_fails_with_a_message_naming_the_failing_part(ref: str, message: str) -> None:
    with pytest.raises(TopologyError) as raised:
        resolve_function(ref)

    assert f"function reference '{ref}'" in str(raised.value)
    assert message in str(raised.value)


def test_module_level_function_exports_as_module_and_qualname() -> None:
    assert function_reference(logic.carrier) == "flights_app.logic:carrier"
    assert function_reference(module_level) == f"{__name__}:module_level"
    assert function_reference(wrapped_function) == f"{__name__}:wrapped_function"


def test_string_reference_is_passed_through() -> None:
    assert function_reference("flights_app.logic:carrier") == "flights_app.logic:carrier"
    with pytest.raises(TopologyError, match=r"must look like 'package.module:function'"):
        function_reference("carrier")


def test_lambda_cannot_be_exported() -> None:
    with pytest.raises(TopologyError, match=r"a lambda in .* cannot be exported: .* define a module-level function"):
        function_reference(lambda key, value: True)


def test_nested_function_cannot_be_exported() -> None:
    def local(key: Any, value: Any) -> bool:
        return True

    with pytest.raises(TopologyError, match=r"is defined inside another function .* move it to module level"):
        function_reference(local)


def test_function_from_main_cannot_be_exported() -> None:
    def fake() -> None: ...

    fake.__module__ = "__main__"
    fake.__qualname__ = "fake"

    with pytest.raises(TopologyError, match="defined in __main__, which the runtime cannot import"):
        function_reference(fake)


def test_function_whose_reference_resolves_to_another_object_cannot_be_exported() -> None:
    original = wrapped_function.__wrapped__  # type: ignore[attr-defined]

    with pytest.raises(TopologyError, match="resolves to a different object than the function passed"):
        function_reference(original)


def test_description_resolves_every_user_function_by_node_and_parameter() -> None:
    resolved = TopologyDescription.from_dict(flights_doc()).resolve_functions()

    assert resolved == {
        "departed": {"predicate": logic.is_departed},
        "per-carrier-key": {"mapper": logic.carrier},
    }


def test_unresolvable_function_in_a_description_names_the_node() -> None:
    doc = flights_doc()
    doc["nodes"][1]["predicate"] = "flights_app.logic:gone"

    desc = TopologyDescription.from_dict(doc)  # validation never imports user code

    with pytest.raises(TopologyError, match=r"node 'departed': predicate: function reference 'flights_app.logic:gone'"):
        desc.resolve_functions()
