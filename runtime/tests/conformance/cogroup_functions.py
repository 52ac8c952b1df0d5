"""User functions of the cogroup conformance topologies (``conformance.cogroup_functions:<name>``)."""

from __future__ import annotations

from typing import Any


def no_activity() -> dict[str, int]:
    return {"clicks": 0, "spent": 0}


def count_click(key: Any, value: Any, activity: dict[str, int]) -> dict[str, int]:
    return {**activity, "clicks": activity["clicks"] + 1}


def add_spent(key: Any, value: dict[str, Any], activity: dict[str, int]) -> dict[str, int]:
    return {**activity, "spent": activity["spent"] + int(value["amount"])}


def zero() -> int:
    return 0


def user_of(key: Any, value: dict[str, Any]) -> str:
    return str(value["user"])


def add_amount(key: Any, value: dict[str, Any], total: int) -> int:
    return total + int(value["amount"])


def subtract_amount(key: Any, value: dict[str, Any], total: int) -> int:
    return total - int(value["amount"])


def merge_activity(key: Any, first: dict[str, int], second: dict[str, int]) -> dict[str, int]:
    return {"clicks": first["clicks"] + second["clicks"], "spent": first["spent"] + second["spent"]}
