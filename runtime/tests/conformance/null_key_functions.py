"""Module-level functions for the null-key conformance tests (the broker and Spark runs import them by name)."""

from __future__ import annotations

from typing import Any


def customer_of(key: Any, value: dict[str, Any]) -> Any:
    """The order's customer: the new key, ``None`` for an order without one."""
    return value.get("customer")


def with_customer(order: dict[str, Any], customer: Any) -> list[Any]:
    """A stream-table joiner: ``[order, customer row or None]``."""
    return [order, customer]
