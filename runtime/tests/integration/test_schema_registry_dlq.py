"""Schema Registry serdes on the real broker and registry: records an Avro deserializer cannot read (a wrong
magic byte, a schema id the registry does not know) go to the dead-letter queue through the deserialization
exception handler, and every Avro record after them is still aggregated."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import schema_registry_fixtures as fx
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from streamapp import StreamsBuilder
from streamapp_harness import KafkaTestClient, StreamAppInstance, unique, wait_for

pytestmark = pytest.mark.integration

TESTS_DIR = Path(fx.__file__).resolve().parent


def _topology(source: str, output: str) -> dict[str, Any]:
    builder = StreamsBuilder()
    (
        builder.stream(source, key_serde="string", value_serde="avro:schema_registry_fixtures:FLIGHT_SCHEMA")
        .group_by_key()
        .aggregate(fx.empty_totals, fx.add_flight, value_serde="avro:schema_registry_fixtures:TOTALS_SCHEMA")
        .to_stream()
        .to(output)
    )
    return builder.build().to_dict()


def test_records_that_are_not_registry_avro_go_to_the_dead_letter_queue_and_the_rest_is_aggregated(
    kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = fx.start_schema_registry()
    app, source, output, dlq = unique("sr-dlq-app"), unique("flights"), unique("totals"), unique("dead-letters")
    kafka.create_topics({source: 1, output: 1, dlq: 1})
    client = SchemaRegistryClient({"url": url})
    flight = AvroSerializer(client, json.dumps(fx.FLIGHT_SCHEMA))  # confluent-kafka's own, not our serde
    context = SerializationContext(source, MessageField.VALUE)

    def produce(key: str, value: bytes) -> None:
        kafka.producer.produce(source, key=key.encode(), value=value)

    produce("AA", flight({"carrier": "AA", "delay": 5}, context))
    produce("UA", flight({"carrier": "UA", "delay": 1}, context))
    produce("AA", b'{"carrier": "AA", "delay": 7}')  # JSON, not Confluent framing: magic byte '{'
    produce("UA", b"\x00\x7f\xff\xff\xf0" + b"\x04AA\x02")  # magic byte 0, a schema id nobody registered
    produce("AA", flight({"carrier": "AA", "delay": 10}, context))
    produce("UA", flight({"carrier": "UA", "delay": 2}, context))
    assert kafka.producer.flush(30) == 0

    config = {
        "application.id": app,
        "bootstrap.servers": kafka.bootstrap,
        "commit.interval.ms": 200,
        "state.dir": str(workdir / "state"),
        "schema.registry.url": url,
        "default.deserialization.exception.handler": "dead_letter_queue",
        "errors.dead.letter.queue.topic.name": dlq,
    }
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS_DIR), os.environ.get("PYTHONPATH", "")]))
    instance = StreamAppInstance(workdir, _topology(source, output), config)
    instances.append(instance.start())
    instance.wait_ready()

    totals = AvroDeserializer(client)
    out_context = SerializationContext(output, MessageField.VALUE)

    def latest() -> dict[str, Any]:
        records = sorted(kafka.read_committed(output, timeout_s=10))
        return {key.decode(): totals(value, out_context) for _, _, key, value in records if key and value}

    expected = {"AA": {"flights": 2, "delay": 15}, "UA": {"flights": 2, "delay": 3}}
    wait_for(lambda: latest() == expected, 60, "the totals of the four Avro records", 1.0)
    letters = [(key, value) for _, _, key, value in kafka.read_committed(dlq, timeout_s=10)]
    assert letters == [(b"AA", b'{"carrier": "AA", "delay": 7}'), (b"UA", b"\x00\x7f\xff\xff\xf0\x04AA\x02")]
    assert instance.stop() == 0
