"""User functions of the replay tests that are not about flights."""

from __future__ import annotations


def only_even(value: int) -> int:
    if value % 2:
        raise ValueError(f"odd value {value}")
    return value
