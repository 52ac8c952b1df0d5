"""Avro and Protobuf serdes through the Schema Registry, on both engines: Avro values in, an Avro aggregate in a
store (so its changelog carries Avro too), Avro and Protobuf values out, in Confluent's wire format.

The driver run uses confluent-kafka's in-process mock registry (``mock://``); the broker run uses the real
registry of ``hack/stack/schema-registry.sh`` (Apicurio Registry's Confluent-compatible API). The output bytes
are checked without our serdes: the magic byte and schema id by hand, the subject and schema through the
registry's REST API (broker) or client (driver), the payload with fastavro / the Protobuf class directly.
"""

from __future__ import annotations

import io
import json
import struct
import urllib.request
from typing import Any

import fastavro
import pytest
import schema_registry_fixtures as fx
from streamapp import StreamsBuilder
from streamapp.config import StreamsConfig
from streamapp.kafka.schema_registry import configure_registry_serdes, registry_client

from conformance.harness import DRIVER_APPLICATION_ID, BrokerEngine, Engine, describe, final_values

AVRO_FLIGHT = "avro:schema_registry_fixtures:FLIGHT_SCHEMA"
AVRO_TOTALS = "avro:schema_registry_fixtures:TOTALS_SCHEMA"
PROTO_COUNT = "protobuf:schema_registry_fixtures:CarrierCount"
S, B = "string", "bytes"


def flights_topology() -> StreamsBuilder:
    builder = StreamsBuilder()
    totals = (
        builder.stream("flights", key_serde=S, value_serde=AVRO_FLIGHT, name="flights")
        .group_by_key()
        .aggregate(fx.empty_totals, fx.add_flight, value_serde=AVRO_TOTALS, name="totals", store="totals-store")
        .to_stream(name="changes")
    )
    totals.to("carrier-totals", name="totals-out")
    totals.map(fx.to_carrier_count, value_serde=PROTO_COUNT, name="to-count").to("carrier-counts", name="counts-out")
    # raw copies: the bytes the sinks wrote, for checks that do not go through our serdes
    builder.stream("carrier-totals", key_serde=S, value_serde=B, name="totals-raw").to("totals-raw", name="tr-out")
    builder.stream("carrier-counts", key_serde=S, value_serde=B, name="counts-raw").to("counts-raw", name="cr-out")
    return builder


FLIGHTS = [
    ("flights", "AA", {"carrier": "AA", "delay": 5}, 1_000),
    ("flights", "UA", {"carrier": "UA", "delay": -2}, 2_000),
    ("flights", "AA", {"carrier": "AA", "delay": 10}, 3_000),
]


def _registry(engine: Engine, registry_url: str) -> dict[str, Any]:
    """The config of a run, and the serdes of this (test) process bound to the same registry."""
    url = registry_url if engine.name == "broker" else "mock://conformance-schema-registry"
    return {"schema.registry.url": url}


def _streams_config(config: dict[str, Any]) -> StreamsConfig:
    return StreamsConfig.from_mapping({**config, "application.id": "registry-test", "bootstrap.servers": "unused"})


def _topic_prefix(engine: Engine) -> str:
    """The broker run's prefix of external topics (the folder of its log: ``<workdir>/<prefix>/``)."""
    return f"{engine.logs[-1].parent.name}." if isinstance(engine, BrokerEngine) else ""


def _split_wire(data: bytes) -> tuple[int, bytes]:
    """Confluent's framing: magic byte 0, 4-byte big-endian schema id, payload."""
    assert data[0] == 0, f"magic byte {data[0]}"
    (schema_id,) = struct.unpack(">I", data[1:5])
    return schema_id, data[5:]


def _subject_schema(engine: Engine, config: dict[str, Any], subject: str) -> tuple[int, str]:
    """``(id, schema)`` of the subject's latest version, asked from the registry itself."""
    url = str(config["schema.registry.url"])
    if url.startswith("mock://"):  # the mock registry lives in this process: ask the serdes' client
        latest = registry_client(_streams_config(config)).get_latest_version(subject)
        return int(latest.schema_id), str(latest.schema.schema_str)
    with urllib.request.urlopen(f"{url}/subjects/{subject}/versions/latest", timeout=10) as response:
        body = json.load(response)
    return int(body["id"]), str(body["schema"])


@pytest.fixture(scope="session")
def schema_registry_url() -> str:
    return fx.start_schema_registry()


@pytest.fixture
def registry_url(engine: Engine, request: pytest.FixtureRequest) -> str:
    if engine.name != "broker":
        return ""
    url: str = request.getfixturevalue("schema_registry_url")
    return url


def test_avro_in_avro_store_avro_and_protobuf_out_in_confluent_wire_format(engine: Engine, registry_url: str) -> None:
    config = _registry(engine, registry_url)
    description = describe(flights_topology())
    configure_registry_serdes(_streams_config(config), description)  # the test's own serdes (inputs, outputs)

    out = engine.run(
        description,
        FLIGHTS,
        ["carrier-totals", "carrier-counts", "totals-raw", "counts-raw", "{application_id}-totals-store-changelog"],
        config,
    )

    totals = [("AA", {"flights": 1, "delay": 5}, 1_000), ("UA", {"flights": 1, "delay": -2}, 2_000)]
    totals.append(("AA", {"flights": 2, "delay": 15}, 3_000))
    assert out["carrier-totals"] == totals
    # the broker's record cache may fold updates of one key within a commit: compare the final values
    assert final_values(out["{application_id}-totals-store-changelog"]) == {key: value for key, value, _ in totals}
    assert [(k, v.carrier, v.flights) for k, v, _ in out["carrier-counts"]] == [
        ("AA", "AA", 1),
        ("UA", "UA", 1),
        ("AA", "AA", 2),
    ]

    prefix = _topic_prefix(engine)
    app_id = f"{prefix[:-1]}-app" if prefix else DRIVER_APPLICATION_ID  # the harness' application ids
    _, changelog_schema = _subject_schema(engine, config, f"{app_id}-totals-store-changelog-value")
    assert json.loads(changelog_schema)["name"] == "CarrierTotals", "store data: registered under the changelog"
    totals_id, totals_schema = _subject_schema(engine, config, f"{prefix}carrier-totals-value")
    parsed = fastavro.parse_schema(json.loads(totals_schema))
    for (_, raw, _), (_, expected, _) in zip(out["totals-raw"], totals, strict=True):
        schema_id, payload = _split_wire(raw)
        assert schema_id == totals_id
        assert fastavro.schemaless_reader(io.BytesIO(payload), parsed) == expected
    counts_id, _ = _subject_schema(engine, config, f"{prefix}carrier-counts-value")
    decoded = []
    for _, raw, _ in out["counts-raw"]:
        schema_id, payload = _split_wire(raw)
        assert schema_id == counts_id
        assert payload[0] == 0, "message indexes [0] (the first message of the file) are the single byte 0"
        message = fx.CarrierCount.FromString(payload[1:])
        decoded.append((message.carrier, message.flights))
    assert decoded == [("AA", 1), ("UA", 1), ("AA", 2)]
