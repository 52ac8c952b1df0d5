"""The stages of a foreign-key join (KIP-213) on the replay (``streamapp.replay.stages``, plain Python): the left
table's sub-topology runs twice, its responses after the right table's sub-topology answered its subscriptions,
and a topology the second run cannot carry is refused before any job."""

from __future__ import annotations

import pytest
from conformance.join_functions import customer_name_of, customer_of, pair
from streamapp import StreamsBuilder
from streamapp.dsl.tables import KTable
from streamapp.dsl.windows import TimeWindows
from streamapp.replay import UnsupportedTopologyError
from streamapp.replay.plan import check_topology
from streamapp.replay.stages import replay_stages

S, J = "string", "json"


def orders_with_customers() -> tuple[StreamsBuilder, KTable]:
    """A builder with orders left-joined to customers on ``order["customer"]`` (join ``enrich``), and the join."""
    builder = StreamsBuilder()
    orders = builder.table("orders", key_serde=S, value_serde=J, name="orders")
    customers = builder.table("customers", key_serde=S, value_serde=J, name="customers")
    return builder, orders.left_join(customers, pair, foreign_key_extractor=customer_of, name="enrich")


def test_the_left_sub_topology_runs_again_over_the_responses_after_the_right_one_answered() -> None:
    builder, joined = orders_with_customers()
    joined.group_by(customer_name_of, name="by-name", value_serde=S).count(name="per-name").to_stream().to("out")

    stages = replay_stages(builder.build(), "app")

    runs = [(stage.id, stage.resumes, sorted(ref.name for ref in stage.sources)) for stage in stages]
    assert runs == [
        (0, False, ["orders"]),
        (1, False, ["customers", "enrich-subscription-registration-topic"]),
        (0, True, ["enrich-subscription-response-topic"]),
        (2, False, ["by-name-repartition"]),
    ]
    assert stages[2].writes == {"app-by-name-repartition"}  # not the subscription topic: no further round


def test_a_node_that_needs_stream_time_downstream_of_the_responses_is_refused_naming_it() -> None:
    """The second run's tasks start with the stream time of the responses only, so a windowed aggregation of the
    joined table in the left sub-topology would close other windows than the streaming run's."""
    builder, joined = orders_with_customers()
    (
        joined.to_stream(name="joined")
        .group_by_key()
        .windowed_by(TimeWindows.of_size_with_no_grace(1_000))
        .count(name="per-second")
        .to_stream(name="counts")
        .to("counts", name="out")
    )

    with pytest.raises(UnsupportedTopologyError, match=r"node 'per-second' .*needs the task's stream time"):
        check_topology(builder.build())


def test_a_foreign_key_join_of_another_ones_result_is_refused_as_a_cycle() -> None:
    """The second join's subscriptions come from the first join's responses, so the left sub-topology's second run
    would write a topic the right one already read: more rounds than the replay's two runs."""
    builder, joined = orders_with_customers()
    customers = builder.table("regions", key_serde=S, value_serde=J, name="regions")
    joined.join(customers, pair, foreign_key_extractor=customer_of, name="again").to_stream().to("out", name="out")

    with pytest.raises(UnsupportedTopologyError, match=r"sub-topologies \[0, 2\] form a cycle .*'app-again-"):
        replay_stages(builder.build(), "app")
