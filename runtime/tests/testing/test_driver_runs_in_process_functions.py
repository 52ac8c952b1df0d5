"""The TopologyTestDriver runs topologies whose functions only this process has: lambdas, nested functions and
Processor classes defined inside the test, as Kafka Streams users write them."""

from __future__ import annotations

from typing import Any

from streamapp import StreamsBuilder
from streamapp.processor import Processor, Record
from streamapp.testing import TopologyTestDriver


def test_a_grouped_aggregation_of_lambdas_runs_in_the_driver() -> None:
    builder = StreamsBuilder()
    (
        builder.stream("flights", key_serde="string", value_serde="json", name="flights")
        .group_by(lambda key, value: value["carrier"], name="by-carrier", key_serde="string")
        .aggregate(lambda: 0, lambda key, value, total: total + value["seats"], name="seats", store="seats")
        .to_stream(name="changes")
        .to("seats-per-carrier", key_serde="string", value_serde="json", name="out")
    )
    with TopologyTestDriver(builder) as driver:
        flights = driver.create_input_topic("flights")
        for tail, carrier, seats in [("N1", "UA", 100), ("N2", "AA", 50), ("N3", "UA", 20)]:
            flights.pipe_input(tail, {"carrier": carrier, "seats": seats})
        assert driver.create_output_topic("seats-per-carrier").read_key_values_to_list() == [
            ("UA", 100),
            ("AA", 50),
            ("UA", 120),
        ]


def test_a_processor_class_defined_in_the_test_runs_in_the_driver() -> None:
    class Upper(Processor):
        def process(self, record: Record) -> None:
            self.context.forward(record.with_value(str(record.value).upper()))

    def shout(value: Any) -> str:
        return f"{value}!"

    builder = StreamsBuilder()
    builder.stream("in", key_serde="string", value_serde="string", name="in").process(Upper, name="upper").map_values(
        shout, name="shout"
    ).to("out", name="out")
    with TopologyTestDriver(builder) as driver:
        driver.create_input_topic("in").pipe_input("k", "hello")
        assert driver.create_output_topic("out").read_value() == "HELLO!"
