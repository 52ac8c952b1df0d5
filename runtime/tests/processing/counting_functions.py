"""User functions of the unit-test topologies (referenced as ``counting_functions:<name>``)."""

from __future__ import annotations

from typing import Any


def is_even(key: Any, value: Any) -> bool:
    return int(value["n"]) % 2 == 0


def color(key: Any, value: Any) -> str:
    return str(value["color"])


def explode(key: Any, value: Any) -> str:
    raise RuntimeError("boom")
