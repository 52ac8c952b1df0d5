"""KTables on both engines: a table read from a topic (updates, tombstones, its changelog), filter and
map_values of a table, and group_by with count / aggregate whose subtractor retracts a row's old value
(Kafka's KTableSource, KTableFilter, KTableMapValues, KTableRepartitionMap, KTableAggregate)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from streamapp import StreamsBuilder
from streamapp.dsl import KTable

from conformance import dsl_functions as fn
from conformance import join_functions as jf
from conformance.harness import Engine, final_values

S, L, J = "string", "long", "json"


def table_of_the_topic(builder: StreamsBuilder) -> KTable:
    """``StreamsBuilder#table``: Kafka's ``KTableSource`` on the topic."""
    return builder.table("prices", key_serde=S, value_serde=L, store="prices-store", name="prices")


def table_of_the_stream(builder: StreamsBuilder) -> KTable:
    """``KStreamImpl#toTable`` (KIP-523): Kafka's ``KTableSource`` on the stream of the topic."""
    return builder.stream("prices", key_serde=S, value_serde=L, name="prices").to_table("prices-store", name="latest")


@pytest.mark.parametrize("make_table", [table_of_the_topic, table_of_the_stream], ids=["table", "stream-to-table"])
def test_a_table_keeps_the_latest_value_per_key_and_a_tombstone_deletes_it(
    engine: Engine, make_table: Callable[[StreamsBuilder], KTable]
) -> None:
    """Kafka's ``KTableSource``, whether ``StreamsBuilder#table`` reads a topic or ``KStream#toTable`` a stream:
    materialized in its store, each record upserts its key, a null value deletes the key (the delete is forwarded),
    a null key is dropped."""
    builder = StreamsBuilder()
    make_table(builder).to_stream(name="changes").to("price-changes", name="out")
    inputs = [
        ("prices", "apple", 3, 1_000),
        ("prices", "pear", 5, 2_000),
        ("prices", None, 9, 2_500),  # no key: dropped by the table
        ("prices", "apple", 4, 3_000),
        ("prices", "pear", None, 4_000),
    ]

    out = engine.run(builder, inputs, ["price-changes", "{application_id}-prices-store-changelog"])

    assert out["price-changes"] == [("apple", 3, 1_000), ("pear", 5, 2_000), ("apple", 4, 3_000), ("pear", None, 4_000)]
    assert final_values(out["{application_id}-prices-store-changelog"]) == {"apple": 4}


def test_a_filtered_table_deletes_a_row_that_stops_matching_and_maps_the_rest(engine: Engine) -> None:
    builder = StreamsBuilder()
    (
        builder.table("stock", key_serde=S, value_serde=L, name="stock")
        .filter(fn.is_positive, name="in-stock")
        .map_values(fn.times_ten, name="x10")
        .to_stream(name="changes")
        .to("in-stock", name="out")
    )
    inputs = [
        ("stock", "a", 2, 1_000),
        ("stock", "b", 0, 2_000),  # never in the filtered table: nothing emitted
        ("stock", "a", 0, 3_000),  # leaves the filtered table: a delete
        ("stock", "a", 1, 4_000),
    ]

    out = engine.run(builder, inputs, ["in-stock"])

    assert out["in-stock"] == [("a", 20, 1_000), ("a", None, 3_000), ("a", 10, 4_000)]


def users_per_region() -> StreamsBuilder:
    builder = StreamsBuilder()
    (
        builder.table("users", key_serde=S, value_serde=J, store="users-store", name="users")
        .group_by(fn.region_of, name="by-region", value_serde=S)
        .count(name="users-per-region", store="users-per-region-store")
        .to_stream(name="changes")
        .to("users-per-region", name="out", value_serde=L)
    )
    return builder


USERS = [
    ("users", "alice", {"region": "eu"}, 1_000),
    ("users", "bob", {"region": "eu"}, 2_000),
    ("users", "carol", {"region": "us"}, 3_000),
    ("users", "alice", {"region": "us"}, 4_000),  # moves: eu -1, us +1
    ("users", "bob", None, 5_000),  # deleted: eu -1
]


def test_group_by_count_retracts_a_moved_row_from_its_old_group(engine: Engine) -> None:
    out = engine.run(users_per_region(), USERS, ["users-per-region"], compare=True)

    assert out["users-per-region"] == [
        ("eu", 1, 1_000),
        ("eu", 2, 2_000),
        ("us", 1, 3_000),
        ("eu", 1, 4_000),
        ("us", 2, 4_000),
        ("eu", 0, 5_000),
    ]


def test_group_by_over_several_partitions_reaches_the_same_counts(engine: Engine) -> None:
    out = engine.run(users_per_region(), USERS, ["users-per-region"], partitions={"users": 3})

    assert final_values(out["users-per-region"]) == {"eu": 0, "us": 2}


def test_group_by_aggregate_adds_new_and_subtracts_old_values(engine: Engine) -> None:
    builder = StreamsBuilder()
    (
        builder.table("accounts", key_serde=S, value_serde=J, name="accounts")
        .group_by(fn.amount_by_region, name="by-region")
        .aggregate(fn.zero, fn.add_amount, fn.sub_amount, value_serde=L, name="balance", store="balance-store")
        .to_stream(name="changes")
        .to("balance-per-region", name="out")
    )
    inputs = [
        ("accounts", "a1", {"region": "eu", "amount": 10}, 1_000),
        ("accounts", "a2", {"region": "eu", "amount": 5}, 2_000),
        ("accounts", "a1", {"region": "eu", "amount": 7}, 3_000),  # one Change on one key: -10 +7
        ("accounts", "a2", {"region": "us", "amount": 5}, 4_000),  # moves
    ]

    out = engine.run(builder, inputs, ["balance-per-region"], compare=True)

    assert out["balance-per-region"] == [
        ("eu", 10, 1_000),
        ("eu", 15, 2_000),
        ("eu", 12, 3_000),
        ("eu", 7, 4_000),
        ("us", 5, 4_000),
    ]


def test_to_stream_with_a_mapper_rekeys_the_updates_and_a_grouping_repartitions_them(engine: Engine) -> None:
    builder = StreamsBuilder()
    changes = builder.table("stock", key_serde=S, value_serde=L, name="stock").to_stream(
        fn.first_letter, name="changes"
    )
    changes.to("stock-by-letter", name="out")
    changes.group_by_key(name="by-letter").count(name="per-letter", store="per-letter-store").to_stream(
        name="counts"
    ).to("updates-per-letter", name="counts-out", value_serde=L)
    inputs = [
        ("stock", "apple", 3, 1_000),
        ("stock", "avocado", 5, 2_000),
        ("stock", "banana", 1, 3_000),
        ("stock", "apple", 4, 4_000),
    ]

    out = engine.run(builder, inputs, ["stock-by-letter", "updates-per-letter"])

    assert out["stock-by-letter"] == [("a", 3, 1_000), ("a", 5, 2_000), ("b", 1, 3_000), ("a", 4, 4_000)]
    assert final_values(out["updates-per-letter"]) == {"a": 3, "b": 1}


def test_a_rekeyed_stream_is_repartitioned_before_it_becomes_a_table_a_join_reads(engine: Engine) -> None:
    """Kafka's ``KStreamImpl#toTable`` on a stream whose key changed: a repartition by the new key first, then the
    table, which a stream-table join (``KStreamKTableJoin``) reads like any table: each visit is joined with the
    page's latest visitor recorded before it."""
    builder = StreamsBuilder()
    last_visitor = (
        builder.stream("visits", key_serde=S, value_serde=S, name="visits")
        .map(fn.swap, name="by-page")
        .to_table("last-visitor-store", name="last-visitor")
    )
    (
        builder.stream("views", key_serde=S, value_serde=S, name="views")
        .join(last_visitor, jf.pair, name="with-last-visitor")
        .to("views-with-last-visitor", name="out", value_serde=J)
    )
    inputs = [
        ("visits", "ann", "home", 1_000),
        ("visits", "bob", "cart", 2_000),
        ("views", "home", "v1", 3_000),
        ("visits", "cid", "home", 4_000),
        ("views", "home", "v2", 5_000),
        ("views", "cart", "v3", 6_000),
        ("views", "shop", "v4", 7_000),  # no visitor of the shop page: an inner join drops it
    ]

    outputs = ["views-with-last-visitor", "{application_id}-last-visitor-store-repartition"]

    out = engine.run(builder, inputs, outputs, partitions={"visits": 2, "views": 2}, one_at_a_time=True)

    assert sorted(out["views-with-last-visitor"], key=lambda r: r[2]) == [
        ("home", ["v1", "ann"], 3_000),
        ("home", ["v2", "cid"], 5_000),
        ("cart", ["v3", "bob"], 6_000),
    ]
    assert sorted(key for key, _, _ in out["{application_id}-last-visitor-store-repartition"]) == [
        "cart",
        "home",
        "home",
    ]
