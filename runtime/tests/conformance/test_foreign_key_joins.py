"""The foreign-key table-table join (KIP-213) on every engine: orders (a table keyed by order id) join customers
(a table keyed by customer id) on ``order["customer"]``.

Expected results follow Kafka Streams' processors of ``org.apache.kafka.streams.kstream.internals.foreignkeyjoin``:
``SubscriptionSendProcessorSupplier`` (which subscriptions a left update sends), ``SubscriptionJoinProcessorSupplier``
and ``ForeignTableJoinProcessorSupplier`` (which responses the right side sends, at which timestamp) and
``ResponseJoinProcessorSupplier`` (the hash check and the inner/left results). The replay gives the final joined
table (its two sub-topologies feed each other, so it processes every response after the left table's last update:
fewer intermediate results, ``spark_unsupported``; docs/replay.md, "Foreign-key joins").
"""

from __future__ import annotations

from streamapp import StreamsBuilder

from conformance.harness import Engine, final_values
from conformance.join_functions import customer_of, pair

S, J = "string", "json"

ANN, ANN_B, ANN_C, BOB, CY = ({"name": name} for name in ("Ann", "Ann B", "Ann C", "Bob", "Cy"))
O1, O1_C3, O2, O2_NONE, O3 = (
    {"customer": "c1", "n": 1},
    {"customer": "c3", "n": 1},
    {"customer": "c2", "n": 2},
    {"customer": None, "n": 2},
    {"customer": "c1", "n": 3},
)

INPUTS = [
    ("customers", "c1", ANN, 1_000),
    ("orders", "o1", O1, 2_000),  # subscribes c1, which is there
    ("orders", "o2", O2, 3_000),  # subscribes c2, which is not (yet)
    ("customers", "c2", BOB, 4_000),  # answers o2's subscription
    ("customers", "c1", ANN_B, 5_000),  # answers o1's
    ("orders", "o1", O1_C3, 6_000),  # foreign key c1 -> c3: unsubscribes c1, c3 is not there
    ("customers", "c3", CY, 7_000),  # answers o1's new subscription
    ("orders", "o2", O2_NONE, 8_000),  # foreign key c2 -> null
    ("customers", "c3", None, 9_000),  # right tombstone while o1 subscribes it
    ("customers", "c1", ANN_C, 10_000),  # o1 left c1: nobody hears
    ("orders", "o3", O3, 11_000),
    ("orders", "o3", None, 12_000),  # left tombstone
]


def orders_with_customers(*joins: str) -> StreamsBuilder:
    """Orders joined with customers on ``order["customer"]``: for each of ``joins`` (``inner``, ``left``) a
    foreign-key join ``<join>-enrich`` written to topic ``<join>-enriched``."""
    builder = StreamsBuilder()
    orders = builder.table("orders", key_serde=S, value_serde=J, name="orders")
    customers = builder.table("customers", key_serde=S, value_serde=J, name="customers")
    for join in joins:
        method = orders.join if join == "inner" else orders.left_join
        joined = method(customers, pair, foreign_key_extractor=customer_of, name=f"{join}-enrich")
        joined.to_stream(name=f"{join}-joined").to(f"{join}-enriched", name=f"{join}-out")
    return builder


def test_fk_inner_and_left_joins_follow_each_orders_foreign_key_changes_nulls_and_tombstones(engine: Engine) -> None:
    """Kafka's ``SubscriptionSendProcessorSupplier``: inner, a changed foreign key sends DELETE_KEY_NO_PROPAGATE to
    the old key and PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE to the new one, a null foreign key or a deleted row
    DELETE_KEY_AND_PROPAGATE; left, every update sends PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE (a null foreign key
    included). ``SubscriptionJoinProcessorSupplier``: a response carries the later of the order's and the customer's
    timestamps; ``ForeignTableJoinProcessorSupplier``: a customer update answers its subscribers at its own.
    ``ResponseJoinProcessorSupplier``: no customer gives a delete (inner) or joins ``None`` (left); a deleted order
    gives a delete on both. One run feeds both joins (one broker run for the two)."""
    out = engine.run(
        orders_with_customers("inner", "left"), INPUTS, ["inner-enriched", "left-enriched"], one_at_a_time=True
    )
    assert out["inner-enriched"] == [
        ("o1", [O1, ANN], 2_000),  # max(order 2 s, customer 1 s)
        ("o2", [O2, BOB], 4_000),
        ("o1", [O1, ANN_B], 5_000),
        ("o1", None, 6_000),  # c3 absent: the old result is deleted
        ("o1", [O1_C3, CY], 7_000),
        ("o2", None, 8_000),  # null foreign key: deleted (and the record counted as dropped)
        ("o1", None, 9_000),  # customer c3 deleted
        ("o3", [O3, ANN_C], 11_000),
        ("o3", None, 12_000),
    ]
    assert out["left-enriched"] == [
        ("o1", [O1, ANN], 2_000),
        ("o2", [O2, None], 3_000),
        ("o2", [O2, BOB], 4_000),
        ("o1", [O1, ANN_B], 5_000),
        ("o1", [O1_C3, None], 6_000),
        ("o1", [O1_C3, CY], 7_000),
        ("o2", [O2_NONE, None], 8_000),
        ("o1", [O1_C3, None], 9_000),
        ("o3", [O3, ANN_C], 11_000),
        ("o3", None, 12_000),
    ]


def test_fk_join_final_table_follows_the_latest_foreign_key_of_rapidly_changing_orders(engine: Engine) -> None:
    """KIP-213's guarantee: only the final joined table is defined when the two sub-topologies interleave freely
    (inputs not one at a time, tables on different partition counts). A response for an order value that changed
    since is dropped by its hash (Kafka's ``ResponseJoinProcessorSupplier``: the murmur3 hash of the current left
    value), so no order ends joined with a customer it no longer names."""
    customers = [("customers", f"c{i}", {"name": f"n{i}"}, 1_000 + i) for i in range(4)]
    orders = [
        ("orders", f"o{n}", {"customer": f"c{(n + step) % 5}", "step": step}, 2_000 + 10 * step + n)
        for step in range(3)
        for n in range(4)
    ]
    out = engine.run(
        orders_with_customers("left"), customers + orders, ["left-enriched"], partitions={"orders": 2, "customers": 3}
    )
    expected = {
        f"o{n}": [{"customer": f"c{(n + 2) % 5}", "step": 2}, None if (n + 2) % 5 == 4 else {"name": f"n{(n + 2) % 5}"}]
        for n in range(4)
    }
    assert final_values(out["left-enriched"]) == expected
