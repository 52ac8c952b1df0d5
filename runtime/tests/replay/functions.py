"""User functions of the replay tests that are not about flights."""

from __future__ import annotations


def only_even(value: int) -> int:
    if value % 2:
        raise ValueError(f"odd value {value}")
    return value


def by_size(key: str, value: dict[str, int] | None) -> tuple[str, dict[str, int] | None]:
    """A table row re-keyed by whether its ``i`` is small or large (``KTable.group_by``'s selector)."""
    return ("small" if value is not None and value["i"] < 300 else "large"), value
