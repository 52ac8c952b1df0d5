"""User functions of the seed articles' topologies (``conformance.seed_functions:<name>``).

Values are JSON: an order ``{"user", "item", "ts", "quantity"}`` (``ts`` = order time, epoch ms), a user
``{"gender", "address", "age"}``, an item ``{"price", "category", "address"}`` (``address`` = where it is made).
"""

from __future__ import annotations

from typing import Any


def add(aggregate: int, value: int) -> int:
    return aggregate + value


def subtract(aggregate: int, value: int) -> int:
    return aggregate - value


def same_key_and_value(key: Any, value: Any) -> tuple[Any, Any]:
    return key, value


def order_with_user(order: dict[str, Any], user: dict[str, Any] | None) -> dict[str, Any]:
    """``OrderUser.fromOrderUser``: the order plus the buyer's address (None for an unknown user)."""
    return {**order, "user_address": None if user is None else user["address"]}


def has_user_address(key: Any, order_user: dict[str, Any]) -> bool:
    return order_user["user_address"] is not None


def item_name(key: Any, order_user: dict[str, Any]) -> str:
    return str(order_user["item"])


def order_with_item(order_user: dict[str, Any], item: dict[str, Any] | None) -> dict[str, Any]:
    """``OrderUserItem.fromOrderUser``: plus where the item is made (None for an unknown item)."""
    return {**order_user, "item_address": None if item is None else item["address"]}


def bought_in_own_region(key: Any, order_user_item: dict[str, Any]) -> bool:
    return order_user_item["item_address"] == order_user_item["user_address"]


def everyone(key: Any, value: Any) -> str:
    return "same-region-buyers"


def no_users() -> list[str]:
    return []


def add_user(key: Any, order: dict[str, Any], users: list[str]) -> list[str]:
    """Distinct buyers, sorted (a JSON list stands in for a set)."""
    return sorted({*users, order["user"]})


def how_many(users: list[str]) -> int:
    return len(users)
