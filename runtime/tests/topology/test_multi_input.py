"""Multi-input nodes (merge, joins) list their parents in ``inputs``; kinds, sub-topologies and partition
counts follow every parent."""

from __future__ import annotations

from typing import Any

import pytest
from streamapp import StreamsBuilder
from streamapp.topology import MergeNode, TopicRef, TopologyDescription, TopologyError


def merge_doc(**merge: Any) -> dict[str, Any]:
    return {
        "nodes": [
            {"name": "a", "type": "source", "topics": ["a"], "keySerde": "string", "valueSerde": "string"},
            {"name": "b", "type": "source", "topics": ["b"], "keySerde": "string", "valueSerde": "string"},
            {"name": "both", "type": "merge", "inputs": ["a", "b"], **merge},
            {
                "name": "out",
                "type": "sink",
                "input": "both",
                "topic": "out",
                "keySerde": "string",
                "valueSerde": "string",
            },
        ]
    }


def test_merge_lists_its_parents_in_order_and_round_trips() -> None:
    desc = TopologyDescription.from_dict(merge_doc())

    assert desc.node("both").inputs() == ["a", "b"]
    assert desc.children("a") == ["both"] and desc.children("b") == ["both"]
    assert TopologyDescription.from_yaml(desc.to_yaml()) == desc
    assert "{name: both, type: merge, inputs: [a, b]}" in desc.to_yaml()


def test_merge_needs_at_least_two_inputs() -> None:
    doc = merge_doc()
    doc["nodes"][2]["inputs"] = ["a"]

    with pytest.raises(TopologyError, match="node 'both': 'inputs'"):
        TopologyDescription.from_dict(doc)


def test_every_parent_of_a_merge_must_exist() -> None:
    doc = merge_doc()
    doc["nodes"][2]["inputs"] = ["a", "nope"]

    with pytest.raises(TopologyError, match="node 'both': input 'nope' does not exist"):
        TopologyDescription.from_dict(doc)


def test_merged_sources_form_one_sub_topology_reading_both_topics() -> None:
    (only,) = TopologyDescription.from_dict(merge_doc()).subtopologies()

    assert only.nodes == ["a", "b", "both", "out"]
    assert only.source_topics == [TopicRef(name="a"), TopicRef(name="b")]


def test_merge_of_topics_with_different_partition_counts_is_not_co_partitioned() -> None:
    desc = TopologyDescription.from_dict(merge_doc())

    assert desc.task_ids("app", {"a": 3, "b": 3}) == ["0_0", "0_1", "0_2"]
    with pytest.raises(TopologyError, match="sub-topology 0: source topics are not co-partitioned"):
        desc.task_ids("app", {"a": 3, "b": 2})


def test_merge_of_a_repartition_and_a_source_must_be_co_partitioned_with_the_repartition_topic() -> None:
    doc = merge_doc()
    doc["nodes"][2:2] = [
        {"name": "a-key", "type": "select_key", "input": "a", "mapper": "builtins:max"},
        {"name": "a-re", "type": "repartition", "input": "a-key", "partitions": 2},
    ]
    doc["nodes"][4]["inputs"] = ["a-re", "b"]
    desc = TopologyDescription.from_dict(doc)

    _, downstream = desc.subtopologies()
    assert set(downstream.source_topics) == {TopicRef(name="a-re-repartition", internal=True), TopicRef(name="b")}
    assert desc.task_counts({"a": 4, "b": 2}) == {0: 4, 1: 2}
    with pytest.raises(TopologyError, match="not co-partitioned: 'b' \\(4\\), 'a-re-repartition' \\(2\\)"):
        desc.task_counts({"a": 4, "b": 4})


def test_a_table_cannot_be_merged() -> None:
    doc = merge_doc()
    doc["nodes"].insert(2, {"name": "n", "type": "count", "input": "b", "store": "s"})
    doc["nodes"][3]["inputs"] = ["a", "n"]
    doc["stores"] = [{"name": "s"}]

    with pytest.raises(
        TopologyError, match="node 'both': a merge node needs a stream as input, but 'n' \\(count\\) is a"
    ):
        TopologyDescription.from_dict(doc)


def test_a_re_keyed_parent_makes_the_merged_stream_need_a_repartition_before_counting() -> None:
    doc = merge_doc()
    doc["nodes"][2:2] = [{"name": "a-key", "type": "select_key", "input": "a", "mapper": "builtins:max"}]
    doc["nodes"][3]["inputs"] = ["a-key", "b"]
    doc["nodes"].append({"name": "n", "type": "count", "input": "both", "store": "s"})
    doc["stores"] = [{"name": "s"}]

    with pytest.raises(TopologyError, match="node 'n': its input is keyed by select_key node 'a-key'"):
        TopologyDescription.from_dict(doc)


def test_output_kinds_mark_streams_tables_and_terminal_nodes() -> None:
    doc = merge_doc()
    doc["nodes"] += [
        {"name": "n", "type": "count", "input": "both", "store": "s"},
        {"name": "changes", "type": "to_stream", "input": "n"},
    ]
    doc["stores"] = [{"name": "s"}]

    kinds = TopologyDescription.from_dict(doc).output_kinds()

    assert kinds == {"a": "stream", "b": "stream", "both": "stream", "out": None, "n": "table", "changes": "stream"}
    assert MergeNode.output == "stream"


def test_dsl_merge_records_both_parents_and_keeps_the_re_keyed_mark() -> None:
    builder = StreamsBuilder()
    a = builder.stream("a", name="a").select_key("builtins:max", name="a-key")
    b = builder.stream("b", name="b")
    merged = a.merge(b, name="both")
    merged.group_by_key(name="re").count(name="n", store="s")

    desc = builder.build()

    assert desc.node("both").inputs() == ["a-key", "b"]
    assert merged.key_changed
    assert desc.node("n").inputs() == ["re"]


def test_every_reader_of_one_repartition_topic_is_in_one_sub_topology() -> None:
    doc = merge_doc()
    doc["nodes"][2:2] = [
        {"name": "a-key", "type": "select_key", "input": "a", "mapper": "builtins:max"},
        {"name": "a-re", "type": "repartition", "input": "a-key"},
        {"name": "n1", "type": "count", "input": "a-re", "store": "s1"},
        {"name": "n2", "type": "count", "input": "a-re", "store": "s2"},
    ]
    doc["stores"] = [{"name": "s1"}, {"name": "s2"}]

    subs = TopologyDescription.from_dict(doc).subtopologies()

    readers = [sub for sub in subs if TopicRef(name="a-re-repartition", internal=True) in sub.source_topics]
    assert len(readers) == 1
    assert {"n1", "n2"} <= set(readers[0].nodes)
    assert readers[0].stores == ["s1", "s2"]
