"""Default serdes (Kafka's ``default.key.serde`` / ``default.value.serde``): a source, table, global table, sink,
repartition or store that names no serde gets the config's, at build time or when a document is loaded."""

from __future__ import annotations

from typing import Any

import pytest
from streamapp import StreamsBuilder, TopologyError
from streamapp.config import ConfigError, StreamsConfig
from streamapp.dsl.builder import with_default_serdes
from streamapp.dsl.windows import TimeWindows

DEFAULTS = {"default.key.serde": "string", "default.value.serde": "json"}


def serdes(builder: StreamsBuilder, config: dict[str, Any] | None = None) -> dict[str, tuple[str, str]]:
    description = builder.build(config)
    found = {node.name: (node.key_serde, node.value_serde) for node in description.nodes if hasattr(node, "key_serde")}
    found.update({f"store {s.name}": (s.key_serde, s.value_serde) for s in description.stores})
    return found


def unnamed() -> StreamsBuilder:
    builder = StreamsBuilder()
    planes = builder.table("planes", name="planes")
    flights = builder.stream("flights", name="flights")
    flights.repartition(name="by-tail").join(planes, "builtins:max", name="with-plane").to("out", name="out")
    builder.global_table("airports", name="airports")
    return builder


def test_unnamed_serdes_are_bytes_without_defaults() -> None:
    assert set(serdes(unnamed()).values()) == {("bytes", "bytes")}


def test_unnamed_serdes_take_the_config_defaults_given_to_build() -> None:
    assert serdes(unnamed(), DEFAULTS) == {
        "planes": ("string", "json"),
        "flights": ("string", "json"),
        "by-tail": ("string", "json"),
        "out": ("string", "json"),
        "airports": ("string", "json"),
        "store planes-store": ("string", "json"),
        "store airports-store": ("string", "json"),
        "store with-plane-store": ("string", "json"),
    }


def test_named_serdes_win_and_the_builders_config_is_the_fallback() -> None:
    builder = StreamsBuilder({"default.key.serde": "long"})
    builder.stream("in", value_serde="string", name="in").to("out", key_serde="bytes", name="out")

    assert serdes(builder) == {"in": ("long", "string"), "out": ("bytes", "string")}
    assert serdes(builder, {"default.key.serde": "int"}) == {"in": ("int", "string"), "out": ("bytes", "string")}


def test_a_windowed_key_serde_wraps_the_default_key_serde() -> None:
    builder = StreamsBuilder()
    counts = builder.stream("in", name="in").group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(10))
    counts.count(name="count", store="counts").to_stream(name="changes").to("out", value_serde="long", name="out")

    assert serdes(builder, DEFAULTS)["out"] == ("windowed:string:10", "long")


def test_an_unknown_default_serde_is_refused_naming_the_key() -> None:
    with pytest.raises(TopologyError, match=r"default\.value\.serde: unknown serde 'jsn'"):
        unnamed().build({"default.value.serde": "jsn"})
    with pytest.raises(ConfigError, match=r"'default\.key\.serde': unknown serde 'strin'"):
        StreamsConfig.from_mapping({"application.id": "a", "bootstrap.servers": "b", "default.key.serde": "strin"})


def test_a_document_without_serdes_takes_the_config_defaults_and_keeps_named_ones() -> None:
    document = {
        "nodes": [
            {"name": "in", "type": "source", "topics": ["in"], "valueSerde": "long"},
            {"name": "up", "type": "filter", "input": "in", "predicate": "builtins:bool"},
            {"name": "out", "type": "sink", "input": "up", "topic": "out"},
        ],
        "stores": [{"name": "s", "type": "key_value", "key_serde": "int"}],
    }

    filled = with_default_serdes(document, DEFAULTS)

    assert filled["nodes"][0] == {**document["nodes"][0], "keySerde": "string"}
    assert filled["nodes"][1] == document["nodes"][1]
    assert filled["nodes"][2] == {**document["nodes"][2], "keySerde": "string", "valueSerde": "json"}
    assert filled["stores"] == [{"name": "s", "type": "key_value", "key_serde": "int", "valueSerde": "json"}]
