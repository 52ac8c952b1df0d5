"""User functions of the integration-test topologies (referenced as ``integration_functions:<name>``).

Values are JSON objects ``{"n": int, "color": str}``.
"""

from __future__ import annotations

from typing import Any


def color(key: Any, value: dict[str, Any]) -> str:
    return str(value["color"])


def not_multiple_of_three(key: Any, value: dict[str, Any]) -> bool:
    return int(value["n"]) % 3 != 0
