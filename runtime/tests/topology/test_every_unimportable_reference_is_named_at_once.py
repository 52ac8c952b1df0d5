"""A topology with several broken functions names every one of them in one error, so a user fixes them all in one
round trip (a newcomer with seven lambdas needed seven): exporting lists every in-process function, resolving
lists every reference that does not import, including timestamp extractors and Schema Registry serde references."""

from __future__ import annotations

from typing import Any

import pytest
from streamapp import StreamsBuilder
from streamapp.topology import TopologyDescription, TopologyError
from streamapp.topology.references import check_references, reference_problems


def keep(key: Any, value: Any) -> bool:
    return True


def lambdas_everywhere() -> TopologyDescription:
    builder = StreamsBuilder()
    (
        builder.stream("in", key_serde="string", value_serde="long", name="in")
        .filter(lambda key, value: value > 0, name="positive")
        .filter(keep, name="kept")
        .map_values(lambda value: value * 2, name="double")
        .select_key(lambda key, value: str(value), name="rekey")
        .to("out", name="out")
    )
    return builder.build()


def test_export_names_every_in_process_function_not_only_the_first() -> None:
    description = lambdas_everywhere()

    with pytest.raises(TopologyError) as failed:
        description.to_yaml()

    message = str(failed.value)
    assert message.startswith("3 functions cannot be exported:\n")
    for node, param in (("positive", "predicate"), ("double", "mapper"), ("rekey", "mapper")):
        assert f"  - node '{node}': {param}: a lambda in {__name__} cannot be exported" in message
    assert "'kept'" not in message
    assert [p.split(":")[0] for p in failed.value.problems] == ["node 'positive'", "node 'double'", "node 'rekey'"]
    assert message.endswith("needs importable 'module:attr' references")


def broken_references() -> TopologyDescription:
    return TopologyDescription.from_dict(
        {
            "nodes": [
                {
                    "name": "in",
                    "type": "source",
                    "topics": ["a"],
                    "valueSerde": "avro:no_such_schemas_q:Flight",
                    "timestampExtractor": {"type": "custom", "function": f"{__name__}:no_such_extractor"},
                },
                {"name": "kept", "type": "filter", "input": "in", "predicate": f"{__name__}:keep"},
                {"name": "typo", "type": "filter", "input": "kept", "predicate": f"{__name__}:kepp"},
                {"name": "gone", "type": "map_values", "input": "typo", "mapper": "no_such_module_q:double"},
                {"name": "out", "type": "sink", "input": "gone", "topic": "b"},
            ]
        }
    )


def test_every_reference_that_does_not_import_is_listed_with_where_it_is() -> None:
    problems = reference_problems(broken_references())

    assert problems == [
        f"node 'typo': predicate: function reference '{__name__}:kepp': module '{__name__}' has no attribute 'kepp'",
        "node 'gone': mapper: function reference 'no_such_module_q:double': cannot import module 'no_such_module_q': "
        "No module named 'no_such_module_q'",
        f"node 'in': timestampExtractor: function reference '{__name__}:no_such_extractor': module '{__name__}' has "
        "no attribute 'no_such_extractor'",
        "node 'in': serde 'avro:no_such_schemas_q:Flight': reference 'no_such_schemas_q:Flight': cannot import "
        "module 'no_such_schemas_q': No module named 'no_such_schemas_q'",
    ]
    with pytest.raises(TopologyError, match=r"^4 references to user code cannot be imported:\n  - node 'typo'"):
        check_references(broken_references())


def test_resolve_functions_lists_every_function_that_does_not_import() -> None:
    with pytest.raises(TopologyError) as failed:
        broken_references().resolve_functions()

    assert str(failed.value).startswith("2 user functions cannot be imported:\n  - node 'typo': predicate:")
    assert len(failed.value.problems) == 2


def test_a_topology_whose_references_all_import_has_no_problems() -> None:
    description = TopologyDescription.from_dict(
        {
            "nodes": [
                {"name": "in", "type": "source", "topics": ["a"]},
                {"name": "kept", "type": "filter", "input": "in", "predicate": f"{__name__}:keep"},
                {"name": "out", "type": "sink", "input": "kept", "topic": "b"},
            ]
        }
    )

    assert reference_problems(description) == []
    check_references(description)  # raises nothing
