"""The foreign-key join in the description (``streamapp.topology.nodes.joins`` ``fk_*`` nodes, the repartition node's
``internalTopic``): a YAML round trip, and the refusals of a hand-written document that breaks its shape."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from conformance.join_functions import customer_of, pair
from streamapp import StreamsBuilder
from streamapp.topology import TopologyDescription, TopologyError


def document() -> dict[str, Any]:
    builder = StreamsBuilder()
    orders = builder.table("orders", key_serde="string", value_serde="json", name="orders")
    customers = builder.table("customers", key_serde="string", value_serde="json", name="customers")
    orders.left_join(customers, pair, foreign_key_extractor=customer_of, name="enrich").to_stream(name="ts").to(
        "out", name="out"
    )
    loaded: dict[str, Any] = yaml.safe_load(builder.build().to_yaml())
    return loaded


def node(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(n for n in doc["nodes"] if n["name"] == name)


def test_the_join_survives_a_yaml_round_trip_with_its_internal_topic_names() -> None:
    doc = document()
    description = TopologyDescription.from_dict(doc)

    assert yaml.safe_load(description.to_yaml()) == doc
    assert description.repartition_topic("app", "enrich-subscription-response") == (
        "app-enrich-subscription-response-topic"
    )


@pytest.mark.parametrize(
    ("node_name", "change", "message"),
    [
        (
            "enrich-subscription-response",
            {"internalTopic": "enrich-subscription-registration-topic"},
            "is also the topic of repartition node",
        ),
        ("enrich-subscription-response", {"internalTopic": "no spaces"}, "topic 'no spaces'"),
        ("enrich", {"rightValueSerde": "nope"}, "unknown serde 'nope'"),
        ("enrich", {"join": "outer"}, "join"),
    ],
)
def test_a_document_that_breaks_the_joins_shape_is_refused_naming_the_node(
    node_name: str, change: dict[str, Any], message: str
) -> None:
    doc = document()
    node(doc, node_name).update(change)

    with pytest.raises(TopologyError, match=message):
        TopologyDescription.from_dict(doc)


@pytest.mark.parametrize(
    ("node_name", "field", "other"),
    [
        ("enrich-subscription-processor", "rightStore", "enrich-subscription-store"),
        ("enrich", "store", "enrich-left-store"),
    ],
)
def test_a_join_node_that_names_one_store_twice_is_refused(node_name: str, field: str, other: str) -> None:
    doc = document()
    dropped = node(doc, node_name)[field]
    node(doc, node_name)[field] = other
    doc["stores"] = [store for store in doc["stores"] if store["name"] != dropped]

    with pytest.raises(TopologyError, match=f"node '{node_name}': .*must be different stores"):
        TopologyDescription.from_dict(doc)
