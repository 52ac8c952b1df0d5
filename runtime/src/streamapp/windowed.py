"""``Windowed`` keys and their serdes (Kafka Streams' ``Windowed<K>`` and ``WindowedSerdes``).

A windowed aggregation (``windowed_count`` / ``windowed_reduce`` / ``windowed_aggregate``) outputs a KTable whose
keys are ``Windowed(key, start, end)``: the grouping key and the window it aggregates, in epoch milliseconds.
Time windows are half-open ``[start, end)``; sliding and session windows are closed ``[start, end]`` (Kafka's
``TimeWindow`` vs ``SessionWindow`` inclusiveness, kept as is).

Serde names (usable as ``keySerde`` wherever a serde name is accepted):

- ``windowed:<inner>`` / ``windowed:<inner>:<sizeMs>``: Kafka's ``TimeWindowedSerializer`` layout, the inner key's
  bytes followed by the window start as an 8-byte big-endian signed long. The end is not on the wire; the
  deserializer computes ``start + sizeMs``, or uses ``2**63 - 1`` without a size (Kafka's
  ``TimeWindowedDeserializer`` with the default ``Long.MAX_VALUE`` window size).
- ``session_windowed:<inner>``: Kafka's ``SessionWindowedSerializer`` layout (``SessionKeySchema.toBinary``), the
  inner key's bytes, then the end, then the start, each an 8-byte big-endian signed long.

A ``None`` windowed key serializes to ``None``; a ``None`` inner key is an error (windowed keys are never null).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from streamapp.serdes import Serde, SerdeError, serde_for

__all__ = [
    "MAX_TIMESTAMP",
    "SessionWindowedSerde",
    "TimeWindowedSerde",
    "Windowed",
    "windowed_serde_for",
]

MAX_TIMESTAMP = 2**63 - 1
"""Kafka's ``Long.MAX_VALUE``: the end of a time window whose size is unknown."""

_LONG = struct.Struct(">q")
_TWO_LONGS = struct.Struct(">qq")


@dataclass(slots=True, unsafe_hash=True)
class Windowed:
    """A key and the window it belongs to: ``key`` (any serde-able value), ``start`` and ``end`` in epoch ms.

    Hashable (when ``key`` is) and ordered by field, so windowed keys can key dicts and be sorted in tests.
    Treat it as immutable (it is hashed by value); it is not a frozen dataclass only because one is built per
    windowed update: a frozen one costs ~0.2 us more to construct (``object.__setattr__`` per field).
    """

    key: Any
    start: int
    end: int

    def __str__(self) -> str:
        return f"[{self.key}@{self.start}/{self.end}]"


class TimeWindowedSerde:
    """``Windowed`` <-> inner key bytes + 8-byte big-endian window start (Kafka's ``TimeWindowedSerde``).

    ``window_size_ms``: the window size used to rebuild ``end`` on deserialization (``None``: end = 2**63 - 1).
    Raises SerdeError for a non-``Windowed`` object, a null inner key, or fewer than 8 bytes.
    """

    def __init__(self, inner: Serde, window_size_ms: int | None = None) -> None:
        self.inner = inner
        self.window_size_ms = window_size_ms
        self.name = f"windowed:{inner.name}" + (f":{window_size_ms}" if window_size_ms is not None else "")

    def serialize(self, obj: Any) -> bytes | None:
        if obj is None:
            return None
        if not isinstance(obj, Windowed):
            raise SerdeError(f"{self.name} serde expects a Windowed key, got {type(obj).__name__}")
        raw = self.inner.serialize(obj.key)
        if raw is None:
            raise SerdeError(f"{self.name} serde: the key of a windowed key must not be null")
        return raw + _LONG.pack(obj.start)

    def deserialize(self, data: bytes | None) -> Windowed | None:
        if data is None:
            return None
        if len(data) < 8:
            raise SerdeError(f"{self.name} serde: expected at least 8 bytes, got {len(data)}")
        raw = bytes(data)
        start: int = _LONG.unpack_from(raw, len(raw) - 8)[0]
        end = MAX_TIMESTAMP if self.window_size_ms is None else min(start + self.window_size_ms, MAX_TIMESTAMP)
        return Windowed(self.inner.deserialize(raw[:-8]), start, end)


class SessionWindowedSerde:
    """``Windowed`` <-> inner key bytes + 8-byte end + 8-byte start (Kafka's ``SessionWindowedSerde``).

    Raises SerdeError for a non-``Windowed`` object, a null inner key, or fewer than 16 bytes.
    """

    def __init__(self, inner: Serde) -> None:
        self.inner = inner
        self.name = f"session_windowed:{inner.name}"

    def serialize(self, obj: Any) -> bytes | None:
        if obj is None:
            return None
        if not isinstance(obj, Windowed):
            raise SerdeError(f"{self.name} serde expects a Windowed key, got {type(obj).__name__}")
        raw = self.inner.serialize(obj.key)
        if raw is None:
            raise SerdeError(f"{self.name} serde: the key of a windowed key must not be null")
        return raw + _TWO_LONGS.pack(obj.end, obj.start)

    def deserialize(self, data: bytes | None) -> Windowed | None:
        if data is None:
            return None
        if len(data) < 16:
            raise SerdeError(f"{self.name} serde: expected at least 16 bytes, got {len(data)}")
        raw = bytes(data)
        end, start = _TWO_LONGS.unpack_from(raw, len(raw) - 16)
        return Windowed(self.inner.deserialize(raw[:-16]), start, end)


def windowed_serde_for(name: str) -> Serde | None:
    """The windowed serde a ``windowed:...`` / ``session_windowed:...`` name denotes; ``None`` for other names.

    Raises SerdeError for a malformed windowed name (unknown inner serde, bad size).
    """
    kind, sep, rest = name.partition(":")
    if not sep or kind not in ("windowed", "session_windowed"):
        return None
    if kind == "session_windowed":
        return SessionWindowedSerde(_inner(name, rest))
    inner_name, _, size = rest.partition(":")
    inner = _inner(name, inner_name)
    if not size:
        return TimeWindowedSerde(inner)
    if not size.isdigit() or int(size) < 1:
        raise SerdeError(f"serde '{name}': the window size must be a positive number of milliseconds, got '{size}'")
    return TimeWindowedSerde(inner, int(size))


def _inner(name: str, inner_name: str) -> Serde:
    if not inner_name or inner_name.startswith(("windowed", "session_windowed")):
        raise SerdeError(f"serde '{name}': expected a plain inner serde name after the colon")
    try:
        return serde_for(inner_name)
    except SerdeError as exc:
        raise SerdeError(f"serde '{name}': {exc}") from None
