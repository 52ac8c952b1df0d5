"""User functions of the conformance topologies (``conformance.functions:<name>``).

Module-level so both engines import them by reference: the driver in-process, the broker engine's
``streamapp run`` process through its PYTHONPATH.
"""

from __future__ import annotations

from typing import Any


def is_departed(key: Any, value: Any) -> bool:
    return value.get("dep_time") is not None


def carrier(key: Any, value: Any) -> str:
    return str(value["carrier"])


def add(left: int, right: int) -> int:
    return left + right


def subtract(left: int, right: int) -> int:
    return left - right


def same_key(key: Any, value: Any) -> tuple[Any, Any]:
    return key, value
