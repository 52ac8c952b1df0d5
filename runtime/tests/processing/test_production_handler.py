"""The production exception handler (``default.production.exception.handler``) on a sink that cannot serialize
a record, through the TopologyTestDriver (the production stream thread over in-memory Kafka)."""

from __future__ import annotations

from typing import Any

import pytest
from streamapp.processing.errors import ProductionError
from streamapp.testing import TopologyTestDriver

TOPOLOGY: dict[str, Any] = {
    "nodes": [
        {"name": "in", "type": "source", "topics": ["in"], "keySerde": "string", "valueSerde": "json"},
        {"name": "out", "type": "sink", "input": "in", "topic": "out", "keySerde": "string", "valueSerde": "long"},
    ]
}


def test_fail_is_the_default_and_names_the_record() -> None:
    with TopologyTestDriver(TOPOLOGY, {"application.id": "prod-fail"}) as driver:
        source = driver.create_input_topic("in")
        with pytest.raises(ProductionError, match=r"production of record in-0@0 failed: RecordSerializationError"):
            source.pipe_input("k", "not a number")


def test_continue_drops_the_record_and_writes_a_dead_letter() -> None:
    config = {
        "application.id": "prod-dlq",
        "default.production.exception.handler": "dead_letter_queue",
        "errors.dead.letter.queue.topic.name": "dlq",
    }
    with TopologyTestDriver(TOPOLOGY, config) as driver:
        source = driver.create_input_topic("in")
        source.pipe_input("a", 1)
        source.pipe_input("b", "not a number")
        source.pipe_input("c", 3)
        assert driver.create_output_topic("out").read_key_values_to_list() == [("a", 1), ("c", 3)]
        (letter,) = driver.create_output_topic("dlq", key_serde="bytes", value_serde="bytes").read_records_to_list()
        assert (letter.key, letter.value) == (b"b", b'"not a number"')
