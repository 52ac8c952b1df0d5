"""User functions of the window conformance topologies (``conformance.windows_functions:<name>``)."""

from __future__ import annotations

from typing import Any


def zero() -> int:
    return 0


def add_amount(key: Any, value: dict[str, Any], total: int) -> int:
    return total + int(value["amount"])


def add_totals(key: Any, first: int, second: int) -> int:
    return first + second


def longer(aggregate: str, value: str) -> str:
    return value if len(value) > len(aggregate) else aggregate
