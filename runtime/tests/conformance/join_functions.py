"""User functions of the join conformance topologies (``conformance.join_functions:<name>``)."""

from __future__ import annotations

from typing import Any


def pair(left: Any, right: Any) -> list[Any]:
    """The joiner of every test: both sides, ``None`` for a missing one."""
    return [left, right]


def user_of(key: Any, value: Any) -> Any:
    return value["user"]


def region_of(key: Any, value: Any) -> Any:
    return value.get("region")


def order_with_user(order: Any, user: Any) -> dict[str, Any]:
    return {**order, "region": None if user is None else user["region"]}


def customer_of(order: Any) -> Any:
    """The foreign-key extractor of the foreign-key join tests: an order's customer id (``None``: none)."""
    return order.get("customer")


def customer_name_of(key: Any, joined: list[Any]) -> tuple[str, Any]:
    """``(customer name, order id)``: a foreign-key join's ``[order, customer]`` row re-keyed by the customer's name
    (``"nobody"`` without a customer)."""
    customer = joined[1]
    return ("nobody" if customer is None else customer["name"]), key
