"""The DSL lowers to the core node types with stable, deterministic names and automatic repartitioning."""

from __future__ import annotations

from typing import Any

import pytest
from flights_app import logic
from streamapp import StreamsBuilder, TopologyDescription, TopologyError


def is_big(key: Any, value: Any) -> bool:
    return bool(value["size"] > 10)


def size(value: Any) -> int:
    return int(value["size"])


def region(key: Any, value: Any) -> str:
    return str(value["region"])


def _types_and_names(desc: TopologyDescription) -> list[tuple[str, str]]:
    return [(node.type, node.name) for node in desc.nodes]


def test_group_by_inserts_select_key_and_a_repartition_named_after_the_grouping() -> None:
    builder = StreamsBuilder()
    builder.stream("orders", key_serde="string", value_serde="json", name="orders").group_by(
        region, name="per-region"
    ).count(store="orders-per-region")

    desc = builder.build()

    assert _types_and_names(desc) == [
        ("source", "orders"),
        ("select_key", "per-region-key"),
        ("repartition", "per-region"),
        ("count", "KSTREAM-AGGREGATE-0000000000"),
    ]
    assert desc.to_dict()["nodes"][2] == {
        "name": "per-region",
        "type": "repartition",
        "input": "per-region-key",
        "keySerde": "string",
        "valueSerde": "json",
    }
    assert desc.to_dict()["stores"] == [
        {"name": "orders-per-region", "type": "key_value", "keySerde": "string", "valueSerde": "long"},
    ]
    assert [sub.nodes for sub in desc.subtopologies()] == [
        ["orders", "per-region-key", "per-region"],
        ["per-region", "KSTREAM-AGGREGATE-0000000000"],
    ]


def test_group_by_key_without_a_key_change_does_not_repartition() -> None:
    builder = StreamsBuilder()
    builder.stream("orders", name="orders").filter(is_big, name="big").group_by_key().count(name="n")

    desc = builder.build()

    assert _types_and_names(desc) == [("source", "orders"), ("filter", "big"), ("count", "n")]
    assert len(desc.subtopologies()) == 1


def test_key_change_survives_filter_and_map_values_until_the_grouping() -> None:
    builder = StreamsBuilder()
    (
        builder.stream("orders", name="orders")
        .select_key(region, name="by-region")
        .filter(is_big, name="big")
        .map_values(size, name="size")
        .group_by_key(name="regrouped")
        .count(name="n")
    )

    desc = builder.build()

    assert [node.type for node in desc.nodes] == [
        "source",
        "select_key",
        "filter",
        "map_values",
        "repartition",
        "count",
    ]
    assert desc.node("regrouped").inputs() == ["size"]


def test_unnamed_repartition_is_named_after_the_store_like_kafka_streams() -> None:
    builder = StreamsBuilder()
    builder.stream("orders").select_key(region).group_by_key().count(store="region-counts")

    desc = builder.build()

    assert desc.repartition_topic("app", "region-counts") == "app-region-counts-repartition"


def test_count_name_derives_the_store_name() -> None:
    builder = StreamsBuilder()
    builder.stream("orders", name="orders").group_by_key().count(name="order-count")

    assert [store.name for store in builder.build().stores] == ["order-count-store"]


def test_default_names_are_kafka_style_and_deterministic() -> None:
    def build() -> TopologyDescription:
        builder = StreamsBuilder()
        builder.stream("orders").filter(is_big).select_key(region).group_by_key().count().to_stream().to("out")
        return builder.build()

    first = build()

    assert _types_and_names(first) == [
        ("source", "KSTREAM-SOURCE-0000000000"),
        ("filter", "KSTREAM-FILTER-0000000001"),
        ("select_key", "KSTREAM-KEY-SELECT-0000000002"),
        ("repartition", "KSTREAM-AGGREGATE-STATE-STORE-0000000003"),
        ("count", "KSTREAM-AGGREGATE-0000000004"),
        ("to_stream", "KTABLE-TOSTREAM-0000000005"),
        ("sink", "KSTREAM-SINK-0000000006"),
    ]
    assert [store.name for store in first.stores] == ["KSTREAM-AGGREGATE-STATE-STORE-0000000003"]
    assert build() == first


def test_serdes_follow_the_chain_unless_overridden() -> None:
    builder = StreamsBuilder()
    stream = builder.stream("in", key_serde="string", value_serde="json", name="in")
    stream.map_values(size, name="sizes", value_serde="long").to("sizes", name="sizes-out")
    stream.select_key(region, name="rekey").to("rekeyed", name="rekeyed-out")
    stream.to("raw", name="raw-out", key_serde="bytes", value_serde="bytes")

    nodes = {n["name"]: n for n in builder.build().to_dict()["nodes"]}

    assert (nodes["sizes-out"]["keySerde"], nodes["sizes-out"]["valueSerde"]) == ("string", "long")
    assert (nodes["rekeyed-out"]["keySerde"], nodes["rekeyed-out"]["valueSerde"]) == ("string", "json")
    assert (nodes["raw-out"]["keySerde"], nodes["raw-out"]["valueSerde"]) == ("bytes", "bytes")


def test_count_output_is_a_long_valued_table_whose_stream_can_be_written() -> None:
    builder = StreamsBuilder()
    table = builder.stream("in", key_serde="string", value_serde="json", name="in").group_by_key().count(name="n")
    table.to_stream(name="changes").to("counts", name="out")

    out = builder.build().to_dict()["nodes"][-1]

    assert (table.key_serde, table.value_serde) == ("string", "long")
    assert (out["keySerde"], out["valueSerde"]) == ("string", "long")


def test_stream_over_several_topics_is_one_source() -> None:
    builder = StreamsBuilder()
    builder.stream(["a", "b"], name="in").to("c", name="out")

    assert builder.build().external_source_topics() == ["a", "b"]


def test_functions_may_be_given_as_references() -> None:
    builder = StreamsBuilder()
    builder.stream("in", name="in").filter("flights_app.logic:is_departed", name="f").to("out", name="out")

    assert builder.build().resolve_functions() == {"f": {"predicate": logic.is_departed}}


def test_a_lambda_builds_and_exporting_it_names_the_node_and_parameter() -> None:
    builder = StreamsBuilder()
    builder.stream("in", name="in").filter(lambda key, value: True, name="keep-all").to("out", name="out")
    description = builder.build()

    assert description.node("keep-all").functions() == {
        "predicate": f"{__name__}:test_a_lambda_builds_and_exporting_it_names_the_node_and_parameter.<locals>.<lambda>"
    }
    for export in (description.to_yaml, description.to_json, description.check_exportable):
        with pytest.raises(TopologyError, match=r"node 'keep-all': predicate: a lambda in .* cannot be exported"):
            export()


def test_duplicate_step_name_is_rejected_where_it_is_given() -> None:
    builder = StreamsBuilder()
    stream = builder.stream("in", name="in")

    with pytest.raises(TopologyError, match="node 'in': node name is already used in this topology"):
        stream.filter(is_big, name="in")


def test_duplicate_store_name_is_rejected() -> None:
    builder = StreamsBuilder()
    stream = builder.stream("in", name="in")
    stream.group_by_key().count(name="a", store="counts")

    with pytest.raises(TopologyError, match="store 'counts': store name is already used"):
        stream.group_by_key().count(name="b", store="counts")


def test_illegal_step_name_is_rejected() -> None:
    with pytest.raises(TopologyError, match="node 'my stream': name may only contain"):
        StreamsBuilder().stream("in", name="my stream")


def test_built_description_round_trips_through_yaml() -> None:
    builder = StreamsBuilder()
    (
        builder.stream("orders", key_serde="string", value_serde="json", name="orders")
        .filter(is_big, name="big")
        .map_values(size, name="size", value_serde="long")
        .group_by(region, name="per-region", key_serde="string")
        .count(name="count", store="per-region-store")
        .to_stream(name="changes")
        .to("sizes-per-region", name="out")
    )
    desc = builder.build()

    assert TopologyDescription.from_yaml(desc.to_yaml()) == desc
    assert TopologyDescription.from_yaml(desc.to_yaml()).to_dict() == desc.to_dict()


def test_a_step_of_an_unknown_node_type_is_refused_naming_the_node() -> None:
    builder = StreamsBuilder()
    with pytest.raises(TopologyError, match="node 'x': unknown type 'fiter'; allowed types: source, table, "):
        builder._add("fiter", "x", "")


def test_table_to_stream_with_a_mapper_is_to_stream_then_select_key_as_in_kafka() -> None:
    builder = StreamsBuilder()
    builder.table("users", key_serde="string", value_serde="json").to_stream(region, key_serde="bytes").to("out")

    description = builder.build()

    assert _types_and_names(description) == [
        ("table", "KTABLE-SOURCE-0000000000"),
        ("to_stream", "KTABLE-TOSTREAM-0000000002"),
        ("select_key", "KSTREAM-KEY-SELECT-0000000003"),
        ("sink", "KSTREAM-SINK-0000000004"),
    ]
    assert description.node("KSTREAM-SINK-0000000004").key_serde == "bytes"
