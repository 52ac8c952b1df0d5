"""Schema Registry serdes (``streamapp.serdes`` names, ``streamapp.kafka.schema_registry`` binding) against
confluent-kafka's in-process mock registry (``mock://``). Bytes are checked by hand and decoded with fastavro / the
Protobuf class, not only round-tripped through our serdes."""

from __future__ import annotations

import io
import json
import re
import struct
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fastavro
import pytest
import schema_registry_fixtures as fx
from confluent_kafka.schema_registry import Schema
from streamapp import StreamsBuilder
from streamapp.app import KafkaStreams
from streamapp.config import StreamsConfig
from streamapp.kafka.schema_registry import (
    EXTRA_HINT,
    RegistrySerdeSetupError,
    configure_registry_serdes,
    registry_client,
    registry_names,
)
from streamapp.serdes import RegistrySerdeName, SerdeError, install_registry_serdes, registry_serde_name, serde_for
from streamapp.testing import TopologyTestDriver
from streamapp.topology import TopologyDescription

AVRO_FLIGHT = "avro:schema_registry_fixtures:FLIGHT_SCHEMA"
AVRO_TOTALS = "avro:schema_registry_fixtures:TOTALS_SCHEMA"
PROTO_COUNT = "protobuf:schema_registry_fixtures:CarrierCount"


@pytest.fixture(autouse=True)
def no_binder_left_behind() -> Iterator[None]:
    yield
    install_registry_serdes(None)


def config(**extra: Any) -> StreamsConfig:
    """A streams config with its own mock registry (one per test: nothing registered by another test)."""
    values = {"application.id": "sr", "bootstrap.servers": "unused", "schema.registry.url": f"mock://{uuid.uuid4()}"}
    return StreamsConfig.from_mapping({**values, **extra})


def topology(value_serde: str, key_serde: str = "string") -> TopologyDescription:
    builder = StreamsBuilder()
    builder.stream("in", key_serde=key_serde, value_serde=value_serde).to("out")
    return builder.build()


def bind(cfg: StreamsConfig, name: str, topic: str = "flights", is_key: bool = False) -> Any:
    configure_registry_serdes(cfg, topology(name))
    return serde_for(name, topic, is_key=is_key)


def split(data: bytes) -> tuple[int, bytes]:
    assert data[0] == 0, f"magic byte {data[0]}"
    return struct.unpack(">I", data[1:5])[0], data[5:]


# -- names ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "parsed"),
    [
        ("avro", RegistrySerdeName("avro", None)),
        ("avro:pkg.schemas:FLIGHT", RegistrySerdeName("avro", "pkg.schemas:FLIGHT")),
        ("protobuf:pkg.flights_pb2:Flight", RegistrySerdeName("protobuf", "pkg.flights_pb2:Flight")),
        ("protobuf:m:Outer.Inner", RegistrySerdeName("protobuf", "m:Outer.Inner")),
        ("string", None),
        ("avrojson", None),
    ],
)
def test_registry_serde_names_are_format_and_module_attr_reference(name: str, parsed: RegistrySerdeName) -> None:
    assert registry_serde_name(name) == parsed


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("protobuf", "must look like 'protobuf:package.module:attr'"),
        ("avro:schemas", "must look like 'avro:package.module:attr'"),
        ("avro:schemas:", "must look like"),
        ("protobuf:a b:C", "must look like"),
    ],
)
def test_malformed_registry_serde_names_say_what_is_expected(name: str, message: str) -> None:
    with pytest.raises(SerdeError, match=message):
        registry_serde_name(name)
    with pytest.raises(ValueError, match=message):  # the topology's validation reports the same problem
        topology(name)


def test_topology_validation_accepts_registry_names_without_importing_anything() -> None:
    description = topology("avro:not_a_module_yet:SCHEMA", key_serde="protobuf:not.imported:Key")
    assert registry_names(description) == {"avro:not_a_module_yet:SCHEMA", "protobuf:not.imported:Key"}
    assert "not_a_module_yet" not in sys.modules


def test_a_registry_serde_needs_a_topic_and_an_installed_binder() -> None:
    with pytest.raises(SerdeError, match="pip install 'streamapp-runtime\\[schema-registry\\]'"):
        serde_for("avro", "flights")
    configure_registry_serdes(config(), topology("avro"))
    with pytest.raises(SerdeError, match="cannot be used without a fixed topic"):
        serde_for("avro")


# -- setup errors (build time) ----------------------------------------------------------------------


def test_without_the_extra_a_registry_topology_fails_at_build_time_naming_the_pip_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "confluent_kafka.schema_registry.avro", None)  # import fails like a missing one
    with pytest.raises(RegistrySerdeSetupError, match=re.escape(f"need the Schema Registry extra: {EXTRA_HINT}")):
        TopologyTestDriver(topology(AVRO_FLIGHT), {"schema.registry.url": "mock://x"})


def test_a_topology_without_registry_serdes_needs_neither_the_extra_nor_a_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "confluent_kafka.schema_registry.avro", None)
    with TopologyTestDriver(topology("json")) as driver:
        driver.create_input_topic("in").pipe_input("k", {"a": 1})
        assert driver.create_output_topic("out").read_value() == {"a": 1}


@pytest.mark.parametrize(
    ("name", "values", "message"),
    [
        (AVRO_FLIGHT, {"schema.registry.url": ""}, "need schema.registry.url"),
        ("avro:schema_registry_fixtures:MISSING", {}, "has no attribute 'MISSING'"),
        ("avro:no_such_module_here:S", {}, "cannot import module 'no_such_module_here'"),
        ("avro:schema_registry_fixtures:NOT_A_SCHEMA", {}, "must be a JSON string or a dict, got int"),
        ("avro:schema_registry_fixtures:SCHEMA_NOT_JSON", {}, "JSONDecodeError"),
        ("avro:schema_registry_fixtures:CarrierCount", {}, "must be a JSON string or a dict"),
        ("protobuf:schema_registry_fixtures:FLIGHT_SCHEMA", {}, "is not a protobuf message class"),
        ("avro:schema_registry_fixtures:TOTALS_SCHEMA", {"schema.registry.url": "ftp://x"}, "schema.registry"),
    ],
)
def test_setup_errors_name_the_serde_and_the_problem(name: str, values: dict[str, str], message: str) -> None:
    with pytest.raises(RegistrySerdeSetupError, match=message):
        configure_registry_serdes(config(**values), topology(name))


def test_registry_keys_of_the_streams_config_reach_the_client_without_their_prefix() -> None:
    cfg = config(**{"schema.registry.basic.auth.user.info": "user:secret", "auto.register.schemas": False})
    assert cfg.schema_registry["basic.auth.user.info"] == "user:secret"
    assert cfg.auto_register_schemas is False and cfg.use_latest_version is False
    assert StreamsConfig.from_mapping(cfg.to_mapping()) == cfg
    assert registry_client(cfg) is registry_client(cfg)  # one client (and schema cache) per registry config


def test_streamapp_run_refuses_a_registry_topology_without_a_url_before_it_starts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = {"application.id": "sr-app", "bootstrap.servers": "127.0.0.1:1", "http.port": 0}
    app = KafkaStreams(topology(AVRO_FLIGHT), StreamsConfig.from_mapping({**settings, "state.dir": str(tmp_path)}))
    assert app.run() == 1
    assert "The topology cannot run: Schema Registry serdes need schema.registry.url" in caplog.text


# -- wire format ------------------------------------------------------------------------------------


def test_avro_values_are_confluent_framed_with_the_id_registered_under_topic_value() -> None:
    cfg = config()
    serde = bind(cfg, AVRO_FLIGHT)
    data = serde.serialize({"carrier": "AA", "delay": -3})

    schema_id, payload = split(data)
    latest = registry_client(cfg).get_latest_version("flights-value")
    assert schema_id == latest.schema_id
    parsed = fastavro.parse_schema(json.loads(latest.schema.schema_str))
    assert fastavro.schemaless_reader(io.BytesIO(payload), parsed) == {"carrier": "AA", "delay": -3}
    assert serde.deserialize(data) == {"carrier": "AA", "delay": -3}


def test_avro_keys_register_under_topic_key() -> None:
    cfg = config()
    configure_registry_serdes(cfg, topology("string", key_serde=AVRO_TOTALS))
    data = serde_for(AVRO_TOTALS, "totals", is_key=True).serialize({"flights": 1, "delay": 2})
    assert split(data)[0] == registry_client(cfg).get_latest_version("totals-key").schema_id
    assert registry_client(cfg).get_subjects() == ["totals-key"]


def test_protobuf_values_carry_the_message_index_then_the_message_bytes() -> None:
    cfg = config()
    serde = bind(cfg, PROTO_COUNT, topic="counts")
    message = fx.CarrierCount(carrier="UA", flights=7)
    data = serde.serialize(message)

    schema_id, payload = split(data)
    assert schema_id == registry_client(cfg).get_latest_version("counts-value").schema_id
    assert payload[0] == 0  # message indexes [0]: the first message of the file
    assert fx.CarrierCount.FromString(payload[1:]) == message
    assert serde.deserialize(data) == message


def test_generic_avro_writes_with_the_latest_registered_schema_and_reads_with_the_writer_schema() -> None:
    cfg = config()
    serde = bind(cfg, "avro")
    with pytest.raises(SerdeError, match="cannot serialize dict"):  # nothing registered under flights-value yet
        serde.serialize({"carrier": "AA", "delay": 1})
    schema_id = registry_client(cfg).register_schema("flights-value", Schema(json.dumps(fx.FLIGHT_SCHEMA), "AVRO"))
    data = serde.serialize({"carrier": "AA", "delay": 1})
    assert split(data)[0] == schema_id
    assert serde.deserialize(data) == {"carrier": "AA", "delay": 1}


def test_without_auto_registration_an_unregistered_schema_cannot_be_written() -> None:
    cfg = config(**{"auto.register.schemas": False})
    serde = bind(cfg, AVRO_FLIGHT)
    with pytest.raises(SerdeError, match="value of topic 'flights'"):
        serde.serialize({"carrier": "AA", "delay": 1})
    registry_client(cfg).register_schema("flights-value", Schema(json.dumps(fx.FLIGHT_SCHEMA), "AVRO"))
    assert split(serde.serialize({"carrier": "AA", "delay": 1}))[0] > 0


def test_use_latest_version_writes_with_the_subjects_latest_schema_not_its_own() -> None:
    cfg = config(**{"use.latest.version": True})
    latest = json.loads(fx.TOTALS_SCHEMA)
    latest["fields"].append({"name": "note", "type": ["null", "string"], "default": None})
    latest_id = registry_client(cfg).register_schema("flights-value", Schema(json.dumps(latest), "AVRO"))
    data = bind(cfg, AVRO_TOTALS).serialize({"flights": 1, "delay": 2})
    schema_id, payload = split(data)
    assert schema_id == latest_id
    decoded = fastavro.schemaless_reader(io.BytesIO(payload), fastavro.parse_schema(latest))
    assert decoded == {"flights": 1, "delay": 2, "note": None}
    assert registry_client(cfg).get_versions("flights-value") == [1], "nothing auto-registered"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"carrier": "AA"}', "cannot deserialize 17 bytes"),  # JSON: wrong magic byte
        (b"\x00\x00\x01\x86\xa0\x04AA\x02", "cannot deserialize"),  # schema id 100000: unknown
        (b"\x00", "cannot deserialize 1 bytes"),  # truncated framing
    ],
)
def test_bytes_that_are_not_registry_avro_raise_serde_error(data: bytes, message: str) -> None:
    serde = bind(config(), AVRO_FLIGHT)
    with pytest.raises(SerdeError, match=message):
        serde.deserialize(data)


def test_a_value_that_does_not_fit_the_schema_raises_serde_error() -> None:
    with pytest.raises(SerdeError, match="value of topic 'flights'"):
        bind(config(), AVRO_FLIGHT).serialize({"carrier": "AA"})


def test_none_passes_through_and_bindings_are_shared_per_topic_and_field() -> None:
    serde = bind(config(), AVRO_FLIGHT)
    assert serde.serialize(None) is None and serde.deserialize(None) is None
    assert serde_for(AVRO_FLIGHT, "flights") is serde
    assert serde_for(AVRO_FLIGHT, "flights", is_key=True) is not serde
    assert serde_for(AVRO_FLIGHT, "other") is not serde


# -- the driver's deserialization handler -----------------------------------------------------------


def test_on_the_driver_a_record_that_is_not_avro_goes_to_the_dead_letter_topic_and_the_next_is_processed() -> None:
    settings = {
        "schema.registry.url": f"mock://{uuid.uuid4()}",
        "default.deserialization.exception.handler": "dead_letter_queue",
        "errors.dead.letter.queue.topic.name": "dead-letters",
    }
    with TopologyTestDriver(topology(AVRO_FLIGHT), settings, partitions={"dead-letters": 1}) as driver:
        typed, raw = driver.create_input_topic("in"), driver.create_input_topic("in", value_serde="bytes")
        typed.pipe_input("AA", {"carrier": "AA", "delay": 1})
        raw.pipe_input("AA", b"not avro")
        typed.pipe_input("UA", {"carrier": "UA", "delay": 2})
        out = driver.create_output_topic("out").read_key_values_to_list()
        letters = driver.create_output_topic("dead-letters", key_serde="bytes", value_serde="bytes")
        assert out == [("AA", {"carrier": "AA", "delay": 1}), ("UA", {"carrier": "UA", "delay": 2})]
        assert letters.read_key_values_to_list() == [(b"AA", b"not avro")]
