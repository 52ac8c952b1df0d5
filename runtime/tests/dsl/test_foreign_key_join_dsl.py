"""``KTable.join/left_join(..., foreign_key_extractor=fn)`` lowers to the foreign-key join's nodes, topics and stores
with Kafka's names (``KTableImpl.doJoinOnForeignKey``), and its internal topics are co-partitioned as Kafka's:
the subscription registration topic with the right table, the response topic with the left."""

from __future__ import annotations

import pytest
from conformance.join_functions import customer_of, pair
from streamapp import StreamsBuilder
from streamapp.dsl.joins import ForeignKeyExtractor, foreign_key_join
from streamapp.testing import TopologyTestDriver
from streamapp.topology import TopologyDescription

S, J = "string", "json"


def orders_join_customers(name: str | None = None, join: str = "inner") -> TopologyDescription:
    builder = StreamsBuilder()
    orders = builder.table("orders", key_serde=S, value_serde=J, name="orders")
    customers = builder.table("customers", key_serde="long", value_serde=J, name="customers")
    method = orders.join if join == "inner" else orders.left_join
    method(customers, pair, foreign_key_extractor=customer_of, name=name).to_stream().to("out", name="out")
    return builder.build()


def test_a_named_join_names_its_topics_and_stores_after_the_name_as_table_joined_as_does() -> None:
    description = orders_join_customers("enrich")
    topics = {t.name: t.partitions for t in description.internal_topics("app", {"orders": 2, "customers": 5})}

    assert topics == {
        "app-enrich-subscription-registration-topic": 5,  # the right table's partitions
        "app-enrich-subscription-response-topic": 2,  # the left table's
        "app-orders-store-changelog": 2,
        "app-customers-store-changelog": 5,
        "app-enrich-subscription-store-changelog": 5,
        "app-enrich-right-store-changelog": 5,
        "app-enrich-left-store-changelog": 2,
        "app-enrich-store-changelog": 2,
    }
    send = next(node for node in description.nodes if node.type == "fk_subscription_send")
    assert (send.name, getattr(send, "foreign_key_serde", None)) == (
        "enrich-subscription-registration-processor",
        "long",
    )


def test_an_unnamed_join_gets_kafkas_generated_topic_and_store_names() -> None:
    description = orders_join_customers()
    topics = [t.name for t in description.internal_topics("app", {"orders": 1, "customers": 1})]

    assert "app-KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000001-topic" in topics
    assert "app-KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000004-topic" in topics
    assert "KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-0000000002" in {store.name for store in description.stores}


def test_the_left_and_right_tables_run_in_two_sub_topologies_that_feed_each_other() -> None:
    subs = orders_join_customers("enrich", "left").subtopologies()

    assert [[ref.name for ref in sub.source_topics] for sub in subs] == [
        ["orders", "enrich-subscription-response-topic"],
        ["customers", "enrich-subscription-registration-topic"],
    ]
    assert [[ref.name for ref in sub.sink_topics] for sub in subs] == [
        ["enrich-subscription-registration-topic", "out"],
        ["enrich-subscription-response-topic"],
    ]


def test_the_internal_topics_keep_null_keys_a_left_joins_null_foreign_key_is_sent_with() -> None:
    repartitions = [node for node in orders_join_customers("enrich", "left").nodes if node.type == "repartition"]
    assert [getattr(node, "drop_null_keys", None) for node in repartitions] == [None, None]


def test_an_outer_foreign_key_join_or_a_stream_operand_is_refused() -> None:
    builder = StreamsBuilder()
    orders = builder.table("orders", key_serde=S, value_serde=J)

    with pytest.raises(TypeError, match="inner or left, not outer"):
        foreign_key_join(orders, builder.table("customers", key_serde=S, value_serde=J), "outer", pair, customer_of)
    with pytest.raises(TypeError, match="not KStream"):
        orders.join(builder.stream("s"), pair, foreign_key_extractor=customer_of)  # type: ignore[arg-type]


def customer_of_key(key: str, value: object) -> str:
    return key.split("/")[0]


def test_a_bi_function_extractor_is_called_with_the_left_key_and_value() -> None:
    """KIP-1104: ``ForeignKeyExtractor.from_bi_function(fn)`` lowers to ``extractorTakesKey``; the driver joins
    ``c1/o1`` with customer ``c1`` through it."""
    builder = StreamsBuilder()
    orders = builder.table("orders", key_serde=S, value_serde=J, name="orders")
    customers = builder.table("customers", key_serde=S, value_serde=J, name="customers")
    extractor = ForeignKeyExtractor.from_bi_function(customer_of_key)
    orders.join(customers, pair, foreign_key_extractor=extractor, name="enrich").to_stream().to("out", name="out")
    description = builder.build()
    send = next(node for node in description.nodes if node.type == "fk_subscription_send")
    assert getattr(send, "extractor_takes_key", None) is True

    with TopologyTestDriver(description, {"application.id": "kip-1104"}) as driver:
        driver.create_input_topic("customers").pipe_input("c1", {"name": "Ann"}, 1_000)
        driver.create_input_topic("orders").pipe_input("c1/o1", {"n": 1}, 2_000)
        records = driver.create_output_topic("out").read_records_to_list()

    assert [(r.key, r.value, r.timestamp_ms) for r in records] == [("c1/o1", [{"n": 1}, {"name": "Ann"}], 2_000)]
