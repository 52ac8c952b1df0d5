"""A foreign-key join (KIP-213) replayed on Spark ends as the streaming run ends, and the stages after it see the
joined table's records.

The left table's sub-topology runs twice (``streamapp.replay.stages``): its second run restores its stores from the
first run's changelog records and processes every response, after the left table's last update. KIP-213 defines
only the final joined table; the replay's is the driver's, as are the final contents of every store of the join as a
restore reads them (the two tables', the subscription store, the result store: the conformance harness's
``compare="final"``). A response to an order value that changed since is stale in the replay (the order's last
value is already in the store), so the joined table's intermediate rows are fewer than a streaming run's.
"""

from __future__ import annotations

import pytest
from conformance.harness import SparkEngine, final_values
from conformance.join_functions import customer_name_of, customer_of, pair
from conformance.test_foreign_key_joins import INPUTS, orders_with_customers
from streamapp import StreamsBuilder

pytestmark = pytest.mark.integration

S, J, L = "string", "json", "long"
PARTITIONS = {"orders": 2, "customers": 3}


def test_a_replayed_foreign_key_join_ends_with_the_drivers_joined_table_and_stores(replay: SparkEngine) -> None:
    """Orders that change their customer, lose it (null) and are deleted, customers updated and deleted while
    orders subscribe them, on tables of different partition counts."""
    out = replay.run(orders_with_customers("left"), INPUTS, ["left-enriched"], partitions=PARTITIONS, compare="final")

    expected = {"o1": [{"customer": "c3", "n": 1}, None], "o2": [{"customer": None, "n": 2}, None]}  # o3 deleted
    assert final_values(out["left-enriched"]) == expected


def orders_per_customer_name() -> StreamsBuilder:
    """Orders inner-joined with customers, and the joined rows counted per customer name: a table group-by through a
    repartition topic, so a stage after the left table's second run."""
    builder = StreamsBuilder()
    orders = builder.table("orders", key_serde=S, value_serde=J, name="orders")
    customers = builder.table("customers", key_serde=S, value_serde=J, name="customers")
    joined = orders.join(customers, pair, foreign_key_extractor=customer_of, name="enrich")
    joined.to_stream(name="joined").to("enriched", name="out")
    (
        joined.group_by(customer_name_of, name="by-name", value_serde=S)
        .count(name="per-name", store="per-name-store")
        .to_stream(name="per-name-changes")
        .to("orders-per-name", name="per-name-out", value_serde=L)
    )
    return builder


def test_an_inner_foreign_key_join_and_the_count_after_it_end_with_the_final_joined_rows(
    replay: SparkEngine,
) -> None:
    """Customer c1 is renamed while o1 subscribes it, o3 (a new order of c1) comes and goes, o4 names no customer
    (no row on an inner join). Only the non-zero counts are asserted: a group only intermediate rows fell into ends
    at 0 in a streaming run and may be missing from the replay, whose intermediate rows are fewer."""
    inputs = [
        ("customers", "c1", {"name": "Ann"}, 1_000),
        ("customers", "c2", {"name": "Bob"}, 1_500),
        ("orders", "o1", {"customer": "c1"}, 2_000),
        ("orders", "o2", {"customer": "c2"}, 3_000),
        ("customers", "c1", {"name": "Ann B"}, 4_000),
        ("orders", "o3", {"customer": "c1"}, 5_000),
        ("orders", "o4", {"customer": "c9"}, 6_000),  # no such customer
        ("orders", "o3", None, 7_000),
    ]

    out = replay.run(orders_per_customer_name(), inputs, ["enriched", "orders-per-name"], partitions=PARTITIONS)

    assert final_values(out["enriched"]) == {
        "o1": [{"customer": "c1"}, {"name": "Ann B"}],
        "o2": [{"customer": "c2"}, {"name": "Bob"}],
    }
    counts = final_values(out["orders-per-name"])
    assert {name: n for name, n in counts.items() if n} == {"Ann B": 1, "Bob": 1}
