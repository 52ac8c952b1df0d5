"""Validation of the issue-3 KStream / KTable node types: kinds, split/branch shape, sink topics, table
aggregations' fields, and the repartition a grouped table needs."""

from __future__ import annotations

from typing import Any

import pytest
from streamapp.topology import TopologyDescription, TopologyError

F = "conformance.dsl_functions"


def src(name: str = "in", topic: str = "in") -> dict[str, Any]:
    return {"name": name, "type": "source", "topics": [topic], "keySerde": "string", "valueSerde": "long"}


def table(name: str = "t", topic: str = "t", store: str = "t-store") -> dict[str, Any]:
    return {
        "name": name,
        "type": "table",
        "topics": [topic],
        "store": store,
        "keySerde": "string",
        "valueSerde": "json",
    }


def sink(input_: str, name: str = "out", **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": "sink", "input": input_, "keySerde": "string", "valueSerde": "long", **extra}


def doc(*nodes: dict[str, Any], stores: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"nodes": list(nodes), "stores": [{"name": s, "keySerde": "string", "valueSerde": "json"} for s in stores]}


def grouped_table_doc(**aggregation: Any) -> dict[str, Any]:
    return doc(
        table(),
        {"name": "by-region", "type": "group_by", "input": "t", "selector": f"{F}:region_of"},
        {"name": "re", "type": "repartition", "input": "by-region", "keySerde": "string", "valueSerde": "string"},
        {"name": "agg", "input": "re", "store": "agg-store", **aggregation},
        {"name": "changes", "type": "to_stream", "input": "agg"},
        sink("changes", topic="out"),
        stores=("t-store", "agg-store"),
    )


def test_every_stream_operator_round_trips_through_yaml() -> None:
    desc = TopologyDescription.from_dict(
        doc(
            src(),
            {"name": "odd", "type": "filter_not", "input": "in", "predicate": f"{F}:is_even"},
            {"name": "swapped", "type": "map", "input": "odd", "mapper": f"{F}:swap"},
            {"name": "fm", "type": "flat_map", "input": "swapped", "mapper": f"{F}:words"},
            {"name": "fmv", "type": "flat_map_values", "input": "fm", "mapper": f"{F}:split_words"},
            {"name": "look", "type": "peek", "input": "fmv", "action": f"{F}:is_even"},
            {"name": "each", "type": "foreach", "input": "look", "action": f"{F}:is_even"},
            {"name": "s", "type": "split", "input": "look"},
            {"name": "s-big", "type": "branch", "input": "s", "predicate": f"{F}:is_large"},
            {"name": "s-rest", "type": "branch", "input": "s"},
            {"name": "p", "type": "process", "input": "s-big", "processor": f"{F}:Dedupe", "stores": ["seen"]},
            sink("p", name="out1", topic="x"),
            sink("s-rest", name="out2", topicExtractor=f"{F}:parity_topic"),
            stores=("seen",),
        )
    )

    assert TopologyDescription.from_yaml(desc.to_yaml()) == desc
    assert desc.node("p").stores() == ["seen"]
    assert desc.sink_topics() == ["x"]
    assert desc.node("out2").functions() == {"topic_extractor": f"{F}:parity_topic"}


def test_filter_and_map_values_of_a_table_are_tables_and_to_stream_turns_them_into_a_stream() -> None:
    desc = TopologyDescription.from_dict(
        doc(
            table(),
            {"name": "f", "type": "filter", "input": "t", "predicate": f"{F}:is_positive"},
            {"name": "m", "type": "map_values", "input": "f", "mapper": f"{F}:times_ten"},
            {"name": "changes", "type": "to_stream", "input": "m"},
            sink("changes", topic="out"),
            stores=("t-store",),
        )
    )

    kinds = desc.output_kinds()
    assert (kinds["t"], kinds["f"], kinds["m"], kinds["changes"]) == ("table", "table", "table", "stream")
    assert desc.external_source_topics() == ["t"]
    assert desc.subtopologies()[0].stores == ["t-store"]


def test_a_table_source_reads_exactly_one_topic() -> None:
    bad = table()
    bad["topics"] = ["a", "b"]
    with pytest.raises(TopologyError, match="node 't': 'topics'"):
        TopologyDescription.from_dict(doc(bad, stores=("t-store",)))


@pytest.mark.parametrize(
    ("aggregation", "message"),
    [
        ({"type": "count"}, None),
        ({"type": "reduce", "adder": f"{F}:add", "subtractor": f"{F}:subtract"}, None),
        (
            {
                "type": "aggregate",
                "initializer": f"{F}:zero",
                "adder": f"{F}:add_amount",
                "subtractor": f"{F}:sub_amount",
            },
            None,
        ),
        ({"type": "reduce", "adder": f"{F}:add"}, "a reduce of a grouped table needs 'subtractor'"),
        ({"type": "reduce", "reducer": f"{F}:add"}, "a reduce of a grouped table needs 'adder' and 'subtractor'"),
        (
            {"type": "aggregate", "initializer": f"{F}:zero", "aggregator": f"{F}:add_amount"},
            "a aggregate of a grouped table needs 'adder' and 'subtractor'",
        ),
    ],
    ids=[
        "count",
        "reduce",
        "aggregate",
        "reduce_without_subtractor",
        "reduce_with_reducer",
        "aggregate_with_aggregator",
    ],
)
def test_table_aggregations_need_adder_and_subtractor(aggregation: dict[str, Any], message: str | None) -> None:
    if message is None:
        desc = TopologyDescription.from_dict(grouped_table_doc(**aggregation))
        assert desc.output_kinds()["re"] == "grouped_table"
        assert desc.output_kinds()["agg"] == "table"
    else:
        with pytest.raises(TopologyError, match=f"node 'agg': {message}"):
            TopologyDescription.from_dict(grouped_table_doc(**aggregation))


def test_stream_reduce_takes_a_reducer_not_an_adder() -> None:
    base = doc(
        src(),
        {"name": "agg", "type": "reduce", "input": "in", "store": "s", "adder": f"{F}:add", "subtractor": f"{F}:add"},
        stores=("s",),
    )
    with pytest.raises(TopologyError, match="node 'agg': a reduce of a grouped stream needs 'reducer'"):
        TopologyDescription.from_dict(base)


def test_a_grouped_table_must_be_repartitioned_before_its_aggregation() -> None:
    d = grouped_table_doc(type="count")
    d["nodes"].pop(2)
    d["nodes"][2]["input"] = "by-region"
    with pytest.raises(TopologyError, match="node 'agg': its input is keyed by group_by node 'by-region'"):
        TopologyDescription.from_dict(d)


def test_a_grouped_table_is_not_a_stream() -> None:
    d = grouped_table_doc(type="count")
    d["nodes"].append({"name": "oops", "type": "filter", "input": "re", "predicate": f"{F}:is_even"})
    with pytest.raises(TopologyError, match="node 'oops': a filter node needs a stream or a table as input, but 're'"):
        TopologyDescription.from_dict(d)


def test_group_by_needs_a_table() -> None:
    d = doc(src(), {"name": "g", "type": "group_by", "input": "in", "selector": f"{F}:region_of"})
    with pytest.raises(TopologyError, match="node 'g': a group_by node needs a table as input, but 'in'"):
        TopologyDescription.from_dict(d)


def split_doc(*branches: dict[str, Any]) -> dict[str, Any]:
    return doc(src(), {"name": "s", "type": "split", "input": "in"}, *branches)


def test_every_child_of_a_split_must_be_a_branch() -> None:
    d = split_doc({"name": "f", "type": "filter", "input": "s", "predicate": f"{F}:is_even"})
    with pytest.raises(TopologyError, match="node 's': child 'f' is a filter node; every child of a split"):
        TopologyDescription.from_dict(d)


def test_the_default_branch_is_unique_and_last() -> None:
    first_default = split_doc(
        {"name": "b0", "type": "branch", "input": "s"},
        {"name": "b1", "type": "branch", "input": "s", "predicate": f"{F}:is_even"},
    )
    with pytest.raises(TopologyError, match="default branch 'b0' \\(no predicate\\) must be the last branch"):
        TopologyDescription.from_dict(first_default)
    two_defaults = split_doc(
        {"name": "b0", "type": "branch", "input": "s"}, {"name": "b1", "type": "branch", "input": "s"}
    )
    with pytest.raises(TopologyError, match="only one default branch"):
        TopologyDescription.from_dict(two_defaults)


def test_a_branch_reads_a_split() -> None:
    d = doc(src(), {"name": "b", "type": "branch", "input": "in", "predicate": f"{F}:is_even"})
    with pytest.raises(TopologyError, match="node 'b': a branch node's input must be a split node, but 'in'"):
        TopologyDescription.from_dict(d)


@pytest.mark.parametrize(
    "extra",
    [{}, {"topic": "x", "topicExtractor": f"{F}:parity_topic"}],
    ids=["neither", "both"],
)
def test_a_sink_has_exactly_one_of_topic_and_topic_extractor(extra: dict[str, Any]) -> None:
    with pytest.raises(TopologyError, match=r"node 'out': .*set exactly one of 'topic' and 'topicExtractor'"):
        TopologyDescription.from_dict(doc(src(), sink("in", **extra)))


def test_foreach_has_no_output() -> None:
    d = doc(
        src(),
        {"name": "each", "type": "foreach", "input": "in", "action": f"{F}:is_even"},
        {"name": "after", "type": "peek", "input": "each", "action": f"{F}:is_even"},
    )
    with pytest.raises(TopologyError, match="node 'after': input 'each' is a foreach, which has no output"):
        TopologyDescription.from_dict(d)


def stateful_after(step: dict[str, Any], stateful: dict[str, Any]) -> dict[str, Any]:
    """A description ``in`` -> ``step`` -> ``stateful``, whose node uses store ``s``."""
    return doc(src(), {"input": "in", **step}, {"input": step["name"], "store": "s", **stateful}, stores=("s",))


def test_a_process_node_re_keys_and_its_stores_must_be_declared() -> None:
    undeclared = doc(
        src(), {"name": "p", "type": "process", "input": "in", "processor": f"{F}:Dedupe", "stores": ["x"]}
    )
    with pytest.raises(TopologyError, match="node 'p': store 'x' is not declared in stores"):
        TopologyDescription.from_dict(undeclared)
    counted = stateful_after(
        {"name": "p", "type": "process", "processor": f"{F}:KeyByValue"}, {"name": "n", "type": "count"}
    )
    with pytest.raises(TopologyError, match="node 'n': its input is keyed by process node 'p'"):
        TopologyDescription.from_dict(counted)


def test_a_to_table_node_needs_its_input_partitioned_by_its_key_and_a_process_values_node_keeps_it() -> None:
    """Kafka's ``KStream#toTable`` repartitions a re-keyed stream first (a table must see every record of a key in
    one task); ``KStream#processValues`` (KIP-820) keeps keys, so a table right after it is valid."""
    table = {"name": "t", "type": "to_table"}
    rekeyed = stateful_after({"name": "m", "type": "map", "mapper": f"{F}:swap"}, table)
    with pytest.raises(TopologyError, match="node 't': its input is keyed by map node 'm'"):
        TopologyDescription.from_dict(rekeyed)
    kept = stateful_after({"name": "p", "type": "process_values", "processor": f"{F}:RunningTotal"}, table)
    assert TopologyDescription.from_dict(kept).output_kinds()["t"] == "table"


def test_a_cogroup_merge_reads_only_cogroup_aggregates_of_its_own_key_value_store() -> None:
    """Kafka's ``CogroupedStreamAggregateBuilder``: the ``KTablePassThrough``'s parents are the cogroup's
    ``KStreamAggregate``s, which share its store."""
    doc: dict[str, Any] = {
        "nodes": [
            {"name": "a", "type": "source", "topics": ["a"], "keySerde": "string", "valueSerde": "json"},
            {"name": "b", "type": "source", "topics": ["b"], "keySerde": "string", "valueSerde": "json"},
            {
                "name": "agg-a",
                "type": "cogroup_aggregate",
                "input": "a",
                "store": "s",
                "initializer": "m:i",
                "aggregator": "m:a",
            },
            {
                "name": "agg-b",
                "type": "cogroup_aggregate",
                "input": "b",
                "store": "s",
                "initializer": "m:i",
                "aggregator": "m:b",
            },
            {"name": "merge", "type": "cogroup_merge", "inputs": ["agg-a", "agg-b"], "store": "s"},
        ],
        "stores": [{"name": "s", "type": "key_value", "keySerde": "string", "valueSerde": "json"}],
    }
    assert TopologyDescription.from_dict(doc).output_kinds()["merge"] == "table"
    other = {**doc, "stores": [*doc["stores"], {"name": "t", "type": "key_value"}]}
    other["nodes"] = [*doc["nodes"][:3], {**doc["nodes"][3], "store": "t"}, doc["nodes"][4]]
    with pytest.raises(TopologyError, match="'merge': input 'agg-b' must be a cogroup_aggregate node of store 's'"):
        TopologyDescription.from_dict(other)
    windowed = {**doc, "stores": [{"name": "s", "type": "window", "retentionMs": 10, "windowSizeMs": 10}]}
    windows = {"type": "tumbling", "sizeMs": 10}
    windowed["nodes"] = [
        *doc["nodes"][:2],
        *({**node, "type": "windowed_aggregate", "windows": windows} for node in doc["nodes"][2:4]),
        doc["nodes"][4],
    ]
    assert TopologyDescription.from_dict(windowed).output_kinds()["merge"] == "table"
    closing = {
        **windowed,
        "nodes": [*windowed["nodes"][:2], {**windowed["nodes"][2], "emitStrategy": "on_window_close"}],
    }
    closing["nodes"] += windowed["nodes"][3:]
    with pytest.raises(TopologyError, match="input 'agg-a': a cogroup takes no emitStrategy"):
        TopologyDescription.from_dict(closing)
    windowed["nodes"][3] = {**windowed["nodes"][3], "windows": {"type": "tumbling", "sizeMs": 20}}
    windowed["stores"] = [*windowed["stores"], {"name": "t", "type": "window", "retentionMs": 20, "windowSizeMs": 20}]
    windowed["nodes"][3]["store"] = "t"
    with pytest.raises(TopologyError, match="input 'agg-b' must be a windowed_aggregate node of store 's'"):
        TopologyDescription.from_dict(windowed)
