"""Joins on both engines (driver and real broker): stream-table, table-table, stream-stream windowed, and the
automatic repartition of a re-keyed side. Tables here are counts per key (a KTable from an aggregation)."""

from __future__ import annotations

from streamapp import StreamsBuilder
from streamapp.dsl.windows import JoinWindows

from conformance.harness import Engine
from conformance.join_functions import pair, user_of

S, J = "string", "json"


def logins_per_user(builder: StreamsBuilder):  # type: ignore[no-untyped-def]
    return (
        builder.stream("logins", key_serde=S, value_serde=J, name="logins")
        .group_by_key()
        .count(store="login-counts", name="login-count")
    )


def orders_with_logins(join: str) -> StreamsBuilder:
    builder = StreamsBuilder()
    logins = logins_per_user(builder)
    orders = builder.stream("orders", key_serde=S, value_serde=J, name="orders")
    joined = (
        orders.join(logins, pair, name="enrich") if join == "inner" else orders.left_join(logins, pair, name="enrich")
    )
    joined.to("enriched", name="out")
    return builder


STREAM_TABLE_INPUTS = [
    ("orders", "alice", {"o": 1}, 1_000),  # no login yet
    ("logins", "alice", {"at": "web"}, 2_000),
    ("orders", "alice", {"o": 2}, 3_000),  # joins count 1
    ("logins", "alice", {"at": "app"}, 4_000),
    ("orders", "alice", {"o": 3}, 5_000),  # joins count 2
    ("orders", "bob", {"o": 4}, 6_000),  # never logged in
]


def test_stream_table_inner_join_emits_orders_that_find_the_table_value_at_their_time(engine: Engine) -> None:
    out = engine.run(orders_with_logins("inner"), STREAM_TABLE_INPUTS, ["enriched"], one_at_a_time=True)
    assert out["enriched"] == [("alice", [{"o": 2}, 1], 3_000), ("alice", [{"o": 3}, 2], 5_000)]


def test_stream_table_left_join_keeps_orders_without_a_table_value(engine: Engine) -> None:
    out = engine.run(orders_with_logins("left"), STREAM_TABLE_INPUTS, ["enriched"], one_at_a_time=True)
    assert out["enriched"] == [
        ("alice", [{"o": 1}, None], 1_000),
        ("alice", [{"o": 2}, 1], 3_000),
        ("alice", [{"o": 3}, 2], 5_000),
        ("bob", [{"o": 4}, None], 6_000),
    ]


def test_a_rekeyed_stream_is_repartitioned_to_the_tables_partition_count_before_joining(engine: Engine) -> None:
    builder = StreamsBuilder()
    logins = logins_per_user(builder)
    orders = builder.stream("orders", key_serde=S, value_serde=J, name="orders")
    orders.select_key(user_of, name="by-user").join(logins, pair, name="enrich").to("enriched", name="out")
    users = [f"user-{i}" for i in range(6)]
    inputs = [("logins", user, {"n": i}, 1_000 + i) for i, user in enumerate(users)]
    inputs += [("orders", f"order-{i}", {"user": users[i % 6]}, 2_000 + i) for i in range(12)]

    out = engine.run(
        builder,
        inputs,
        ["enriched", "{application_id}-enrich-left-repartition"],
        partitions={"orders": 2, "logins": 3},
        one_at_a_time=True,
    )

    assert sorted((key, value[0]["user"], value[1]) for key, value, _ in out["enriched"]) == sorted(
        (users[i % 6], users[i % 6], 1) for i in range(12)
    )
    assert len(out["{application_id}-enrich-left-repartition"]) == 12


def table_table(join: str) -> StreamsBuilder:
    builder = StreamsBuilder()
    clicks = builder.stream("clicks", key_serde=S, value_serde=J, name="clicks").group_by_key().count(name="nclicks")
    views = builder.stream("views", key_serde=S, value_serde=J, name="views").group_by_key().count(name="nviews")
    joined = {"inner": clicks.join, "left": clicks.left_join, "outer": clicks.outer_join}[join](
        views, pair, name="both", value_serde=J
    )
    joined.to_stream(name="changes").to("joined", name="out")
    return builder


TABLE_INPUTS = [
    ("clicks", "k", {}, 1_000),  # clicks 1, no views
    ("views", "k", {}, 2_000),  # views 1
    ("clicks", "k", {}, 3_000),  # clicks 2
    ("views", "v", {}, 4_000),  # a key with views only
]


def test_table_table_joins_update_the_joined_row_on_either_side(engine: Engine) -> None:
    inner = engine.run(table_table("inner"), TABLE_INPUTS, ["joined"], one_at_a_time=True)["joined"]
    left = engine.run(table_table("left"), TABLE_INPUTS, ["joined"], one_at_a_time=True)["joined"]
    outer = engine.run(table_table("outer"), TABLE_INPUTS, ["joined"], one_at_a_time=True)["joined"]

    assert inner == [("k", [1, 1], 2_000), ("k", [2, 1], 3_000)]
    assert left == [("k", [1, None], 1_000), ("k", [1, 1], 2_000), ("k", [2, 1], 3_000)]
    assert outer == [("k", [1, None], 1_000), ("k", [1, 1], 2_000), ("k", [2, 1], 3_000), ("v", [None, 1], 4_000)]


def clicks_and_views(join: str) -> StreamsBuilder:
    builder = StreamsBuilder()
    clicks = builder.stream("clicks", key_serde=S, value_serde=J, name="clicks")
    views = builder.stream("views", key_serde=S, value_serde=J, name="views")
    windows = JoinWindows.of_time_difference_and_grace(10_000, 5_000)
    {"inner": clicks.join, "left": clicks.left_join, "outer": clicks.outer_join}[join](
        views, pair, windows, name="j"
    ).to("joined", name="out")
    return builder


WINDOW_INPUTS = [
    ("clicks", "a", "click-a", 100_000),
    ("views", "a", "view-a", 108_000),  # within 10 s: joins
    ("views", "b", "view-b", 110_000),  # no click for b
    ("clicks", "c", "click-c", 111_000),  # no view for c
    ("views", "c", "view-c-late", 99_000),  # out of order, its window still open; 12 s before the click: no join
    ("views", "z", "tick", 130_000),  # stream time passes every window + grace
]


def test_stream_stream_joins_emit_pairs_and_after_the_grace_period_the_unmatched_records(engine: Engine) -> None:
    results = {
        join: engine.run(clicks_and_views(join), WINDOW_INPUTS, ["joined"], one_at_a_time=True)["joined"]
        for join in ("inner", "left", "outer")
    }

    assert results["inner"] == [("a", ["click-a", "view-a"], 108_000)]
    assert results["left"] == [("a", ["click-a", "view-a"], 108_000), ("c", ["click-c", None], 111_000)]
    assert results["outer"] == [
        ("a", ["click-a", "view-a"], 108_000),
        ("c", [None, "view-c-late"], 99_000),
        ("b", [None, "view-b"], 110_000),
        ("c", ["click-c", None], 111_000),
    ]


def orders_with_user_table(join: str) -> StreamsBuilder:
    builder = StreamsBuilder()
    users = builder.table("users", key_serde=S, value_serde=J, store="users-store", name="users")
    orders = builder.stream("orders", key_serde=S, value_serde=J, name="orders")
    joined = (
        orders.join(users, pair, name="enrich") if join == "inner" else orders.left_join(users, pair, name="enrich")
    )
    joined.to("enriched", name="out")
    return builder


def test_stream_table_join_with_a_source_table_follows_updates_and_tombstones(engine: Engine) -> None:
    inputs = [
        ("users", "alice", {"region": "north"}, 1_000),
        ("orders", "alice", {"o": 1}, 2_000),
        ("users", "alice", {"region": "south"}, 3_000),
        ("orders", "alice", {"o": 2}, 4_000),
        ("users", "alice", None, 5_000),  # deleted
        ("orders", "alice", {"o": 3}, 6_000),
    ]

    inner = engine.run(orders_with_user_table("inner"), inputs, ["enriched"], one_at_a_time=True)["enriched"]
    left = engine.run(orders_with_user_table("left"), inputs, ["enriched"], one_at_a_time=True)["enriched"]

    assert inner == [
        ("alice", [{"o": 1}, {"region": "north"}], 2_000),
        ("alice", [{"o": 2}, {"region": "south"}], 4_000),
    ]
    assert left == [*inner, ("alice", [{"o": 3}, None], 6_000)]


def test_table_table_outer_join_of_source_tables_retracts_deleted_rows(engine: Engine) -> None:
    builder = StreamsBuilder()
    users = builder.table("users", key_serde=S, value_serde=J, store="users-store", name="users")
    emails = builder.table("emails", key_serde=S, value_serde=J, store="emails-store", name="emails")
    users.outer_join(emails, pair, name="contacts").to_stream(name="changes").to("contacts", name="out")
    inputs = [
        ("users", "alice", {"region": "north"}, 1_000),
        ("emails", "alice", "a@x", 2_000),
        ("users", "alice", None, 3_000),  # alice's user row goes, her email stays
        ("emails", "alice", None, 4_000),  # now the joined row goes too
    ]

    out = engine.run(builder, inputs, ["contacts"], one_at_a_time=True)

    assert out["contacts"] == [
        ("alice", [{"region": "north"}, None], 1_000),
        ("alice", [{"region": "north"}, "a@x"], 2_000),
        ("alice", [None, "a@x"], 3_000),
        ("alice", None, 4_000),
    ]


def test_an_unmatched_record_comes_out_once_stream_time_is_past_its_close_and_a_later_partner_still_joins(
    engine: Engine,
) -> None:
    inputs = [
        ("clicks", "a", "click-a", 100_000),  # closes at 100 000 + 10 000 + 5 000 = 115 000
        ("clicks", "b", "click-b", 100_500),  # closes at 115 500
        ("views", "z", "tick", 115_000),  # stream time at a's close, not past it: a still waits
        ("views", "a", "view-a", 105_000),  # within grace: joins, so a never comes out unmatched
        ("views", "z", "tick", 115_501),  # past b's close: b comes out unmatched
        ("views", "b", "view-b", 106_000),  # beyond b's grace, b still in the window store: joins too
    ]

    out = engine.run(clicks_and_views("left"), inputs, ["joined"], one_at_a_time=True)

    assert out["joined"] == [
        ("a", ["click-a", "view-a"], 105_000),
        ("b", ["click-b", None], 100_500),
        ("b", ["click-b", "view-b"], 106_000),
    ]
