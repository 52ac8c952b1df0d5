"""Invalid descriptions are rejected with a TopologyError that names the node (or store) and the problem.

The operator shows these messages in a StreamApp's Degraded condition, so they must say what is wrong.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from streamapp.topology import TopologyDescription, TopologyError
from topology_samples import flights_doc, node_of, two_stage_doc

Doc = dict[str, Any]


def _set(node: str, **fields: Any) -> Callable[[Doc], None]:
    return lambda doc: node_of(doc, node).update(fields)


def _drop_field(name: str, field: str) -> Callable[[Doc], None]:
    return lambda doc: node_of(doc, name).pop(field)


def _append(node: dict[str, Any]) -> Callable[[Doc], None]:
    return lambda doc: doc["nodes"].append(node)


INVALID: list[tuple[str, Callable[[Doc], None], str]] = [
    (
        "unknown_type",
        _set("departed", type="fiter"),
        "node 'departed': unknown type 'fiter'; allowed types: source, table, to_table, sink, repartition, "
        "global_table, filter, filter_not, map, map_values",
    ),
    ("missing_type", _drop_field("departed", "type"), "node 'departed': 'type' is required"),
    ("missing_input_node", _set("count", input="x"), "node 'count': input 'x' does not exist"),
    ("missing_input_field", _drop_field("departed", "input"), "node 'departed': 'input' is required"),
    ("self_input", _set("departed", input="departed"), "node 'departed': input refers to the node itself"),
    (
        "cycle",
        _set("departed", input="per-carrier-key"),
        "node 'departed': inputs form a cycle: departed <- per-carrier-key <- departed",
    ),
    ("duplicate_name", _set("per-carrier-key", name="departed"), "node 'departed': duplicate node name"),
    (
        "illegal_name",
        _set("departed", name="de parted"),
        "node 'de parted': name may only contain ASCII letters, digits, '.', '_' and '-'",
    ),
    (
        "function_ref_without_colon",
        _set("departed", predicate="flights_app.logic.is_departed"),
        "node 'departed': 'predicate': must be a function reference 'package.module:function', "
        "got 'flights_app.logic.is_departed'",
    ),
    ("missing_function", _drop_field("per-carrier-key", "mapper"), "node 'per-carrier-key': 'mapper' is required"),
    ("unknown_field", _set("departed", when="always"), "node 'departed': unknown field 'when'"),
    (
        "unknown_serde",
        _set("flights", keySerde="xml"),
        "node 'flights': 'keySerde': unknown serde 'xml'; known serdes: bytes, double, int, json, long, string",
    ),
    ("source_without_topics", _set("flights", topics=[]), "node 'flights': 'topics'"),
    ("zero_repartition_partitions", _set("per-carrier", partitions=0), "node 'per-carrier': 'partitions'"),
    (
        "count_on_changed_key_without_repartition",
        _set("count", input="per-carrier-key"),
        "node 'count': its input is keyed by select_key node 'per-carrier-key' and not repartitioned",
    ),
    (
        "count_on_changed_key_through_filter",
        lambda doc: (
            _set("count", input="late-filter")(doc),
            _append(
                {
                    "name": "late-filter",
                    "type": "filter",
                    "input": "per-carrier-key",
                    "predicate": "flights_app.logic:is_departed",
                }
            )(doc),
        ),
        "node 'count': its input is keyed by select_key node 'per-carrier-key' and not repartitioned",
    ),
    (
        "to_stream_of_a_stream",
        _set("changes", input="departed"),
        "node 'changes': a to_stream node needs a table as input, but 'departed' (filter) is a stream",
    ),
    (
        "sink_of_a_table",
        _set("out", input="count"),
        "node 'out': a sink node needs a stream as input, but 'count' (count) is a table; put a to_stream node",
    ),
    (
        "input_is_a_sink",
        _append({"name": "after-sink", "type": "filter", "input": "out", "predicate": "flights_app.logic:is_departed"}),
        "node 'after-sink': input 'out' is a sink, which has no output",
    ),
    (
        "undeclared_store",
        lambda doc: doc["stores"].clear(),
        "node 'count': store 'departures-per-carrier-store' is not declared in stores",
    ),
    (
        "unused_store",
        lambda doc: doc["stores"].append({"name": "spare", "type": "key_value"}),
        "store 'spare': not used by any node",
    ),
    (
        "duplicate_store",
        lambda doc: doc["stores"].append(dict(doc["stores"][0])),
        "store 'departures-per-carrier-store': duplicate store name",
    ),
    ("unknown_store_type", lambda doc: doc["stores"][0].update(type="window"), "store 'departures-per-carrier-store'"),
    (
        "topic_read_twice",
        _append({"name": "again", "type": "source", "topics": ["flights"]}),
        "node 'again': topic 'flights' is already read by source node 'flights'",
    ),
    ("illegal_topic_name", _set("out", topic="departures per carrier"), "topic 'departures per carrier'"),
    (
        "unread_repartition",
        _append({"name": "dangling", "type": "repartition", "input": "departed"}),
        "node 'dangling': repartition topic 'dangling-repartition' is not read by any node",
    ),
    ("node_not_a_mapping", lambda doc: doc["nodes"].append("flights"), "node #7: must be a mapping, got str"),
    (
        "node_without_name",
        lambda doc: doc["nodes"].append({"type": "filter"}),
        "node #7: 'name' is required and must be a non-empty string",
    ),
]


@pytest.mark.parametrize(("mutate", "message"), [case[1:] for case in INVALID], ids=[case[0] for case in INVALID])
def test_invalid_description_is_rejected_with_a_message_naming_the_problem(
    mutate: Callable[[Doc], None], message: str
) -> None:
    doc = flights_doc()
    mutate(doc)

    with pytest.raises(TopologyError) as raised:
        TopologyDescription.from_dict(doc)

    assert message in str(raised.value)


def test_topology_error_is_a_value_error() -> None:
    assert issubclass(TopologyError, ValueError)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nodes: [", "topology description is not valid YAML"),
        ("- a\n- b\n", "topology description must be a mapping with 'nodes' and 'stores', got list"),
        ("nodes: []\nversion: 2\n", "topology description: unknown key 'version'; allowed keys: nodes, stores"),
        ("stores: []\n", "topology description: 'nodes' must be a list of nodes"),
        ("nodes: []\n", "topology has no nodes"),
    ],
    ids=["not_yaml", "not_a_mapping", "unknown_top_level_key", "no_nodes_key", "empty_nodes"],
)
def test_malformed_document_is_rejected(text: str, message: str) -> None:
    with pytest.raises(TopologyError, match=message):
        TopologyDescription.from_yaml(text)


def test_store_shared_by_two_sub_topologies_is_rejected() -> None:
    doc = two_stage_doc()
    doc["nodes"].insert(1, {"name": "early-count", "type": "count", "input": "in", "store": "totals-store"})

    with pytest.raises(TopologyError, match="store 'totals-store': used by sub-topologies 0 and 1"):
        TopologyDescription.from_dict(doc)


def test_nodes_may_be_listed_in_any_order() -> None:
    doc = flights_doc()
    doc["nodes"].reverse()

    desc = TopologyDescription.from_dict(doc)

    assert {node.name for node in desc.nodes} == {node["name"] for node in flights_doc()["nodes"]}
