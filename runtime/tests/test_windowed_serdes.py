"""Windowed key serdes: Kafka's TimeWindowedSerializer and SessionWindowedSerializer byte layouts."""

from __future__ import annotations

import struct

import pytest
from streamapp.serdes import SerdeError, is_serde_name, serde_for
from streamapp.windowed import MAX_TIMESTAMP, SessionWindowedSerde, TimeWindowedSerde, Windowed


def test_time_windowed_keys_are_the_inner_key_then_the_big_endian_start() -> None:
    serde = serde_for("windowed:string:60000")
    raw = serde.serialize(Windowed("UA", 120_000, 180_000))
    assert raw == b"UA" + struct.pack(">q", 120_000)
    assert serde.deserialize(raw) == Windowed("UA", 120_000, 180_000)


def test_without_a_size_the_end_is_long_max_like_kafkas_deserializer() -> None:
    serde = serde_for("windowed:long")
    assert isinstance(serde, TimeWindowedSerde)
    assert serde.deserialize(struct.pack(">qq", 7, 5)) == Windowed(7, 5, MAX_TIMESTAMP)


def test_session_windowed_keys_are_the_inner_key_then_end_then_start() -> None:
    serde = serde_for("session_windowed:string")
    assert isinstance(serde, SessionWindowedSerde)
    raw = serde.serialize(Windowed("u", 10, 25))
    assert raw == b"u" + struct.pack(">qq", 25, 10)
    assert serde.deserialize(raw) == Windowed("u", 10, 25)


def test_json_inner_keys_round_trip_and_none_passes_through() -> None:
    serde = serde_for("windowed:json:10")
    key = Windowed("k", 0, 10)
    assert serde.deserialize(serde.serialize(key)) == key
    assert serde.serialize(None) is None
    assert serde.deserialize(None) is None


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("windowed:xml", "unknown serde 'xml'"),
        ("windowed:avro", "cannot be used without a fixed topic"),  # Schema Registry serdes are bound to a topic
        ("windowed:string:0", "window size must be a positive"),
        ("windowed:string:x", "window size must be a positive"),
        ("windowed:windowed:string", "plain inner serde"),
        ("session_windowed:", "plain inner serde"),
    ],
)
def test_malformed_windowed_serde_names_are_rejected(name: str, message: str) -> None:
    with pytest.raises(SerdeError, match=message):
        serde_for(name)
    assert not is_serde_name(name)


def test_plain_and_windowed_names_are_serde_names() -> None:
    assert is_serde_name("string")
    assert is_serde_name("windowed:string:5")
    assert is_serde_name("session_windowed:json")
    assert not is_serde_name("windowedstring")


@pytest.mark.parametrize("obj", ["plain", Windowed(None, 0, 1)])
def test_only_windowed_keys_with_a_key_serialize(obj: object) -> None:
    with pytest.raises(SerdeError):
        serde_for("windowed:string").serialize(obj)


def test_truncated_bytes_are_rejected() -> None:
    with pytest.raises(SerdeError, match="at least 8 bytes"):
        serde_for("windowed:string").deserialize(b"abc")
    with pytest.raises(SerdeError, match="at least 16 bytes"):
        serde_for("session_windowed:string").deserialize(b"0123456789")
