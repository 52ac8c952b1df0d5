"""User functions of the integration-test topologies (referenced as ``integration_functions:<name>``).

Values are JSON objects ``{"n": int, "color": str}``; flights (``test_record_cache_loses_nothing_when_tasks_move``)
are ``{"n": int, "carrier": str}`` and carriers ``{"name": str}``.
"""

from __future__ import annotations

from typing import Any


def color(key: Any, value: dict[str, Any]) -> str:
    return str(value["color"])


def not_multiple_of_three(key: Any, value: dict[str, Any]) -> bool:
    return int(value["n"]) % 3 != 0


def carrier(key: Any, value: dict[str, Any]) -> str:
    return str(value["carrier"])


def with_airline(flight: dict[str, Any], airline: dict[str, Any]) -> dict[str, Any]:
    """The stream-table joiner: the flight with its carrier's airline name."""
    return {"n": flight["n"], "airline": airline["name"]}


def airline(key: Any, value: dict[str, Any]) -> str:
    return str(value["airline"])


def country(key: Any, value: dict[str, Any]) -> str:
    return str(value["country"])


def pair(left: Any, right: Any) -> list[Any]:
    """A joiner keeping both sides (``None`` for a missing one)."""
    return [left, right]
