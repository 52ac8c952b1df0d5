"""Result timestamps of KTables and aggregations on out-of-order input, on both engines (KIP-258 timestamped
key-value stores).

Kafka's rule: an aggregate's timestamp is the later of the input record's and the current aggregate's
(``KStreamReduce`` / ``KStreamAggregate``; ``KTableAggregate`` when the aggregate is subtracted from or added
to), a table-table join result's the later of the update's and the other side's value's
(``KTableKTable{Inner,Left,Outer}Join``), and a table read from a topic keeps each record's own timestamp
(``KTableSource``). The changelog carries the same timestamps as the record timestamps of its values.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from streamapp import StreamsBuilder

from conformance import dsl_functions as fn
from conformance.harness import Engine, OutputRecord
from conformance.join_functions import pair
from conformance.test_aggregations import sums
from conformance.test_ktable import users_per_region

S, L, J = "string", "long", "json"


def latest_per_key(records: Sequence[OutputRecord]) -> dict[object, tuple[object, int]]:
    """``{key: (value, timestamp)}`` of each key's last record (a changelog's order across keys is the
    write buffer's, not the input's)."""
    return {key: (value, timestamp) for key, value, timestamp in records}


LATE_AMOUNTS = [
    ("amounts", "a", 1, 5_000),
    ("amounts", "a", 2, 3_000),  # older than the aggregate: the sum keeps 5,000
    ("amounts", "b", 4, 2_000),
    ("amounts", "a", 3, 7_000),  # newer: the sum moves to 7,000
    ("amounts", "a", 4, 6_000),
]


def test_an_out_of_order_reduce_result_keeps_the_later_of_the_record_and_aggregate_timestamps(engine: Engine) -> None:
    out = engine.run(sums(), LATE_AMOUNTS, ["sums", "{application_id}-sums-changelog"])

    assert out["sums"] == [("a", 1, 5_000), ("a", 3, 5_000), ("b", 4, 2_000), ("a", 6, 7_000), ("a", 10, 7_000)]
    assert latest_per_key(out["{application_id}-sums-changelog"]) == {"a": (10, 7_000), "b": (4, 2_000)}


def test_an_out_of_order_count_forwards_and_logs_the_latest_timestamp_seen_per_key(engine: Engine) -> None:
    builder = StreamsBuilder()
    (
        builder.stream("events", key_serde=S, value_serde=S, name="events")
        .group_by_key()
        .count(name="count", store="counts")
        .to_stream(name="changes")
        .to("counts", name="out", value_serde=L)
    )
    inputs = [("events", "k", "x", 9_000), ("events", "k", "x", 1_000), ("events", "k", "x", 2_000)]

    out = engine.run(builder, inputs, ["counts", "{application_id}-counts-changelog"])

    assert out["counts"] == [("k", 1, 9_000), ("k", 2, 9_000), ("k", 3, 9_000)]
    assert latest_per_key(out["{application_id}-counts-changelog"]) == {"k": (3, 9_000)}


OUT_OF_ORDER_USERS = [
    ("users", "alice", {"region": "eu"}, 5_000),
    ("users", "bob", {"region": "eu"}, 2_000),  # older than eu's count: stays at 5,000
    ("users", "carol", {"region": "us"}, 1_000),
    ("users", "alice", {"region": "us"}, 3_000),  # moves: eu -1 at max(3,000, 5,000), us +1 at 3,000
    ("users", "bob", None, 4_000),  # deleted: eu -1 at max(4,000, 5,000)
]


def test_a_grouped_table_count_on_out_of_order_rows_keeps_the_later_timestamp(engine: Engine) -> None:
    out = engine.run(users_per_region(), OUT_OF_ORDER_USERS, ["users-per-region"], compare=True)

    assert out["users-per-region"] == [
        ("eu", 1, 5_000),
        ("eu", 2, 5_000),
        ("us", 1, 1_000),
        ("eu", 1, 5_000),
        ("us", 2, 3_000),
        ("eu", 0, 5_000),
    ]


def test_a_table_read_from_a_topic_forwards_each_rows_own_timestamp_even_when_older(engine: Engine) -> None:
    builder = StreamsBuilder()
    (
        builder.table("prices", key_serde=S, value_serde=L, store="prices-store", name="prices")
        .to_stream(name="changes")
        .to("price-changes", name="out")
    )
    inputs = [("prices", "apple", 3, 5_000), ("prices", "apple", 4, 1_000)]

    out = engine.run(builder, inputs, ["price-changes", "{application_id}-prices-store-changelog"])

    assert out["price-changes"] == [("apple", 3, 5_000), ("apple", 4, 1_000)]
    assert latest_per_key(out["{application_id}-prices-store-changelog"]) == {"apple": (4, 1_000)}


def latest_values_join(join: str) -> StreamsBuilder:
    builder = StreamsBuilder()
    left = builder.table("left", key_serde=S, value_serde=L, name="left")
    right = builder.table("right", key_serde=S, value_serde=L, name="right")
    joined = {"inner": left.join, "left": left.left_join, "outer": left.outer_join}[join](
        right, pair, name="both", value_serde=J
    )
    joined.to_stream(name="changes").to("joined", name="out")
    return builder


LATE_TABLE_INPUTS = [
    ("left", "k", 1, 5_000),  # no right value: left/outer results at the update's 5,000
    ("right", "k", 10, 2_000),  # joined with a newer left value: max = 5,000
    ("left", "k", 2, 3_000),  # joined with the right value of 2,000: max = 3,000
    ("right", "k", 20, 8_000),  # the newer update wins: 8,000
]


def test_table_table_join_results_carry_the_later_of_both_sides_timestamps(engine: Engine) -> None:
    inner, left, outer = (
        engine.run(latest_values_join(join), LATE_TABLE_INPUTS, ["joined"], one_at_a_time=True, compare=True)["joined"]
        for join in ("inner", "left", "outer")
    )

    assert inner == [("k", [1, 10], 5_000), ("k", [2, 10], 3_000), ("k", [2, 20], 8_000)]
    assert left == [("k", [1, None], 5_000), ("k", [1, 10], 5_000), ("k", [2, 10], 3_000), ("k", [2, 20], 8_000)]
    assert outer == [("k", [1, None], 5_000), ("k", [1, 10], 5_000), ("k", [2, 10], 3_000), ("k", [2, 20], 8_000)]


OUTER_JOIN_INPUTS = [  # in timestamp-merge order across the two tables: the replay's catch-up order too
    ("right", "k", 10, 3_000),  # no left value: [None, 10] at the update's 3,000
    ("left", "k", 1, 4_000),  # max(4,000, right's 3,000) = 4,000
    ("left", "k", 2, 1_500),  # older than the right value: max = 3,000
    ("right", "k", None, 5_000),  # right deleted, left present: [2, None] at max(5,000, 1,500)
    ("right", "k", 30, 500),  # older than the left value: max = 1,500
    ("right", "k", None, 200),  # deleted again: [2, None] at max(200, 1,500)
    ("left", "k", None, 6_000),  # both sides absent: a tombstone at the update's 6,000
]


def test_a_table_table_outer_join_result_takes_the_later_timestamp_or_the_updates_own_when_the_other_side_is_absent(
    engine: Engine,
) -> None:
    out = engine.run(latest_values_join("outer"), OUTER_JOIN_INPUTS, ["joined"], one_at_a_time=True, compare=True)

    assert out["joined"] == [
        ("k", [None, 10], 3_000),
        ("k", [1, 10], 4_000),
        ("k", [2, 10], 3_000),
        ("k", [2, None], 5_000),
        ("k", [2, 30], 1_500),
        ("k", [2, None], 1_500),
        ("k", None, 6_000),
    ]


def test_a_grouped_table_aggregate_moves_to_the_newest_row_timestamp(engine: Engine) -> None:
    builder = StreamsBuilder()
    (
        builder.table("accounts", key_serde=S, value_serde=J, name="accounts")
        .group_by(fn.amount_by_region, name="by-region")
        .aggregate(fn.zero, fn.add_amount, fn.sub_amount, name="total", store="totals", value_serde=L)
        .to_stream(name="changes")
        .to("totals", name="out")
    )
    inputs = [
        ("accounts", "x", {"region": "eu", "amount": 5}, 4_000),
        ("accounts", "y", {"region": "eu", "amount": 7}, 1_000),
        ("accounts", "x", {"region": "eu", "amount": 6}, 2_000),  # one group: subtract 5, add 6 at 4,000
    ]

    out = engine.run(builder, inputs, ["totals"])

    assert out["totals"] == [("eu", 5, 4_000), ("eu", 12, 4_000), ("eu", 13, 4_000)]


def region_and_amount(key: Any, value: dict[str, Any]) -> tuple[str, int]:
    """An account row re-keyed by its region, its amount as the value."""
    return value["region"], int(value["amount"])


def test_an_out_of_order_grouped_table_reduce_keeps_the_newest_row_timestamp_it_has_seen_per_group(
    engine: Engine,
) -> None:
    builder = StreamsBuilder()
    (
        builder.table("accounts", key_serde=S, value_serde=J, name="accounts")
        .group_by(region_and_amount, name="by-region", value_serde=L)
        .reduce(fn.add, fn.subtract, name="total", store="totals")
        .to_stream(name="changes")
        .to("totals", name="out")
    )
    inputs = [
        ("accounts", "a1", {"region": "eu", "amount": 10}, 5_000),  # a new group: the record's 5,000
        ("accounts", "a2", {"region": "eu", "amount": 5}, 2_000),  # added: max(2,000, 5,000)
        ("accounts", "a1", {"region": "eu", "amount": 7}, 3_000),  # one Change on one group: -10 +7 at 5,000
        ("accounts", "a2", {"region": "us", "amount": 5}, 1_000),  # moves: eu -5 at 5,000, us new at 1,000
        ("accounts", "a1", None, 6_000),  # deleted: eu -7 at the newer 6,000
        ("accounts", "a3", {"region": "us", "amount": 4}, 500),  # added: max(500, 1,000)
    ]

    out = engine.run(builder, inputs, ["totals"], compare=True)

    assert out["totals"] == [
        ("eu", 10, 5_000),
        ("eu", 15, 5_000),
        ("eu", 12, 5_000),
        ("eu", 7, 5_000),
        ("us", 5, 1_000),
        ("eu", 0, 6_000),
        ("us", 9, 1_000),
    ]
