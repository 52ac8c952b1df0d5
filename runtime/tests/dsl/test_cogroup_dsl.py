"""The cogroup DSL (Kafka's ``KGroupedStream.cogroup``, KIP-150): one ``cogroup_aggregate`` per grouped stream over
one store, a ``cogroup_merge`` as the table, repartitions named as Kafka's ``CogroupedStreamAggregateBuilder`` names
them."""

from __future__ import annotations

import pytest
from conformance import cogroup_functions as fn
from streamapp import StreamsBuilder
from streamapp.dsl.windows import SessionWindows, TimeWindows
from streamapp.topology import TopologyDescription, TopologyError

F = "conformance.cogroup_functions"


def test_cogroup_records_an_aggregate_per_grouped_stream_over_one_store_and_a_merge_as_the_table() -> None:
    builder = StreamsBuilder()
    clicks = builder.stream("clicks", key_serde="string", value_serde="string", name="clicks").group_by_key()
    buys = builder.stream("buys", key_serde="string", value_serde="json", name="buys").group_by_key()
    table = clicks.cogroup(fn.count_click).cogroup(buys, fn.add_spent).aggregate(fn.no_activity, name="activity")
    table.to_stream(name="changes").to("out", name="out")

    desc = builder.build()

    agg0, agg1 = (desc.node(f"activity-cogroup-agg-{i}") for i in (0, 1))
    merge = desc.node("activity-cogroup-merge")
    assert (agg0.type, agg0.input, agg0.stores()) == ("cogroup_aggregate", "clicks", ["activity-store"])
    assert agg0.functions() == {"initializer": f"{F}:no_activity", "aggregator": f"{F}:count_click"}
    assert (agg1.input, agg1.functions()["aggregator"]) == ("buys", f"{F}:add_spent")
    assert merge.inputs() == ["activity-cogroup-agg-0", "activity-cogroup-agg-1"] and merge.stores() == [
        "activity-store"
    ]
    assert desc.output_kinds()["activity-cogroup-merge"] == "table"
    assert desc.store("activity-store").value_serde == "json"
    (sub,) = desc.subtopologies()  # both inputs in one sub-topology: one task per partition holds the store
    assert sub.stores == ["activity-store"]
    assert TopologyDescription.from_dict(desc.to_dict()).to_dict() == desc.to_dict()  # what `topology export` writes


def test_cogroup_repartitions_each_rekeyed_grouped_stream_through_its_grouping_or_the_store() -> None:
    builder = StreamsBuilder()
    orders = builder.stream("orders", key_serde="string", value_serde="json", name="orders")
    by_user = orders.group_by(fn.user_of, name="by-user", key_serde="string")
    refunds = builder.stream("refunds", key_serde="string", value_serde="json", name="refunds")
    unnamed = refunds.group_by(fn.user_of, key_serde="string")
    by_user.cogroup(fn.add_amount).cogroup(unnamed, fn.subtract_amount).aggregate(
        fn.zero, value_serde="long", store="balances"
    ).to_stream(name="changes").to("out", name="out")

    desc = builder.build()

    assert desc.node("by-user").type == "repartition" and desc.node("balances").type == "repartition"
    (merge,) = [n for n in desc.nodes if n.type == "cogroup_merge"]
    assert merge.name.startswith("COGROUPKSTREAM-MERGE-")
    aggregates = [desc.node(name) for name in merge.inputs()]
    assert [a.input for a in aggregates] == ["by-user", "balances"]
    assert all(a.name.startswith("COGROUPKSTREAM-AGGREGATE-") for a in aggregates)
    assert sorted(t.name for s in desc.subtopologies() for t in s.source_topics if t.internal) == [
        "balances-repartition",
        "by-user-repartition",
    ]


def test_two_unnamed_rekeyed_groupings_are_refused_and_a_grouped_stream_added_twice_keeps_its_place() -> None:
    builder = StreamsBuilder()
    a = builder.stream("a", key_serde="string", value_serde="json", name="a").group_by(fn.user_of, key_serde="string")
    b = builder.stream("b", key_serde="string", value_serde="json", name="b").group_by(fn.user_of, key_serde="string")
    with pytest.raises(TopologyError, match="'total-store-repartition'; name their groupings"):
        a.cogroup(fn.add_amount).cogroup(b, fn.subtract_amount).aggregate(fn.zero, name="total")

    builder = StreamsBuilder()
    c = builder.stream("c", key_serde="string", value_serde="json", name="c").group_by_key()
    d = builder.stream("d", key_serde="string", value_serde="json", name="d").group_by_key()
    cogrouped = c.cogroup(fn.add_amount).cogroup(d, fn.add_amount).cogroup(c, fn.subtract_amount)
    cogrouped.aggregate(fn.zero, name="total").to_stream(name="t").to("t", name="t-out")
    desc = builder.build()
    assert desc.node("total-cogroup-agg-0").functions()["aggregator"] == f"{F}:subtract_amount"
    assert desc.node("total-cogroup-agg-1").input == "d"
    with pytest.raises(TypeError, match="cogroup expects a KGroupedStream"):
        cogrouped.cogroup(StreamsBuilder().stream("e", name="e").group_by_key(), fn.add_amount)


def test_a_windowed_cogroup_records_a_windowed_aggregate_per_grouped_stream_over_one_window_store() -> None:
    """Kafka's ``CogroupedKStream.windowedBy``: ``KStreamWindowAggregate`` / ``KStreamSessionWindowAggregate`` per
    grouped stream over one store (retention Kafka's minimum), the merge a windowed table."""
    builder = StreamsBuilder()
    clicks = builder.stream("clicks", key_serde="string", value_serde="string", name="clicks").group_by_key()
    buys = builder.stream("buys", key_serde="string", value_serde="json", name="buys").group_by_key()
    cogrouped = clicks.cogroup(fn.count_click).cogroup(buys, fn.add_spent)
    timed = cogrouped.windowed_by(TimeWindows.of_size_and_grace(10, 5)).aggregate(fn.no_activity, name="per-window")
    timed.to_stream(name="a").to("a", name="a-out")
    sessions = cogrouped.windowed_by(SessionWindows.of_inactivity_gap_and_grace(5, 0))
    with pytest.raises(ValueError, match="a session-windowed cogroup needs a merger"):
        sessions.aggregate(fn.no_activity)
    sessions.aggregate(fn.no_activity, fn.merge_activity, store="sessions").to_stream(name="b").to("b", name="b-out")

    desc = builder.build()

    agg0, agg1 = (desc.node(f"per-window-cogroup-agg-{i}") for i in (0, 1))
    assert (agg0.type, agg0.input, agg1.input) == ("windowed_aggregate", "clicks", "buys")
    store = desc.store("per-window-store")
    assert (store.type, store.retention_ms, store.window_size_ms) == ("window", 15, 10)
    assert desc.node("per-window-cogroup-merge").inputs() == ["per-window-cogroup-agg-0", "per-window-cogroup-agg-1"]
    (merge,) = [n for n in desc.nodes if n.type == "cogroup_merge" and n.stores() == ["sessions"]]
    assert [desc.node(i).functions()["merger"] for i in merge.inputs()] == [f"{F}:merge_activity"] * 2
    assert desc.store("sessions").type == "session"
    assert [n.key_serde for n in desc.nodes if n.type == "sink"] == ["windowed:string:10", "session_windowed:string"]
    assert TopologyDescription.from_dict(desc.to_dict()).to_dict() == desc.to_dict()
