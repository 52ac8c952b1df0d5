"""Serdes: how keys and values become record bytes and back.

The closed set of serde names a topology description may use (``keySerde`` / ``valueSerde``):

- ``string``: ``str`` as UTF-8 (Kafka's ``StringSerializer``).
- ``json``: any JSON value, UTF-8 compact JSON (no NaN/Infinity: those are not JSON); read as ``json.loads``
  reads it, written by orjson (``JsonSerde``).
- ``long``: ``int`` in [-2**63, 2**63) as 8-byte big-endian two's complement (Kafka's ``LongSerializer``).
- ``int``: ``int`` in [-2**31, 2**31) as 4-byte big-endian two's complement (Kafka's ``IntegerSerializer``).
- ``double``: ``float`` as 8-byte big-endian IEEE 754 (Kafka's ``DoubleSerializer``).
- ``bytes``: ``bytes`` unchanged (Kafka's ``ByteArraySerializer``).

Schema Registry serdes (the optional extra ``streamapp-runtime[schema-registry]``; docs/serdes.md), Confluent's
wire format (magic byte 0, 4-byte big-endian schema id, payload) through confluent-kafka's serializers:

- ``avro``: generic Avro; values are what fastavro reads with the writer's schema (records are dicts). Writing
  uses the subject's latest registered schema (Confluent's ``use.latest.version``).
- ``avro:<module>:<attr>``: Avro with the schema ``attr`` of ``module`` (a JSON string or a dict), registered under
  the subject and used as the reader schema.
- ``protobuf:<module>:<MessageClass>``: Protobuf with a generated message class (values are its instances).

A Schema Registry serde is bound to a topic and to the key or the value where the topology uses it (Confluent's
``SerializationContext``; subject ``<topic>-key`` / ``<topic>-value``, TopicNameStrategy): ``serde_for(name,
topic, is_key=...)``. Only the syntax of these names is checked here; the execution layer installs the binder
that builds them (``install_registry_serdes``, from ``streamapp.kafka.schema_registry``).

``None`` passes through every serde unchanged in both directions: a null value is a tombstone, a null
key is a record without a key (Kafka's serializers do the same).
"""

from __future__ import annotations

import json
import math
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

__all__ = [
    "REGISTRY_FORMATS",
    "SERDE_NAMES",
    "RegistrySerdeBinder",
    "RegistrySerdeName",
    "Serde",
    "SerdeError",
    "install_registry_serdes",
    "is_serde_name",
    "registry_serde_name",
    "serde_for",
]


class SerdeError(ValueError):
    """An object cannot be serialized, or bytes cannot be deserialized, by the chosen serde."""


class Serde(Protocol):
    """Serializer and deserializer for one type; both pass ``None`` through."""

    name: str

    def serialize(self, obj: Any) -> bytes | None: ...

    def deserialize(self, data: bytes | None) -> Any: ...


class StringSerde:
    """``str`` <-> UTF-8 bytes."""

    name = "string"

    def serialize(self, obj: Any) -> bytes | None:
        if obj is None:
            return None
        if not isinstance(obj, str):
            raise SerdeError(f"string serde expects str, got {type(obj).__name__}")
        return obj.encode("utf-8")

    def deserialize(self, data: bytes | None) -> str | None:
        if data is None:
            return None
        try:
            return bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SerdeError(f"string serde: bytes are not UTF-8: {exc}") from exc


_JSON_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
"""What ``json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False)`` uses, built once
(``json.dumps`` builds a new encoder per call with non-default arguments)."""
_JSON_DECODER = json.JSONDecoder()
_NOT_PLAIN_UTF8_START = frozenset((0x00, 0xEF, 0xFE, 0xFF))
"""First bytes for which ``json.detect_encoding`` may answer something else than plain UTF-8 (a BOM, or
UTF-16/32 with a NUL byte first)."""
_ORJSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_SUBCLASS
"""Types the stdlib encoder refuses or writes differently (dataclasses, datetimes, subclasses of the JSON
types) are left to it: orjson raises for them and the stdlib path decides."""
_DIGITS_ONLY = bytes(0x30 if 0x30 <= byte <= 0x39 else 0x20 for byte in range(256))
"""``bytes.translate`` table: every digit to ``0``, everything else to a space."""
_LONG_DIGIT_RUN = b"0" * 19
"""19 digits in a row: the shortest integer literal that may fall outside [-2**63, 2**64), where orjson
returns a float instead of the exact ``int`` (every integer with at most 18 digits is inside)."""


class JsonSerde:
    """JSON value <-> compact UTF-8 JSON bytes, with ``json.loads`` / ``json.dumps`` semantics on orjson's speed.

    ``deserialize`` returns exactly what ``json.loads(data)`` returns: orjson parses (3-4x faster), and the
    stdlib parses whatever orjson refuses or could read differently: a run of 19 or more digits (an integer
    beyond 64 bits, which orjson turns into a float), ``NaN``/``Infinity``, lone surrogates, UTF-16/32 or a BOM.
    (One leniency: nesting deeper than Python's recursion limit allows, up to orjson's 1024 levels, is read.)

    ``serialize`` returns exactly ``json.dumps(obj, separators=(",", ":"), ensure_ascii=False,
    allow_nan=False).encode()``, written by orjson (~10x faster) whenever orjson's bytes are the same: the stdlib
    writes values with floats of exponent -5 to -9 (orjson writes ``0.00001`` and ``1.5e-7`` where the stdlib
    writes ``1e-05`` and ``1.5e-07``), non-string dict keys, integers beyond 64 bits, dataclasses, datetimes and
    subclasses of ``str``/``int``/``dict``/``list``. Byte equality matters: serialized keys address store entries
    and choose partitions. NaN and infinities are refused anywhere in the value (orjson would write ``null``).
    One leniency: ``Enum`` members and ``UUID``s are written (as their value and as a string) where
    ``json.dumps`` raises.

    Errors: SerdeError (a ``ValueError``) for a value JSON cannot hold and for bytes that are not JSON
    (including nesting too deep and integers beyond Python's 4300-digit conversion limit).
    """

    name = "json"

    def serialize(self, obj: Any) -> bytes | None:
        if obj is None:
            return None
        if type(obj) is int:  # json.dumps writes int.__repr__ (a bool is not an int here); orjson refuses > 64 bits
            try:
                return repr(obj).encode()
            except ValueError as exc:  # beyond Python's int-to-str digit limit, as json.dumps raises
                raise SerdeError(f"json serde: cannot serialize int: {exc}") from exc
        try:
            data = orjson.dumps(obj, option=_ORJSON_OPTIONS)
        except TypeError:
            return self._serialize_stdlib(obj)
        if b"e-" in data or b"0.0000" in data:
            return self._serialize_stdlib(obj)  # maybe a float orjson writes differently (see above)
        if b"null" in data and not _all_finite(obj):
            return self._serialize_stdlib(obj)  # orjson wrote NaN or an infinity as null: the stdlib raises
        return data

    def _serialize_stdlib(self, obj: Any) -> bytes:
        try:
            return _JSON_ENCODER.encode(obj).encode("utf-8")
        except (TypeError, ValueError, RecursionError) as exc:
            raise SerdeError(f"json serde: cannot serialize {type(obj).__name__}: {exc}") from exc

    def deserialize(self, data: bytes | None) -> Any:
        if data is None:
            return None
        if _LONG_DIGIT_RUN not in bytes(data).translate(_DIGITS_ONLY):
            try:
                return orjson.loads(data)
            except orjson.JSONDecodeError:
                pass  # NaN, lone surrogates, other encodings or not JSON at all: json.loads decides
        try:
            if len(data) >= 2 and data[0] not in _NOT_PLAIN_UTF8_START and data[1] != 0:
                # json.loads would detect UTF-8 and decode with "surrogatepass" too
                return _JSON_DECODER.decode(bytes(data).decode("utf-8", "surrogatepass"))
            return json.loads(bytes(data))
        except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            raise SerdeError(f"json serde: bytes are not JSON: {exc}") from exc


def _all_finite(value: Any) -> bool:
    """No NaN or infinity anywhere in a JSON value (lists, tuples and dict values are walked; ~2 us per flight)."""
    if isinstance(value, dict):
        value = value.values()
    elif not isinstance(value, list | tuple):
        return not isinstance(value, float) or math.isfinite(value)
    for item in value:
        if isinstance(item, float):
            if not math.isfinite(item):
                return False
        elif isinstance(item, dict | list | tuple) and not _all_finite(item):
            return False
    return True


class FixedWidthSerde:
    """A number <-> its fixed-width big-endian encoding, like Kafka's ``LongSerializer``,
    ``IntegerSerializer`` and ``DoubleSerializer`` (and their deserializers).

    ``name``: the serde name; ``layout``: the ``struct`` format (``>q``, ``>i``, ``>d``); ``kind``: ``int``
    (integers in the layout's range; ``bool`` refused) or ``float`` (any ``int`` or ``float``).
    Raises SerdeError for a wrong type, an out-of-range integer, or bytes of the wrong length.
    """

    def __init__(self, name: str, layout: str, kind: type) -> None:
        self.name = name
        self._struct = struct.Struct(layout)
        self._kind = kind

    def serialize(self, obj: Any) -> bytes | None:
        if obj is None:
            return None
        allowed = (int,) if self._kind is int else (int, float)
        if not isinstance(obj, allowed) or isinstance(obj, bool):
            raise SerdeError(f"{self.name} serde expects {self._kind.__name__}, got {type(obj).__name__}")
        try:
            return self._struct.pack(obj)
        except struct.error as exc:
            raise SerdeError(f"{self.name} serde: {obj} does not fit in {self._struct.size} bytes") from exc

    def deserialize(self, data: bytes | None) -> Any:
        if data is None:
            return None
        if len(data) != self._struct.size:
            raise SerdeError(f"{self.name} serde: expected {self._struct.size} bytes, got {len(data)}")
        return self._struct.unpack(bytes(data))[0]


class BytesSerde:
    """``bytes`` unchanged."""

    name = "bytes"

    def serialize(self, obj: Any) -> bytes | None:
        if obj is None:
            return None
        if not isinstance(obj, bytes | bytearray | memoryview):
            raise SerdeError(f"bytes serde expects bytes, got {type(obj).__name__}")
        return bytes(obj)

    def deserialize(self, data: bytes | None) -> bytes | None:
        return None if data is None else bytes(data)


_SERDES: dict[str, Serde] = {
    s.name: s
    for s in (
        StringSerde(),
        JsonSerde(),
        FixedWidthSerde("long", ">q", int),
        FixedWidthSerde("int", ">i", int),
        FixedWidthSerde("double", ">d", float),
        BytesSerde(),
    )
}

SERDE_NAMES: tuple[str, ...] = tuple(sorted(_SERDES))
"""Every plain serde name a topology description may use (see also windowed and Schema Registry names)."""

REGISTRY_FORMATS = ("avro", "protobuf")
"""The Schema Registry serde formats: a name is ``<format>`` or ``<format>:<module>:<attr>``."""

_REFERENCE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
"""``package.module:attr`` or ``package.module:Outer.attr``, as user functions are referenced."""


@dataclass(frozen=True, slots=True)
class RegistrySerdeName:
    """A parsed Schema Registry serde name: ``format`` (``avro`` / ``protobuf``) and ``reference``
    (``"module:attr"`` of the Avro schema or the Protobuf message class; ``None`` for generic ``avro``)."""

    format: str
    reference: str | None


RegistrySerdeBinder = Callable[[str, RegistrySerdeName, str, bool], Serde]
"""Builds the serde ``(name, parsed name, topic, is_key)`` denotes; raises SerdeError."""

_registry_binder: RegistrySerdeBinder | None = None


def install_registry_serdes(binder: RegistrySerdeBinder | None) -> None:
    """Make ``serde_for`` build Schema Registry serdes with ``binder`` in this process (``None``: remove it).

    Called by the execution layer once it knows the streams config (``streamapp.kafka.schema_registry``).
    """
    global _registry_binder
    _registry_binder = binder


def registry_serde_name(name: str) -> RegistrySerdeName | None:
    """The parsed Schema Registry serde name, ``None`` when ``name`` is not one (syntax only, nothing imported).

    Raises SerdeError for a malformed one: ``protobuf`` without a message class, or a reference that is not
    ``package.module:attr``.
    """
    fmt, sep, reference = name.partition(":")
    if fmt not in REGISTRY_FORMATS:
        return None
    if not sep and fmt == "avro":
        return RegistrySerdeName("avro", None)
    if not _REFERENCE.match(reference):
        what = "an Avro schema" if fmt == "avro" else "a generated message class"
        raise SerdeError(f"serde '{name}' must look like '{fmt}:package.module:attr' (attr: {what})")
    return RegistrySerdeName(fmt, reference)


def serde_for(name: str, topic: str | None = None, *, is_key: bool = False) -> Serde:
    """The serde called ``name``, for the key (``is_key``) or the value of ``topic``.

    Plain and windowed serdes ignore ``topic``. A Schema Registry serde needs both ``topic`` and the binder the
    execution layer installs (``install_registry_serdes``). Besides ``SERDE_NAMES``, windowed key serdes are
    named ``windowed:<inner>[:<sizeMs>]`` and ``session_windowed:<inner>`` (``streamapp.windowed``).
    Raises SerdeError naming the known serdes for an unknown name, or why a Schema Registry serde is unavailable.
    """
    try:
        return _SERDES[name]
    except KeyError:
        pass
    registry = registry_serde_name(name)
    if registry is not None:
        if topic is None:
            raise SerdeError(
                f"serde '{name}' is bound to the topic it is used with (subject '<topic>-key'/'-value'); "
                "it cannot be used without a fixed topic (a topicExtractor sink, a windowed key's inner serde)"
            )
        if _registry_binder is None:
            raise SerdeError(
                f"serde '{name}' needs the Schema Registry: pip install 'streamapp-runtime[schema-registry]' "
                "and set schema.registry.url"
            )
        return _registry_binder(name, registry, topic, is_key)
    from streamapp.windowed import windowed_serde_for  # windowed serdes wrap the plain ones

    windowed = windowed_serde_for(name)
    if windowed is not None:
        return windowed
    raise SerdeError(
        f"unknown serde '{name}'; known serdes: {', '.join(SERDE_NAMES)}, windowed:<serde>, avro, "
        "avro:<module>:<schema>, protobuf:<module>:<MessageClass>"
    )


def is_serde_name(name: str) -> bool:
    """True when ``name`` is a plain, windowed or (syntactically) Schema Registry serde name."""
    try:
        if registry_serde_name(name) is not None:
            return True
        serde_for(name)
    except SerdeError:
        return False
    return True
