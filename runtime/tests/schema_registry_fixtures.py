"""Schemas, a Protobuf message class and user functions of the Schema Registry serde tests.

Importable by name from the tests and from the ``streamapp run`` processes they start (``runtime/tests`` is on
their ``PYTHONPATH``), so topologies refer to them as ``schema_registry_fixtures:<attr>``.
``CarrierCount`` is built from a ``FileDescriptorProto`` at import, which is what ``protoc``'s generated
``*_pb2`` modules do; no generated file is checked in.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

FLIGHT_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "Flight",
    "namespace": "streamapp.test",
    "fields": [{"name": "carrier", "type": "string"}, {"name": "delay", "type": "long"}],
}
"""The input values: an Avro schema given as a dict."""

TOTALS_SCHEMA = (
    '{"type": "record", "name": "CarrierTotals", "namespace": "streamapp.test",'
    ' "fields": [{"name": "flights", "type": "long"}, {"name": "delay", "type": "long"}]}'
)
"""The aggregate (store, changelog and output values): an Avro schema given as a JSON string."""

NOT_A_SCHEMA = 42
"""Neither a JSON string nor a dict (setup error tests)."""
SCHEMA_NOT_JSON = "{record: Flight}"
"""A string that is not JSON (setup error tests)."""


def _carrier_count_class() -> Any:
    file = descriptor_pb2.FileDescriptorProto(
        name="streamapp_test/carrier_count.proto", package="streamapp.test", syntax="proto3"
    )
    message = file.message_type.add(name="CarrierCount")
    label = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
    message.field.add(name="carrier", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING, label=label)
    message.field.add(name="flights", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT64, label=label)
    pool = descriptor_pool.Default()
    try:
        pool.FindFileByName(file.name)
    except KeyError:
        pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("streamapp.test.CarrierCount"))


CarrierCount = _carrier_count_class()
"""``message CarrierCount { string carrier = 1; int64 flights = 2; }`` (package ``streamapp.test``)."""


def empty_totals() -> dict[str, int]:
    return {"flights": 0, "delay": 0}


def add_flight(key: Any, flight: dict[str, Any], totals: dict[str, int]) -> dict[str, int]:
    return {"flights": totals["flights"] + 1, "delay": totals["delay"] + flight["delay"]}


def to_carrier_count(carrier: str, totals: dict[str, int]) -> tuple[str, Any]:
    return carrier, CarrierCount(carrier=carrier, flights=totals["flights"])


SCHEMA_REGISTRY_SCRIPT = Path(__file__).resolve().parents[2] / "hack" / "stack" / "schema-registry.sh"


def start_schema_registry() -> str:
    """The real registry's Confluent-compatible URL, after ``hack/stack/schema-registry.sh up`` (idempotent, ~0.1 s
    when it runs, ~20 s cold). A failure to start fails the calling test (like a missing broker)."""
    done = subprocess.run([str(SCHEMA_REGISTRY_SCRIPT), "up"], capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0:
        pytest.fail(f"{SCHEMA_REGISTRY_SCRIPT} up failed:\n{done.stderr[-3000:]}", pytrace=False)
    url = subprocess.run([str(SCHEMA_REGISTRY_SCRIPT), "url"], capture_output=True, text=True, check=True).stdout
    return url.strip()
