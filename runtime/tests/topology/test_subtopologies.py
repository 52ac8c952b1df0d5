"""Sub-topologies are split at repartition topics, numbered by first node, and list their topics and stores."""

from __future__ import annotations

from typing import Any

from streamapp.topology import Subtopology, TopicRef, TopologyDescription
from topology_samples import flights_doc, two_stage_doc


def test_flights_topology_splits_into_two_sub_topologies_at_the_repartition() -> None:
    subs = TopologyDescription.from_dict(flights_doc()).subtopologies()

    assert subs == [
        Subtopology(
            id=0,
            nodes=["flights", "departed", "per-carrier-key", "per-carrier"],
            source_topics=[TopicRef(name="flights")],
            sink_topics=[TopicRef(name="per-carrier-repartition", internal=True)],
            stores=[],
        ),
        Subtopology(
            id=1,
            nodes=["per-carrier", "count", "changes", "out"],
            source_topics=[TopicRef(name="per-carrier-repartition", internal=True)],
            sink_topics=[TopicRef(name="departures-per-carrier")],
            stores=["departures-per-carrier-store"],
        ),
    ]


def test_repartition_node_is_a_source_exactly_where_its_input_is_outside_the_sub_topology() -> None:
    desc = TopologyDescription.from_dict(flights_doc())
    upstream, downstream = desc.subtopologies()

    assert desc.node("per-carrier").inputs()[0] in upstream.nodes
    assert desc.node("per-carrier").inputs()[0] not in downstream.nodes


def test_stateless_topology_is_one_sub_topology() -> None:
    doc: dict[str, Any] = {
        "nodes": [
            {"name": "in", "type": "source", "topics": ["a", "b"]},
            {"name": "upper", "type": "map_values", "input": "in", "mapper": "str:upper"},
            {"name": "out", "type": "sink", "input": "upper", "topic": "c"},
        ]
    }

    (only,) = TopologyDescription.from_dict(doc).subtopologies()

    assert only.nodes == ["in", "upper", "out"]
    assert only.source_topics == [TopicRef(name="a"), TopicRef(name="b")]
    assert only.sink_topics == [TopicRef(name="c")]


def test_independent_pipelines_are_numbered_in_order_of_their_first_node() -> None:
    doc: dict[str, Any] = {
        "nodes": [
            {"name": "second-in", "type": "source", "topics": ["y"]},
            {"name": "first-in", "type": "source", "topics": ["x"]},
            {"name": "first-out", "type": "sink", "input": "first-in", "topic": "x-out"},
            {"name": "second-out", "type": "sink", "input": "second-in", "topic": "y-out"},
        ]
    }

    subs = TopologyDescription.from_dict(doc).subtopologies()

    assert [(sub.id, sub.nodes) for sub in subs] == [(0, ["second-in", "second-out"]), (1, ["first-in", "first-out"])]


def test_chained_repartitions_give_one_sub_topology_per_stage() -> None:
    doc = two_stage_doc()
    doc["nodes"][2:2] = [
        {"name": "first", "type": "repartition", "input": "rekey"},
        {"name": "rekey-again", "type": "select_key", "input": "first", "mapper": "flights_app.logic:carrier"},
    ]
    doc["nodes"][4]["input"] = "rekey-again"  # 'rekeyed' now reads the second stage

    subs = TopologyDescription.from_dict(doc).subtopologies()

    assert [sub.nodes for sub in subs] == [
        ["in", "rekey", "first"],
        ["first", "rekey-again", "rekeyed"],
        ["rekeyed", "totals", "changes", "out"],
    ]
    assert subs[1].source_topics == [TopicRef(name="first-repartition", internal=True)]
    assert subs[1].sink_topics == [TopicRef(name="rekeyed-repartition", internal=True)]


def test_internal_topic_ref_resolves_with_the_application_id_and_external_stays_as_is() -> None:
    assert TopicRef(name="per-carrier-repartition", internal=True).resolve("app") == "app-per-carrier-repartition"
    assert TopicRef(name="flights").resolve("app") == "flights"
