"""The join DSL: what each join lowers to, automatic repartitioning of re-keyed sides, default names, and
errors for impossible combinations."""

from __future__ import annotations

from typing import Any

import pytest
from streamapp import StreamsBuilder
from streamapp.dsl.windows import JoinWindows
from streamapp.topology import TopologyDescription


def pair(left: Any, right: Any) -> list[Any]:
    return [left, right]


def user_of(key: Any, value: Any) -> Any:
    return value["user"]


def users_count(builder: StreamsBuilder) -> Any:
    return (
        builder.stream("users", key_serde="string", value_serde="json", name="users")
        .group_by_key()
        .count(store="user-counts", name="user-count")
    )


def nodes(desc: TopologyDescription) -> dict[str, dict[str, Any]]:
    return {n["name"]: n for n in desc.to_dict()["nodes"]}


def test_stream_table_left_join_lowers_to_a_stream_table_join_with_its_own_store() -> None:
    builder = StreamsBuilder()
    table = users_count(builder)
    orders = builder.stream("orders", key_serde="string", value_serde="json", name="orders")
    orders.left_join(table, pair, name="enrich").to("out", name="out")
    desc = builder.build()
    join = nodes(desc)["enrich"]
    assert join == {
        "name": "enrich",
        "type": "stream_table_join",
        "inputs": ["orders", "user-count"],
        "joiner": "test_join_dsl:pair",
        "join": "left",
        "store": "enrich-store",
    }
    assert desc.store("enrich-store").value_serde == "long"


def test_a_rekeyed_stream_is_repartitioned_before_a_stream_table_join() -> None:
    builder = StreamsBuilder()
    table = users_count(builder)
    orders = builder.stream("orders", key_serde="string", value_serde="json", name="orders")
    joined = orders.select_key(user_of, name="by-user").join(table, pair, name="enrich")
    joined.to("out", name="out")
    desc = builder.build()
    assert nodes(desc)["enrich-left"]["type"] == "repartition"
    assert nodes(desc)["enrich"]["inputs"] == ["enrich-left", "user-count"]
    assert desc.repartition_topic("app", "enrich-left") == "app-enrich-left-repartition"
    assert not joined.key_changed


def test_stream_stream_join_repartitions_each_rekeyed_side_and_declares_window_stores() -> None:
    builder = StreamsBuilder()
    clicks = builder.stream("clicks", key_serde="string", value_serde="json", name="clicks")
    views = builder.stream("views", key_serde="string", value_serde="json", name="views")
    windows = JoinWindows.of_time_difference_and_grace(5_000, 1_000)
    clicks.select_key(user_of, name="clicks-by-user").outer_join(
        views.select_key(user_of, name="views-by-user"), pair, windows, name="j"
    ).to("out", name="out")
    desc = builder.build()
    join = nodes(desc)["j"]
    assert join["inputs"] == ["j-left", "j-right"]
    assert join["windows"] == {"beforeMs": 5_000, "afterMs": 5_000, "graceMs": 1_000}
    assert (join["leftStore"], join["rightStore"], join["outerStore"]) == (
        "j-this-join-store",
        "j-other-join-store",
        "j-outer-join-store",
    )
    left_store = desc.store("j-this-join-store")
    assert (left_store.type, left_store.retention_ms, left_store.retain_duplicates) == ("window", 11_000, True)


def test_inner_stream_stream_join_has_no_outer_store() -> None:
    builder = StreamsBuilder()
    a = builder.stream("a", key_serde="string", value_serde="json", name="a")
    b = builder.stream("b", key_serde="string", value_serde="json", name="b")
    a.join(b, pair, JoinWindows.of_time_difference_with_no_grace(100), name="j").to("out", name="out")
    assert "outerStore" not in nodes(builder.build())["j"]


def test_global_table_join_uses_a_key_selector_and_needs_no_repartition() -> None:
    builder = StreamsBuilder()
    users = builder.global_table("users", key_serde="string", value_serde="json", name="users")
    orders = builder.stream("orders", key_serde="string", value_serde="json", name="orders")
    orders.select_key(user_of, name="rekey").left_join(users, user_of, pair, name="enrich").to("out", name="out")
    desc = builder.build()
    assert nodes(desc)["users"] == {
        "name": "users",
        "type": "global_table",
        "topic": "users",
        "store": "users-store",
        "keySerde": "string",
        "valueSerde": "json",
    }
    assert nodes(desc)["enrich"]["inputs"] == ["rekey", "users"]
    assert nodes(desc)["enrich"]["keySelector"] == "test_join_dsl:user_of"
    assert not any(n["type"] == "repartition" for n in desc.to_dict()["nodes"])


def test_table_table_joins_keep_a_store_per_side() -> None:
    builder = StreamsBuilder()
    a = builder.stream("a", key_serde="string", value_serde="json", name="a").group_by_key().count(name="ca")
    b = builder.stream("b", key_serde="string", value_serde="json", name="b").group_by_key().count(name="cb")
    a.outer_join(b, pair, name="both", value_serde="json").to_stream(name="changes").to("out", name="out")
    join = nodes(builder.build())["both"]
    assert (join["type"], join["join"], join["leftStore"], join["rightStore"]) == (
        "table_table_join",
        "outer",
        "both-left-store",
        "both-right-store",
    )


def test_impossible_joins_are_type_errors() -> None:
    builder = StreamsBuilder()
    users = builder.global_table("user-profiles", key_serde="string", value_serde="json", name="profiles")
    orders = builder.stream("orders", key_serde="string", value_serde="json", name="orders")
    table = users_count(builder)
    with pytest.raises(TypeError, match="inner or left, not outer"):
        orders.outer_join(users, user_of, pair)
    with pytest.raises(TypeError, match="inner or left, not outer"):
        orders.outer_join(table, pair)
    with pytest.raises(TypeError, match="takes a joiner and JoinWindows"):
        orders.join(orders, pair)
    with pytest.raises(TypeError, match="a KTable joins only another KTable"):
        table.join(orders, pair)  # type: ignore[arg-type]


def test_lambdas_as_joiners_build_but_are_refused_when_exporting() -> None:
    builder = StreamsBuilder()
    table = users_count(builder)
    builder.stream("orders", key_serde="string", value_serde="json", name="orders").join(
        table, lambda v, t: v, name="enrich"
    ).to("out", name="out")
    description = builder.build()
    with pytest.raises(Exception, match="node 'enrich': joiner: a lambda"):
        description.to_yaml()


def test_a_zero_width_join_window_without_grace_still_gets_a_store_retention() -> None:
    builder = StreamsBuilder()
    a = builder.stream("a", key_serde="string", value_serde="json", name="a")
    b = builder.stream("b", key_serde="string", value_serde="json", name="b")
    a.join(b, pair, JoinWindows.of_time_difference_with_no_grace(0), name="j").to("out", name="out")
    assert builder.build().store("j-this-join-store").retention_ms == 1
