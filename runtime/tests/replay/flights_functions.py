"""User functions of the flights parity topologies (imported by ``module:attr`` on both engines: the streaming
runtime's worker process and Spark's Python workers)."""

from __future__ import annotations

from typing import Any


def departed(key: Any, flight: dict[str, Any]) -> bool:
    return flight.get("dep_time") is not None


def carrier(key: Any, flight: dict[str, Any]) -> str:
    return str(flight["carrier"])


def with_plane(flight: dict[str, Any], plane: dict[str, Any]) -> dict[str, Any]:
    return {"flight": flight["flight"], "carrier": flight["carrier"], "model": plane["model"], "year": plane["year"]}
