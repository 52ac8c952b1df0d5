"""GlobalKTable on both engines: the whole table (every partition) is loaded before the first stream record
is processed, updates after that reach later records, and joins need no co-partitioning."""

from __future__ import annotations

from streamapp import StreamsBuilder

from conformance.harness import Engine
from conformance.join_functions import pair, user_of

S, J = "string", "json"


def orders_with_users(join: str) -> StreamsBuilder:
    builder = StreamsBuilder()
    users = builder.global_table("users", store="users-store", key_serde=S, value_serde=J, name="users")
    orders = builder.stream("orders", key_serde=S, value_serde=J, name="orders")
    joined = (
        orders.join(users, user_of, pair, name="enrich")
        if join == "inner"
        else orders.left_join(users, user_of, pair, name="enrich")
    )
    joined.to("enriched", name="out")
    return builder


USERS = [("users", f"user-{i}", {"region": f"r{i % 3}"}, 1_000 + i) for i in range(8)]


def test_stream_global_join_sees_every_partition_of_the_global_topic(engine: Engine) -> None:
    orders = [("orders", f"order-{i}", {"user": f"user-{i % 8}"}, 2_000 + i) for i in range(16)]

    out = engine.run(
        orders_with_users("inner"),
        USERS + orders,
        ["enriched"],
        partitions={"users": 3, "orders": 2},  # not co-partitioned, and need not be
        one_at_a_time=True,
    )

    got = sorted((key, value[1]["region"]) for key, value, _ in out["enriched"])
    assert got == sorted((f"order-{i}", f"r{(i % 8) % 3}") for i in range(16))


def test_global_updates_and_deletes_reach_later_records_and_left_join_keeps_misses(engine: Engine) -> None:
    inputs = [
        ("users", "alice", {"region": "north"}, 1_000),
        ("orders", "o1", {"user": "alice"}, 2_000),
        ("orders", "o2", {"user": "bob"}, 3_000),  # no such user
        ("users", "alice", {"region": "south"}, 4_000),
        ("orders", "o3", {"user": "alice"}, 5_000),
        ("users", "alice", None, 6_000),  # tombstone
        ("orders", "o4", {"user": "alice"}, 7_000),
    ]

    inner = engine.run(orders_with_users("inner"), inputs, ["enriched"], one_at_a_time=True)["enriched"]
    left = engine.run(orders_with_users("left"), inputs, ["enriched"], one_at_a_time=True)["enriched"]

    assert inner == [
        ("o1", [{"user": "alice"}, {"region": "north"}], 2_000),
        ("o3", [{"user": "alice"}, {"region": "south"}], 5_000),
    ]
    assert left == [
        ("o1", [{"user": "alice"}, {"region": "north"}], 2_000),
        ("o2", [{"user": "bob"}, None], 3_000),
        ("o3", [{"user": "alice"}, {"region": "south"}], 5_000),
        ("o4", [{"user": "alice"}, None], 7_000),
    ]
