"""The enrichment example: orders (key: product id, value: JSON order) joined with products (key: product id,
value: JSON with ``name`` and ``price``) into ``orders-enriched``, three ways (``build(variant)``):

- ``"table"``: ``orders.join(table(products))``, a stream-table join. One task reads partition p of both topics
  and processes its buffered records by timestamp: product records stamped later than the orders (reference data
  loaded after the orders were written, or re-published today) are processed after them, and those orders miss.
- ``"global"``: ``orders.join(global_table(products), product_id, joiner)``. A GlobalKTable is bootstrapped (read to
  the end of its topic) before the stream thread processes anything, so every order finds the products already on
  the topic, whatever their timestamps.
- ``"table_at_zero"``: the stream-table join with a timestamp extractor on the table that stamps every product
  update 0 (``logic.at_zero``): the task processes the products before the orders.
- ``"versioned"``: the stream-table join with a versioned table (``history_retention_ms``, KIP-889) and a grace
  period (``grace_ms``, KIP-923): each order joins the product as it was at the order's timestamp, and waits
  ``GRACE_MS`` for product updates stamped before it that arrive after it. It does not help products stamped
  *later* than the orders: as of the order's time there is no product yet.

Misses are counted in ``streamapp_join_misses_total`` and logged (docs/metrics.md, "Join misses").
"""

from __future__ import annotations

from typing import Literal

from streamapp import StreamsBuilder

from enrichment_app import logic

ORDERS = "orders"
PRODUCTS = "products"
OUTPUT = "orders-enriched"
Variant = Literal["table", "global", "table_at_zero", "versioned"]
HISTORY_MS = 7 * 86_400_000
"""How long the versioned table keeps old product versions (ms): orders up to a week old join as of their time."""
GRACE_MS = 3_600_000
"""How long an order waits for late product updates (ms) in the ``"versioned"`` variant."""


def build(variant: Variant = "global") -> StreamsBuilder:
    """The StreamsBuilder of the enrichment topology (``variant``: see the module doc)."""
    builder = StreamsBuilder()
    orders = builder.stream(ORDERS, key_serde="string", value_serde="json", name="orders")
    if variant == "global":
        products = builder.global_table(PRODUCTS, key_serde="string", value_serde="json", name="products")
        enriched = orders.join(products, logic.product_id, logic.with_product, name="enrich")
    else:
        extractor = {"type": "custom", "function": logic.at_zero} if variant == "table_at_zero" else None
        versioned = variant == "versioned"
        table = builder.table(
            PRODUCTS,
            key_serde="string",
            value_serde="json",
            name="products",
            timestamp_extractor=extractor,
            history_retention_ms=HISTORY_MS if versioned else None,
        )
        enriched = orders.join(table, logic.with_product, name="enrich", grace_ms=GRACE_MS if versioned else None)
    enriched.to(OUTPUT, key_serde="string", value_serde="json", name="out")
    return builder
