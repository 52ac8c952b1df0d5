"""User functions of the enrichment example (the runtime imports them as ``enrichment_app.logic:<name>``)."""

from __future__ import annotations

from typing import Any


def with_product(order: dict[str, Any], product: dict[str, Any]) -> dict[str, Any]:
    """Joiner: the order with the product's name and price."""
    return {**order, "name": product.get("name"), "price": product.get("price")}


def product_id(key: str | None, order: dict[str, Any]) -> str:
    """Key selector of the GlobalKTable join: the product an order is for."""
    return str(order["product"])


def at_zero(key: Any, value: Any, record_ts_ms: int, partition_time_ms: int) -> int:
    """Timestamp extractor of the reference table: every product update is stamped 0, so a task with a backlog
    on both sides processes the whole reference table before any stream record (it picks the lowest timestamp)."""
    return 0
