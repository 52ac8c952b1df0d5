"""Serdes round-trip their types, pass None (tombstones) through, and match Kafka's wire formats."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from streamapp.serdes import SERDE_NAMES, SerdeError, serde_for

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=20,
)


@given(st.text())
def test_string_serde_round_trips_any_text(text: str) -> None:
    serde = serde_for("string")
    assert serde.deserialize(serde.serialize(text)) == text


@given(json_values)
def test_json_serde_round_trips_any_json_value(value: Any) -> None:
    serde = serde_for("json")
    assert serde.deserialize(serde.serialize(value)) == value


@given(json_values)
def test_json_serde_writes_exactly_what_json_dumps_writes(value: Any) -> None:
    """Serialized keys address store entries and choose partitions: the bytes must not change with the encoder."""
    assume(value is not None)  # a tombstone, passed through
    expected = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
    assert serde_for("json").serialize(value) == expected


@given(st.floats(allow_nan=False, allow_infinity=False) | st.floats(min_value=1e-10, max_value=1e-4))
def test_json_serde_writes_every_float_as_json_dumps_does(number: float) -> None:
    for value in (number, [number], {"ratio": number, "tail": None}):
        expected = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
        assert serde_for("json").serialize(value) == expected


@given(st.integers() | st.integers(min_value=2**63 - 2, max_value=2**64 + 2) | st.booleans())
def test_json_serde_writes_every_integer_and_bool_as_json_dumps_does(number: int) -> None:
    expected = json.dumps(number, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
    assert serde_for("json").serialize(number) == expected


def test_json_serde_refuses_an_integer_beyond_pythons_digit_limit_as_a_serde_error() -> None:
    with pytest.raises(SerdeError, match="json serde: cannot serialize int"):
        serde_for("json").serialize(10**5000)


json_texts = st.builds(
    lambda value, ensure_ascii, indent: json.dumps(value, ensure_ascii=ensure_ascii, indent=indent).encode(),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
        lambda children: st.lists(children) | st.dictionaries(st.text(), children),
        max_leaves=20,
    ),
    st.booleans(),
    st.none() | st.integers(min_value=0, max_value=2),
)


@given(json_texts | st.binary() | st.text().map(str.encode) | st.text().map(lambda text: text.encode("utf-16")))
def test_json_serde_reads_exactly_what_json_loads_reads(data: bytes) -> None:
    try:
        expected = json.loads(data)
    except (ValueError, RecursionError):
        with pytest.raises(SerdeError):
            serde_for("json").deserialize(data)
        return
    # repr: NaN != NaN, and 1 == 1.0 == True would hide a float read for an int
    assert repr(serde_for("json").deserialize(data)) == repr(expected)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"12345678901234567890123", 12345678901234567890123),
        (b"-9223372036854775809", -9223372036854775809),
        (b'{"id":18446744073709551616}', {"id": 18446744073709551616}),
        (b"[1e400]", [float("inf")]),
        (b'"\\ud800"', "\ud800"),
        ('\ufeff{"a":1}'.encode(), {"a": 1}),
    ],
)
def test_json_serde_reads_integers_beyond_64_bits_and_stdlib_extensions_exactly(data: bytes, expected: Any) -> None:
    assert repr(serde_for("json").deserialize(data)) == repr(expected)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({1: "a", None: 2}, b'{"1":"a","null":2}'),
        ([2**64], b"[18446744073709551616]"),
        ({"delay": 1e-05, "rate": 1.5e-07}, b'{"delay":1e-05,"rate":1.5e-07}'),
        ({"tail": None, "seats": 2}, b'{"tail":null,"seats":2}'),
    ],
)
def test_json_serde_writes_keys_big_integers_and_small_floats_as_json_dumps_does(value: Any, expected: bytes) -> None:
    assert serde_for("json").serialize(value) == expected


@pytest.mark.parametrize(
    "value", [{"a": [float("nan")]}, [None, float("inf")], {"x": None, "y": -float("inf")}, (None, (float("nan"),))]
)
def test_json_serde_refuses_nan_and_infinity_anywhere(value: Any) -> None:
    with pytest.raises(SerdeError, match="json serde: cannot serialize"):
        serde_for("json").serialize(value)


@pytest.mark.parametrize(
    ("data", "message"),
    [(b"[" * 100_000 + b"]" * 100_000, "bytes are not JSON"), (b"1" * 5000, "bytes are not JSON")],
)
def test_json_serde_reports_too_deep_or_too_long_input_as_a_serde_error(data: bytes, message: str) -> None:
    with pytest.raises(SerdeError, match=message):
        serde_for("json").deserialize(data)


def test_json_serde_reports_a_value_nested_too_deep_as_a_serde_error() -> None:
    value: list[Any] = []
    for _ in range(100_000):
        value = [value]
    with pytest.raises(SerdeError, match="json serde: cannot serialize list"):
        serde_for("json").serialize(value)


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_long_serde_round_trips_every_signed_64_bit_integer(number: int) -> None:
    serde = serde_for("long")
    data = serde.serialize(number)
    assert data is not None and len(data) == 8
    assert serde.deserialize(data) == number


@given(st.binary())
def test_bytes_serde_round_trips_bytes_unchanged(data: bytes) -> None:
    serde = serde_for("bytes")
    assert serde.serialize(data) == data
    assert serde.deserialize(data) == data


@pytest.mark.parametrize("name", SERDE_NAMES)
def test_none_passes_through_every_serde_as_a_tombstone(name: str) -> None:
    serde = serde_for(name)
    assert serde.serialize(None) is None
    assert serde.deserialize(None) is None


def test_serde_names_are_the_closed_set() -> None:
    assert SERDE_NAMES == ("bytes", "double", "int", "json", "long", "string")


@pytest.mark.parametrize(
    ("number", "wire"),
    [
        (0, b"\x00\x00\x00\x00\x00\x00\x00\x00"),
        (1, b"\x00\x00\x00\x00\x00\x00\x00\x01"),
        (-1, b"\xff\xff\xff\xff\xff\xff\xff\xff"),
        (258, b"\x00\x00\x00\x00\x00\x00\x01\x02"),
        (2**63 - 1, b"\x7f\xff\xff\xff\xff\xff\xff\xff"),
        (-(2**63), b"\x80\x00\x00\x00\x00\x00\x00\x00"),
    ],
)
def test_long_serde_writes_big_endian_twos_complement_like_kafkas_long_serializer(number: int, wire: bytes) -> None:
    assert serde_for("long").serialize(number) == wire
    assert serde_for("long").deserialize(wire) == number


@pytest.mark.parametrize(
    ("name", "number", "wire"),
    [
        ("int", 0, b"\x00\x00\x00\x00"),
        ("int", -1, b"\xff\xff\xff\xff"),
        ("int", 258, b"\x00\x00\x01\x02"),
        ("int", 2**31 - 1, b"\x7f\xff\xff\xff"),
        ("double", 1.0, b"\x3f\xf0\x00\x00\x00\x00\x00\x00"),
        ("double", -2.5, b"\xc0\x04\x00\x00\x00\x00\x00\x00"),
    ],
)
def test_int_and_double_serdes_write_big_endian_like_kafkas_integer_and_double_serializers(
    name: str, number: float, wire: bytes
) -> None:
    assert serde_for(name).serialize(number) == wire
    assert serde_for(name).deserialize(wire) == number


def test_string_serde_is_utf8() -> None:
    assert serde_for("string").serialize("Zürich ✈") == "Zürich ✈".encode()


def test_json_serde_writes_compact_utf8_json() -> None:
    assert serde_for("json").serialize({"carrier": "UA", "dep_time": None, "city": "Zürich"}) == (
        '{"carrier":"UA","dep_time":null,"city":"Zürich"}'.encode()
    )


@pytest.mark.parametrize(
    ("name", "obj", "message"),
    [
        ("string", 42, "string serde expects str, got int"),
        ("long", "42", "long serde expects int, got str"),
        ("long", True, "long serde expects int, got bool"),
        ("long", 2**63, "long serde: 9223372036854775808 does not fit in 8 bytes"),
        ("int", 2**31, "int serde: 2147483648 does not fit in 4 bytes"),
        ("int", 1.5, "int serde expects int, got float"),
        ("double", "1.5", "double serde expects float, got str"),
        ("json", float("nan"), "json serde: cannot serialize float"),
        ("json", {1, 2}, "json serde: cannot serialize set"),
        ("bytes", "text", "bytes serde expects bytes, got str"),
    ],
)
def test_serialize_rejects_values_of_the_wrong_type(name: str, obj: Any, message: str) -> None:
    with pytest.raises(SerdeError, match=message):
        serde_for(name).serialize(obj)


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("string", b"\xff\xfe", "string serde: bytes are not UTF-8"),
        ("json", b"{not json", "json serde: bytes are not JSON"),
        ("long", b"\x00\x01", "long serde: expected 8 bytes, got 2"),
        ("int", b"\x00\x01", "int serde: expected 4 bytes, got 2"),
        ("double", b"\x00", "double serde: expected 8 bytes, got 1"),
    ],
)
def test_deserialize_rejects_malformed_bytes(name: str, data: bytes, message: str) -> None:
    with pytest.raises(SerdeError, match=message):
        serde_for(name).deserialize(data)


def test_unknown_serde_name_is_an_error_listing_the_known_names() -> None:
    with pytest.raises(SerdeError, match="unknown serde 'xml'; known serdes: bytes, double, int, json, long, string"):
        serde_for("xml")
    assert issubclass(SerdeError, ValueError)
