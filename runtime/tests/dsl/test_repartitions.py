"""Which repartitions drop null keys (``streamapp.dsl.repartitions``): Kafka's KIP-962 rule, decided at build."""

from __future__ import annotations

from typing import Any

from streamapp import StreamsBuilder
from streamapp.dsl.windows import JoinWindows, TimeWindows
from streamapp.testing import TopologyTestDriver
from streamapp.topology import RepartitionNode, TopologyDescription

S, J = "string", "json"
TASK_PROCESSED = ("process-total", "stream-task-metrics")


def customer(key: Any, value: Any) -> Any:
    return value.get("customer")


def pair(left: Any, right: Any) -> list[Any]:
    return [left, right]


def dropping(description: TopologyDescription) -> dict[str, bool]:
    return {node.name: bool(node.drop_null_keys) for node in description.nodes if isinstance(node, RepartitionNode)}


def test_groupings_and_explicit_repartitions_drop_null_keys() -> None:
    builder = StreamsBuilder()
    orders = builder.stream("orders", key_serde=S, value_serde=J)
    orders.group_by(customer, name="by-customer").count(name="count").to_stream().to("counts", value_serde="long")
    orders.map(lambda k, v: (v, k)).group_by_key(name="swapped").count(name="swapped-count")
    orders.select_key(customer).repartition(name="rekeyed").to("rekeyed")

    orders.select_key(customer).group_by_key(name="windowed").windowed_by(
        TimeWindows.of_size_with_no_grace(60_000)
    ).count(name="per-minute")

    assert dropping(builder.build()) == {"by-customer": True, "swapped": True, "rekeyed": True, "windowed": True}


def test_a_repartition_feeding_a_left_stream_table_join_keeps_null_keys_and_an_inner_join_drops_them() -> None:
    builder = StreamsBuilder()
    customers = builder.table("customers", key_serde=S, value_serde=J)
    orders = builder.stream("orders", key_serde=S, value_serde=J)
    orders.select_key(customer).left_join(customers, pair, name="left").to("left-out")
    orders.select_key(customer).join(customers, pair, name="inner").to("inner-out")

    assert dropping(builder.build()) == {"left-left": False, "inner-left": True}


def test_left_and_outer_stream_stream_joins_keep_null_keys_on_both_sides() -> None:
    windows = JoinWindows.of_time_difference_with_no_grace(1_000)
    for join, keeps in (("join", False), ("left_join", True), ("outer_join", True)):
        builder = StreamsBuilder()
        clicks = builder.stream("clicks", key_serde=S, value_serde=J).select_key(customer)
        views = builder.stream("views", key_serde=S, value_serde=J).select_key(customer)
        getattr(clicks, join)(views, pair, windows, name="j").to("joined")

        assert dropping(builder.build()) == {"j-left": not keeps, "j-right": not keeps}, join


def test_a_null_key_join_further_downstream_keeps_null_keys_in_every_repartition_on_the_way() -> None:
    builder = StreamsBuilder()
    customers = builder.table("customers", key_serde=S, value_serde=J)
    rekeyed = builder.stream("orders", key_serde=S, value_serde=J).select_key(customer).repartition(name="first")
    rekeyed.map_values(lambda v: v).left_join(customers, pair, name="enrich").to("enriched")

    assert dropping(builder.build()) == {"first": False}


def test_a_grouped_tables_repartition_is_left_alone_because_its_group_by_skips_null_keys() -> None:
    builder = StreamsBuilder()
    table = builder.table("accounts", key_serde=S, value_serde=J)
    table.group_by(lambda k, v: (v["region"], v), name="by-region").count(name="per-region")

    assert dropping(builder.build()) == {"by-region": False}


def test_a_filtered_null_key_is_not_written_and_not_counted_as_a_dropped_record() -> None:
    builder = StreamsBuilder()
    orders = builder.stream("orders", key_serde=S, value_serde=J, name="orders")
    orders.group_by(customer, name="by-customer", key_serde=S).count(name="count").to_stream().to(
        "counts", value_serde="long"
    )
    with TopologyTestDriver(builder) as driver:
        driver.create_input_topic("orders").pipe_records(
            [("o1", {"customer": "ann"}, 1), ("o2", {"customer": None}, 2), ("o3", {"customer": "ann"}, 3)]
        )
        counts = driver.create_output_topic("counts").read_key_values_to_list()
        metrics = driver.kafka_metrics()

    assert counts == [("ann", 1), ("ann", 2)]
    per_task = {n.tag("task-id"): v for n, v in metrics.items() if (n.name, n.group) == TASK_PROCESSED}
    assert per_task == {"0_0": 3, "1_0": 2}  # the aggregation's task only saw the two keyed orders
    assert sum(v for n, v in metrics.items() if n.name == "dropped-records-total") == 0
