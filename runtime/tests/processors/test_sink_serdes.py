"""A sink writes with its own serdes (Kafka's ``Produced``) whatever flows upstream, and a record its serdes
cannot write fails naming the sink, the node that produced the record, the serdes and the actual types (Kafka's
``SinkNode`` ClassCastException message)."""

from __future__ import annotations

import pytest
from streamapp import StreamsBuilder
from streamapp.processing.errors import ProductionError
from streamapp.testing import TopologyTestDriver


def length(value: str) -> int:
    return len(value)


def test_a_sink_writes_with_its_own_serdes_not_the_upstream_ones() -> None:
    builder = StreamsBuilder()
    builder.stream("words", key_serde="string", value_serde="string").map_values(length, name="lengths").to(
        "lengths", value_serde="long"
    )

    with TopologyTestDriver(builder) as driver:
        driver.create_input_topic("words").pipe_input("w", "hello", 1)
        raw = driver.create_output_topic("lengths", key_serde="bytes", value_serde="bytes").read_key_value()

    assert raw == (b"w", (5).to_bytes(8, "big"))


def test_a_value_the_sink_cannot_write_names_the_sink_the_producing_node_and_the_types() -> None:
    builder = StreamsBuilder()
    builder.stream("words", key_serde="string", value_serde="string").map_values(length, name="lengths").to(
        "lengths", name="lengths-out"
    )

    with TopologyTestDriver(builder) as driver, pytest.raises(ProductionError) as failure:
        driver.create_input_topic("words").pipe_input("w", "hello", 1)

    message = str(failure.value)
    assert "sink 'lengths-out' cannot serialize the value of a record produced by node 'lengths'" in message
    assert "topic lengths" in message
    assert "(key: string / value: string)" in message
    assert "(key type: str / value type: int)" in message


def test_a_key_the_sink_cannot_write_is_named_as_the_key() -> None:
    builder = StreamsBuilder()
    builder.stream("words", key_serde="string", value_serde="string").select_key(
        lambda key, value: len(value), name="by-length"
    ).to("by-length", name="out")

    with TopologyTestDriver(builder) as driver, pytest.raises(ProductionError, match="cannot serialize the key"):
        driver.create_input_topic("words").pipe_input("w", "hello", 1)
