"""Join and GlobalKTable nodes in the topology description: document form, kinds, stores, co-partitioning
(keys and partition counts) and global tables outside sub-topologies."""

from __future__ import annotations

from typing import Any

import pytest
from streamapp.topology import TopologyDescription, TopologyError

S, J = "string", "json"


def source(name: str, topic: str) -> dict[str, Any]:
    return {"name": name, "type": "source", "topics": [topic], "keySerde": S, "valueSerde": J}


def kv(name: str, value_serde: str = J) -> dict[str, Any]:
    return {"name": name, "type": "key_value", "keySerde": S, "valueSerde": value_serde}


def window(name: str, retention: int = 30, duplicates: bool = True) -> dict[str, Any]:
    return {
        "name": name,
        "type": "window",
        "keySerde": S,
        "valueSerde": J,
        "retentionMs": retention,
        "windowSizeMs": 20,
        "retainDuplicates": duplicates,
    }


def users_table() -> list[dict[str, Any]]:
    """A table keyed by user: the count of user events (a KTable without the ``table`` source node)."""
    return [source("users", "users"), {"name": "user-count", "type": "count", "input": "users", "store": "uc"}]


def stream_table_doc(stream_nodes: list[dict[str, Any]], stream: str = "orders") -> dict[str, Any]:
    return {
        "nodes": [
            *stream_nodes,
            *users_table(),
            {
                "name": "enrich",
                "type": "stream_table_join",
                "inputs": [stream, "user-count"],
                "joiner": "m:pair",
                "join": "left",
                "store": "enrich-store",
            },
            {"name": "out", "type": "sink", "input": "enrich", "topic": "enriched", "keySerde": S, "valueSerde": J},
        ],
        "stores": [kv("uc", "long"), kv("enrich-store", "long")],
    }


def global_doc() -> dict[str, Any]:
    return {
        "nodes": [
            source("orders", "orders"),
            {
                "name": "users",
                "type": "global_table",
                "topic": "users",
                "store": "users-store",
                "keySerde": S,
                "valueSerde": J,
            },
            {
                "name": "enrich",
                "type": "stream_global_join",
                "inputs": ["orders", "users"],
                "keySelector": "m:user_of",
                "joiner": "m:pair",
            },
            {"name": "out", "type": "sink", "input": "enrich", "topic": "enriched", "keySerde": S, "valueSerde": J},
        ],
        "stores": [kv("users-store")],
    }


def stream_stream_doc(join: str = "outer", **overrides: Any) -> dict[str, Any]:
    node: dict[str, Any] = {
        "name": "j",
        "type": "stream_stream_join",
        "inputs": ["clicks", "views"],
        "joiner": "m:pair",
        "join": join,
        "windows": {"beforeMs": 10, "afterMs": 10, "graceMs": 10},
        "leftStore": "j-left",
        "rightStore": "j-right",
    }
    stores = [window("j-left"), window("j-right")]
    if join != "inner":
        node["outerStore"] = "j-outer"
        stores.append(kv("j-outer", "bytes"))
    node.update(overrides)
    return {
        "nodes": [
            source("clicks", "clicks"),
            source("views", "views"),
            node,
            {"name": "out", "type": "sink", "input": "j", "topic": "joined", "keySerde": S, "valueSerde": J},
        ],
        "stores": stores,
    }


def test_every_join_node_round_trips_through_the_document_form() -> None:
    for doc in (stream_table_doc([source("orders", "orders")]), global_doc(), stream_stream_doc()):
        desc = TopologyDescription.from_dict(doc)
        assert TopologyDescription.from_yaml(desc.to_yaml()) == desc
        assert desc.to_dict()["nodes"][-2]["inputs"] == doc["nodes"][-2]["inputs"]


def test_a_stream_table_join_joins_the_table_side_in_the_same_sub_topology() -> None:
    desc = TopologyDescription.from_dict(stream_table_doc([source("orders", "orders")]))
    [sub] = desc.subtopologies()
    assert {ref.name for ref in sub.source_topics} == {"orders", "users"}
    assert "enrich-store" in sub.stores


def test_a_stream_table_join_needs_a_table_on_the_right() -> None:
    doc = stream_table_doc([source("orders", "orders")])
    doc["nodes"][-2]["inputs"] = ["user-count", "orders"]
    with pytest.raises(TopologyError, match="node 'enrich': a stream_table_join node needs a stream as input"):
        TopologyDescription.from_dict(doc)


def test_a_join_after_a_key_change_without_repartition_is_refused() -> None:
    rekeyed = [
        source("orders", "orders"),
        {"name": "by-user", "type": "select_key", "input": "orders", "mapper": "m:user_of"},
    ]
    with pytest.raises(TopologyError, match="node 'enrich': its input is keyed by select_key node 'by-user'"):
        TopologyDescription.from_dict(stream_table_doc(rekeyed, stream="by-user"))


def test_join_sides_with_different_partition_counts_name_both_topics_and_counts() -> None:
    desc = TopologyDescription.from_dict(stream_table_doc([source("orders", "orders")]))
    with pytest.raises(TopologyError, match=r"not co-partitioned: 'orders' \(3\), 'users' \(6\)"):
        desc.internal_topics("app", {"orders": 3, "users": 6})
    with pytest.raises(TopologyError, match="not co-partitioned"):
        desc.task_ids("app", {"orders": 3, "users": 6})


def test_a_repartition_before_a_join_gets_the_partition_count_of_the_other_side() -> None:
    rekeyed = [
        source("orders", "orders"),
        {"name": "by-user", "type": "select_key", "input": "orders", "mapper": "m:user_of"},
        {"name": "enrich-left", "type": "repartition", "input": "by-user", "keySerde": S, "valueSerde": J},
    ]
    desc = TopologyDescription.from_dict(stream_table_doc(rekeyed, stream="enrich-left"))
    topics = {t.name: t.partitions for t in desc.internal_topics("app", {"orders": 3, "users": 6})}
    assert topics["app-enrich-left-repartition"] == 6
    assert topics["app-enrich-store-changelog"] == 6
    assert desc.task_counts({"orders": 3, "users": 6}) == {0: 3, 1: 6}


def test_an_explicit_repartition_count_that_differs_from_the_other_side_is_refused() -> None:
    rekeyed = [
        source("orders", "orders"),
        {"name": "by-user", "type": "select_key", "input": "orders", "mapper": "m:user_of"},
        {
            "name": "enrich-left",
            "type": "repartition",
            "input": "by-user",
            "keySerde": S,
            "valueSerde": J,
            "partitions": 4,
        },
    ]
    desc = TopologyDescription.from_dict(stream_table_doc(rekeyed, stream="enrich-left"))
    with pytest.raises(TopologyError, match=r"'enrich-left-repartition' \(4\), 'users' \(6\)"):
        desc.internal_topics("app", {"orders": 3, "users": 6})


def test_a_global_table_belongs_to_no_sub_topology_and_has_no_changelog() -> None:
    desc = TopologyDescription.from_dict(global_doc())
    [sub] = desc.subtopologies()
    assert "users" not in sub.nodes
    assert [ref.name for ref in sub.source_topics] == ["orders"]
    assert sub.stores == []
    # the global topic's partition count is irrelevant: every worker reads all of it
    assert desc.internal_topics("app", {"orders": 3}) == []
    assert desc.task_ids("app", {"orders": 3}) == ["0_0", "0_1", "0_2"]


def test_only_a_stream_global_join_reads_a_global_table() -> None:
    doc = global_doc()
    doc["nodes"][-1]["input"] = "users"
    with pytest.raises(TopologyError, match="node 'out': a sink node needs a stream as input, but 'users'"):
        TopologyDescription.from_dict(doc)


def test_a_global_table_topic_read_by_a_source_too_is_refused() -> None:
    doc = global_doc()
    doc["nodes"][0]["topics"] = ["users"]
    with pytest.raises(TopologyError, match="topic 'users' is already read by source node 'orders'"):
        TopologyDescription.from_dict(doc)


def test_a_global_store_must_match_the_topic_serdes() -> None:
    doc = global_doc()
    doc["stores"] = [kv("users-store", "string")]
    with pytest.raises(TopologyError, match="store 'users-store' has serdes string/string"):
        TopologyDescription.from_dict(doc)


def test_stream_stream_join_stores_must_be_duplicate_keeping_window_stores_with_enough_retention() -> None:
    assert TopologyDescription.from_dict(stream_stream_doc()).node("j").stores() == ["j-left", "j-right", "j-outer"]
    short = stream_stream_doc()
    short["stores"][0] = window("j-left", retention=29)
    with pytest.raises(TopologyError, match="keeps 29 ms but the join needs at least"):
        TopologyDescription.from_dict(short)
    unique = stream_stream_doc()
    unique["stores"][1] = window("j-right", duplicates=False)
    with pytest.raises(TopologyError, match="'j-right' must set retainDuplicates"):
        TopologyDescription.from_dict(unique)
    key_value = stream_stream_doc()
    key_value["stores"][0] = kv("j-left")
    with pytest.raises(TopologyError, match="store 'j-left' must be a window store"):
        TopologyDescription.from_dict(key_value)


def test_outer_store_is_required_exactly_for_left_and_outer_joins() -> None:
    with pytest.raises(TopologyError, match="a left join needs an outerStore"):
        TopologyDescription.from_dict(stream_stream_doc("left", outerStore=None))
    with pytest.raises(TopologyError, match="an inner join has no outerStore"):
        TopologyDescription.from_dict(stream_stream_doc("inner", outerStore="j-left"))


def test_a_join_store_cannot_be_shared_with_another_node() -> None:
    doc = stream_table_doc([source("orders", "orders")])
    doc["nodes"][-2]["store"] = "uc"
    doc["stores"] = [kv("uc", "long")]
    with pytest.raises(TopologyError, match="store 'uc' is also used by node 'user-count'"):
        TopologyDescription.from_dict(doc)


def test_global_table_topics_count_as_external_sources_the_application_waits_for() -> None:
    desc = TopologyDescription.from_dict(global_doc())
    assert desc.external_source_topics() == ["orders", "users"]


def test_describe_shows_global_tables_outside_sub_topologies_without_changelogs() -> None:
    from streamapp.topology.render import describe

    text = describe(TopologyDescription.from_dict(global_doc()), "app", {"orders": 2, "users": 1})
    assert "   Global table: users (topic: users, store: users-store) --> enrich" in text
    assert "users-store (key_value, string -> json), global" in text
    assert "changelog" not in text.split("Internal topics:")[1]
