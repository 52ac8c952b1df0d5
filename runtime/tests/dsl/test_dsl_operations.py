"""The DSL lowers every KStream / KTable / grouped operation to the documented nodes, with Kafka Streams'
names (split branches, table stores, grouped-table repartitions) and serdes carried along."""

from __future__ import annotations

from typing import Any

import pytest
from conformance import dsl_functions as fn
from streamapp import StreamsBuilder
from streamapp.topology import TopologyDescription, TopologyError
from streamapp.topology.timestamps import TimestampExtractorSpec

F = "conformance.dsl_functions"


def nodes(builder: StreamsBuilder) -> dict[str, dict[str, Any]]:
    return {node["name"]: node for node in builder.build().to_dict()["nodes"]}


def test_stream_operators_record_their_nodes_with_function_references() -> None:
    builder = StreamsBuilder()
    (
        builder.stream("in", key_serde="string", value_serde="long", name="in")
        .filter_not(fn.is_even, name="odd")
        .map(fn.swap, name="swapped", key_serde="string", value_serde="string")
        .flat_map_values(fn.split_words, name="parts")
        .peek(fn.is_even, name="look")
        .foreach(fn.is_even, name="each")
    )

    got = nodes(builder)

    assert got["odd"] == {"name": "odd", "type": "filter_not", "input": "in", "predicate": f"{F}:is_even"}
    assert got["swapped"]["mapper"] == f"{F}:swap"
    assert got["parts"] == {
        "name": "parts",
        "type": "flat_map_values",
        "input": "swapped",
        "mapper": f"{F}:split_words",
    }
    assert got["each"] == {"name": "each", "type": "foreach", "input": "look", "action": f"{F}:is_even"}


def test_map_and_flat_map_mark_the_stream_re_keyed_so_grouping_repartitions() -> None:
    builder = StreamsBuilder()
    words = builder.stream("in", key_serde="string", value_serde="string", name="in").flat_map(fn.words, name="w")
    assert words.key_changed
    words.group_by_key(name="by-word").count(name="n", store="counts")

    got = nodes(builder)

    assert got["by-word"]["type"] == "repartition"
    assert got["n"]["input"] == "by-word"


def test_split_names_branches_after_the_split_and_kafkas_indexes() -> None:
    builder = StreamsBuilder()
    branches = (
        builder.stream("in", key_serde="string", value_serde="long", name="in")
        .split(name="s-")
        .branch(fn.is_large, name="big")
        .branch(fn.is_even)
        .default_branch()
    )
    for name, stream in branches.items():
        stream.to(f"out-{name}", name=f"out-{name}")

    got = nodes(builder)

    assert list(branches) == ["s-big", "s-2", "s-0"]
    assert got["s-big"] == {"name": "s-big", "type": "branch", "input": "s-", "predicate": f"{F}:is_large"}
    assert got["s-0"] == {"name": "s-0", "type": "branch", "input": "s-"}


def test_a_chained_branch_is_continued_in_place_and_none_leaves_it_out() -> None:
    builder = StreamsBuilder()
    branches = (
        builder.stream("in", key_serde="string", value_serde="long", name="in")
        .split(name="s-")
        .branch(fn.is_large, name="big", chain=lambda s: s.map_values(fn.times_ten, name="big-x10"))
        .branch(fn.is_even, name="even", chain=lambda s: s.to("evens", name="evens"))
        .no_default_branch()
    )

    assert list(branches) == ["s-big"]
    assert branches["s-big"].node == "big-x10"
    assert nodes(builder)["evens"]["input"] == "s-even"


def test_a_split_takes_no_branch_after_its_default() -> None:
    branched = StreamsBuilder().stream("in", name="in").split(name="s-")
    branched.default_branch()
    with pytest.raises(TopologyError, match="already has its default branch"):
        branched.branch(fn.is_even)


def test_repartition_records_partitions_and_clears_the_re_keyed_mark() -> None:
    builder = StreamsBuilder()
    stream = (
        builder.stream("in", key_serde="string", value_serde="long", name="in")
        .select_key(fn.swap, name="k")
        .repartition(name="by-value", partitions=6)
    )
    stream.group_by_key().count(name="n", store="counts")

    got = nodes(builder)

    assert got["by-value"] == {
        "name": "by-value",
        "type": "repartition",
        "input": "k",
        "keySerde": "string",
        "valueSerde": "long",
        "partitions": 6,
        "dropNullKeys": True,
    }
    assert not stream.key_changed
    assert got["n"]["input"] == "by-value"


def test_to_accepts_a_topic_extractor_function_or_reference() -> None:
    builder = StreamsBuilder()
    stream = builder.stream("in", key_serde="string", value_serde="long", name="in")
    stream.to(fn.parity_topic, name="a")
    stream.to(topic_extractor=f"{F}:parity_topic", name="b")

    got = nodes(builder)

    assert got["a"]["topicExtractor"] == got["b"]["topicExtractor"] == f"{F}:parity_topic"
    assert "topic" not in got["a"]
    with pytest.raises(TopologyError, match="not both or neither"):
        stream.to()


def test_process_records_the_processor_class_and_its_stores() -> None:
    builder = StreamsBuilder()
    builder.add_state_store("seen", key_serde="string", value_serde="long")
    builder.stream("in", key_serde="string", value_serde="long", name="in").process(
        fn.Dedupe, stores=["seen"], name="dedupe"
    ).to("out", name="out")

    desc = builder.build()

    assert desc.node("dedupe").functions() == {"processor": f"{F}:Dedupe"}
    assert desc.node("dedupe").stores() == ["seen"]
    assert desc.store("seen").value_serde == "long"


def test_process_values_records_a_fixed_key_processor_and_a_grouping_after_it_does_not_repartition() -> None:
    builder = StreamsBuilder()
    builder.add_state_store("totals", key_serde="string", value_serde="long")
    (
        builder.stream("in", key_serde="string", value_serde="long", name="in")
        .process_values(fn.RunningTotal, stores=["totals"], name="total")
        .group_by_key(name="by-key")
        .count(name="count", store="counts")
        .to_stream(name="changes")
        .to("out", name="out")
    )

    desc = builder.build()

    assert desc.node("total").type == "process_values"
    assert desc.node("total").functions() == {"processor": f"{F}:RunningTotal"}
    assert desc.node("total").stores() == ["totals"]
    assert [n.type for n in desc.nodes if n.type == "repartition"] == []
    assert TopologyDescription.from_dict(desc.to_dict()).to_dict() == desc.to_dict()  # what `topology export` writes


def test_to_table_materializes_the_stream_and_repartitions_a_rekeyed_one_after_its_store() -> None:
    builder = StreamsBuilder()
    stream = builder.stream("in", key_serde="string", value_serde="long", name="in")
    stream.to_table(name="latest").to_stream(name="a").to("x", name="x")
    stream.map(fn.swap, name="swapped").to_table("by-value").to_stream(name="b").to("y", name="y")

    desc = builder.build()

    assert desc.node("latest").type == "to_table" and desc.node("latest").stores() == ["latest-store"]
    (rekeyed,) = [n for n in desc.nodes if n.type == "to_table" and n.name != "latest"]
    assert rekeyed.name.startswith("KSTREAM-TOTABLE-") and rekeyed.stores() == ["by-value"]
    assert desc.node("by-value").type == "repartition" and rekeyed.input == "by-value"
    assert desc.output_kinds()["latest"] == "table"
    assert TopologyDescription.from_dict(desc.to_dict()).to_dict() == desc.to_dict()  # what `topology export` writes


def test_table_materializes_its_topic_in_a_named_or_kafka_named_store() -> None:
    builder = StreamsBuilder()
    builder.table("users", key_serde="string", value_serde="json", name="users").to_stream(name="u").to("x", name="x")
    builder.table("items", value_serde="json").to_stream(name="i").to("y", name="y")

    desc = builder.build()

    assert desc.node("users").stores() == ["users-store"]
    assert [s.name for s in desc.stores] == ["users-store", "items-STATE-STORE-0000000001"]
    assert desc.store("users-store").value_serde == "json"


def test_table_group_by_always_repartitions_before_its_aggregation() -> None:
    builder = StreamsBuilder()
    (
        builder.table("users", key_serde="string", value_serde="json", name="users")
        .filter(fn.is_positive, name="f")
        .map_values(fn.upper, name="m")
        .group_by(fn.region_of, name="by-region", value_serde="string")
        .aggregate(fn.empty_list, fn.append_value, fn.remove_value, name="users-per-region", store="upr")
        .to_stream(name="changes")
        .to("out", name="out")
    )

    got = nodes(builder)

    assert got["by-region-select"] == {
        "name": "by-region-select",
        "type": "group_by",
        "input": "m",
        "selector": f"{F}:region_of",
    }
    assert got["by-region"]["type"] == "repartition"
    assert got["by-region"]["valueSerde"] == "string"
    assert got["users-per-region"]["subtractor"] == f"{F}:remove_value"
    assert builder.build().store("upr").value_serde == "json"


def test_grouped_stream_reduce_keeps_the_value_serde_and_aggregate_takes_one() -> None:
    builder = StreamsBuilder()
    grouped = builder.stream("in", key_serde="string", value_serde="long", name="in").group_by_key()
    total = grouped.reduce(fn.add, name="total")
    lists = grouped.aggregate(fn.empty_list, fn.append_value, name="lists", value_serde="json")

    desc = builder.build()

    assert total.value_serde == "long" and desc.store("total-store").value_serde == "long"
    assert lists.value_serde == "json" and desc.store("lists-store").value_serde == "json"
    assert desc.node("lists").functions() == {"aggregator": f"{F}:append_value", "initializer": f"{F}:empty_list"}


def test_stream_and_table_take_a_timestamp_extractor() -> None:
    builder = StreamsBuilder()
    builder.stream("in", value_serde="json", name="in", timestamp_extractor={"type": "field", "field": "ts"}).to(
        "out", name="out"
    )
    builder.table("t", value_serde="json", name="t", timestamp_extractor={"type": "custom", "function": fn.zero})

    desc = builder.build()

    assert desc.node("in").timestamp_extractor == TimestampExtractorSpec(type="field", field="ts")
    assert desc.node("t").timestamp_extractor == TimestampExtractorSpec(type="custom", function=f"{F}:zero")


def test_an_invalid_timestamp_extractor_is_refused_when_declared() -> None:
    with pytest.raises(TopologyError, match=r"timestamp_extractor: .*needs 'field'"):
        StreamsBuilder().stream("in", timestamp_extractor={"type": "field"})


def test_a_field_timestamp_extractor_sets_the_event_time_in_the_driver() -> None:
    from streamapp.testing import TopologyTestDriver

    builder = StreamsBuilder()
    builder.stream(
        "in", key_serde="string", value_serde="json", name="in", timestamp_extractor={"type": "field", "field": "ts"}
    ).to("out", name="out")
    with TopologyTestDriver(builder, {"application.id": "ts"}) as driver:
        driver.create_input_topic("in").pipe_input("k", {"ts": 42}, 1)
        assert driver.create_output_topic("out").read_record().timestamp_ms == 42
