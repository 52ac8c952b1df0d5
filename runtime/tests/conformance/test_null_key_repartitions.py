"""Null keys in front of a repartition topic, on every engine, as in Kafka Streams since KIP-962 (3.7).

Kafka filters ``key != null`` before every DSL repartition topic (``KStreamImpl.createRepartitionedSource``,
``InternalStreamsBuilder.rewriteRepartitionNodes``) unless a join that takes null keys (a left stream-table join,
a left or outer stream-stream join) is downstream; ``streamapp.dsl.repartitions`` decides the same.
"""

from __future__ import annotations

from streamapp import StreamsBuilder

from conformance.harness import Engine, final_values
from conformance.null_key_functions import customer_of, with_customer

S, J, L = "string", "json", "long"

ORDERS = [
    ("orders", "o1", {"customer": "ann"}, 1_000),
    ("orders", "o2", {"customer": None}, 2_000),  # re-keyed to a null key
    ("orders", "o3", {"customer": "bob"}, 3_000),
    ("orders", "o4", {"customer": "ann"}, 4_000),
]
GROUPING = "{application_id}-by-customer-repartition"
REPARTITION = "{application_id}-rekeyed-repartition"


def test_a_null_key_never_reaches_a_grouping_or_repartition_topic(engine: Engine) -> None:
    builder = StreamsBuilder()
    orders = builder.stream("orders", key_serde=S, value_serde=J, name="orders")
    (
        orders.group_by(customer_of, name="by-customer", key_serde=S)
        .count(name="count", store="orders-per-customer")
        .to_stream(name="changes")
        .to("orders-per-customer", name="counts-out", value_serde=L)
    )
    orders.select_key(customer_of, name="rekey", key_serde=S).repartition(name="rekeyed").to("rekeyed", name="out")

    out = engine.run(builder, ORDERS, ["orders-per-customer", "rekeyed", GROUPING, REPARTITION])

    written = [
        ("ann", {"customer": "ann"}, 1_000),
        ("bob", {"customer": "bob"}, 3_000),
        ("ann", {"customer": "ann"}, 4_000),
    ]
    assert out[GROUPING] == written
    assert out[REPARTITION] == written
    assert out["rekeyed"] == written
    assert final_values(out["orders-per-customer"]) == {"ann": 2, "bob": 1}


def test_a_left_join_downstream_keeps_null_keys_in_its_repartition_topic(engine: Engine) -> None:
    builder = StreamsBuilder()
    customers = builder.table("customers", key_serde=S, value_serde=J, name="customers")
    (
        builder.stream("orders", key_serde=S, value_serde=J, name="orders")
        .select_key(customer_of, name="rekey", key_serde=S)
        .left_join(customers, with_customer, name="enrich")
        .to("enriched", name="out")
    )
    inputs = [("customers", "ann", {"tier": "gold"}, 500), *ORDERS]

    out = engine.run(builder, inputs, ["enriched", "{application_id}-enrich-left-repartition"], one_at_a_time=True)

    assert [key for key, _, _ in out["{application_id}-enrich-left-repartition"]] == ["ann", None, "bob", "ann"]
    assert out["enriched"] == [
        ("ann", [{"customer": "ann"}, {"tier": "gold"}], 1_000),
        (None, [{"customer": None}, None], 2_000),
        ("bob", [{"customer": "bob"}, None], 3_000),
        ("ann", [{"customer": "ann"}, {"tier": "gold"}], 4_000),
    ]
