"""The description document: parsing, printing and round-trips (the contract with runtime and operator)."""

from __future__ import annotations

import json

import pytest
import yaml
from streamapp.topology import (
    CountNode,
    FilterNode,
    SourceNode,
    TopologyDescription,
    TopologyError,
)
from topology_samples import FLIGHTS_YAML, flights_doc


def test_yaml_document_parses_into_typed_nodes_and_stores() -> None:
    desc = TopologyDescription.from_yaml(FLIGHTS_YAML)

    assert [node.type for node in desc.nodes] == [
        "source",
        "filter",
        "select_key",
        "repartition",
        "count",
        "to_stream",
        "sink",
    ]
    source = desc.node("flights")
    assert isinstance(source, SourceNode)
    assert (source.topics, source.key_serde, source.value_serde) == (["flights"], "string", "json")
    assert isinstance(desc.node("departed"), FilterNode)
    assert desc.node("departed").predicate == "flights_app.logic:is_departed"  # type: ignore[union-attr]
    count = desc.node("count")
    assert isinstance(count, CountNode) and count.store == "departures-per-carrier-store"
    assert desc.store("departures-per-carrier-store").value_serde == "long"


def test_to_dict_round_trips_the_document_exactly() -> None:
    assert TopologyDescription.from_dict(flights_doc()).to_dict() == flights_doc()


def test_yaml_round_trip_gives_an_equal_description() -> None:
    desc = TopologyDescription.from_dict(flights_doc())

    again = TopologyDescription.from_yaml(desc.to_yaml())

    assert again == desc
    assert again.to_yaml() == desc.to_yaml()


def test_yaml_output_has_one_line_per_node_for_readable_diffs() -> None:
    text = TopologyDescription.from_dict(flights_doc()).to_yaml()

    lines = text.splitlines()
    assert lines[0] == "nodes:"
    assert lines[1] == "- {name: flights, type: source, topics: [flights], keySerde: string, valueSerde: json}"
    assert len(lines) == 1 + 7 + 1 + 1


def test_json_output_parses_back_to_the_same_description() -> None:
    desc = TopologyDescription.from_dict(flights_doc())

    assert TopologyDescription.from_dict(json.loads(desc.to_json())) == desc
    assert TopologyDescription.from_yaml(desc.to_json()) == desc


def test_document_keys_are_camel_case_and_unset_optionals_are_left_out() -> None:
    doc = flights_doc()
    desc = TopologyDescription.from_dict(doc)

    repartition = desc.to_dict()["nodes"][3]

    assert repartition == {
        "name": "per-carrier",
        "type": "repartition",
        "input": "per-carrier-key",
        "keySerde": "string",
        "valueSerde": "json",
    }
    assert "partitions" not in repartition


def test_omitted_serdes_default_to_bytes() -> None:
    doc = yaml.safe_load("""
nodes:
  - {name: in, type: source, topics: [a]}
  - {name: out, type: sink, input: in, topic: b}
""")
    desc = TopologyDescription.from_dict(doc)

    assert desc.to_dict()["nodes"][0]["keySerde"] == "bytes"
    assert desc.to_dict()["nodes"][1]["valueSerde"] == "bytes"
    assert desc.to_dict()["stores"] == []


def test_snake_case_keys_are_accepted_on_input() -> None:
    doc = flights_doc()
    doc["nodes"][0]["key_serde"] = doc["nodes"][0].pop("keySerde")

    assert TopologyDescription.from_dict(doc).to_dict() == flights_doc()


def test_repartition_partitions_survive_the_round_trip() -> None:
    doc = flights_doc()
    doc["nodes"][3]["partitions"] = 12

    assert TopologyDescription.from_yaml(TopologyDescription.from_dict(doc).to_yaml()).to_dict() == doc


def test_description_is_immutable() -> None:
    desc = TopologyDescription.from_dict(flights_doc())

    with pytest.raises(ValueError):
        desc.node("count").store = "other"  # type: ignore[union-attr,misc]


def test_children_lists_downstream_nodes_in_description_order() -> None:
    desc = TopologyDescription.from_dict(flights_doc())

    assert desc.children("flights") == ["departed"]
    assert desc.children("per-carrier") == ["count"]
    assert desc.children("out") == []


def test_external_source_and_sink_topics_are_listed() -> None:
    desc = TopologyDescription.from_dict(flights_doc())

    assert desc.external_source_topics() == ["flights"]
    assert desc.sink_topics() == ["departures-per-carrier"]


def test_internal_topic_names_are_prefixed_with_the_application_id() -> None:
    desc = TopologyDescription.from_dict(flights_doc())

    assert desc.changelog_topic("app", "departures-per-carrier-store") == "app-departures-per-carrier-store-changelog"
    assert desc.repartition_topic("app", "per-carrier") == "app-per-carrier-repartition"


def test_unknown_store_or_repartition_name_is_an_error() -> None:
    desc = TopologyDescription.from_dict(flights_doc())

    with pytest.raises(TopologyError, match="store 'nope': not a store of this topology"):
        desc.changelog_topic("app", "nope")
    with pytest.raises(TopologyError, match="node 'count': not a repartition node"):
        desc.repartition_topic("app", "count")


def test_direct_construction_validates_the_graph_too() -> None:
    desc = TopologyDescription.from_dict(flights_doc())
    broken = [node for node in desc.nodes if node.name != "per-carrier"]

    with pytest.raises(TopologyError, match="node 'count': input 'per-carrier' does not exist"):
        TopologyDescription.of(broken, list(desc.stores))
