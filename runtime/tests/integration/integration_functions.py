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


def no_activity() -> dict[str, int]:
    """The initializer of the activity aggregates (``test_cogroup_and_emit_on_window_close_survive_task_moves``):
    values there are ``{"n": int, "kind": "click" | "view", "ts": epoch ms}``."""
    return {"clicks": 0, "views": 0}


def add_click(key: Any, value: dict[str, Any], activity: dict[str, int]) -> dict[str, int]:
    """The cogroup's aggregator of the clicks stream."""
    return {**activity, "clicks": activity["clicks"] + 1}


def add_view(key: Any, value: dict[str, Any], activity: dict[str, int]) -> dict[str, int]:
    """The cogroup's aggregator of the views stream."""
    return {**activity, "views": activity["views"] + 1}


def add_activity(key: Any, value: dict[str, Any], activity: dict[str, int]) -> dict[str, int]:
    """One aggregator for clicks and views merged into one stream: what the cogroup computes with two."""
    field = "clicks" if value["kind"] == "click" else "views"
    return {**activity, field: activity[field] + 1}


def user_and_window(key: Any, activity: dict[str, int]) -> tuple[str, dict[str, int]]:
    """A window's aggregate re-keyed by its user (so it goes to the user's partition), the window start in the
    value: ``(user, {"start": epoch ms, "clicks": int, "views": int})``."""
    return str(key.key), {"start": key.start, **activity}
