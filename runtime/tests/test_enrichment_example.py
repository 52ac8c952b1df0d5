"""The enrichment example (``examples/enrichment``) does what docs/execution.md, "Enriching with reference data",
says: with orders and products both on their topics before the app starts, the products stamped a day after the
orders, a stream-table join processes the orders first (a task picks its records by timestamp) and every order
misses, counted and logged; the GlobalKTable (bootstrapped before processing) and the table stamped at 0 join them
all."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest
from streamapp.testing import TopologyTestDriver

EXAMPLE_SRC = Path(__file__).resolve().parents[2] / "examples" / "enrichment" / "src"
DAY_MS = 86_400_000
PRODUCTS = {"p1": {"name": "kettle", "price": 30}, "p2": {"name": "mug", "price": 8}}
ORDERS = [{"order": n, "product": "p1" if n % 2 == 0 else "p2"} for n in range(4)]


@pytest.fixture(scope="module")
def example() -> Any:
    sys.path.insert(0, str(EXAMPLE_SRC))
    try:
        from enrichment_app import topology

        yield topology
    finally:
        sys.path.remove(str(EXAMPLE_SRC))


def run_backlog(
    example: Any, variant: str, orders: list[tuple[dict[str, Any], int]] | None = None
) -> tuple[list[tuple[str, Any]], int]:
    """The orders (day 1; ``orders``: ``(order, timestamp)`` instead) and the products (day 2) on their topics before
    processing starts; returns the joined orders and the join misses counted."""
    with TopologyTestDriver(example.build(variant)) as driver:
        for key, product in PRODUCTS.items():
            driver.cluster.append(example.PRODUCTS, 0, key.encode(), json.dumps(product).encode(), 2 * DAY_MS)
        for order, timestamp in orders or [(order, DAY_MS + n) for n, order in enumerate(ORDERS)]:
            key = order["product"].encode()
            driver.cluster.append(example.ORDERS, 0, key, json.dumps(order).encode(), timestamp)
        driver.advance_wall_clock_time(0)  # process the backlog
        joined = driver.create_output_topic(example.OUTPUT).read_key_values_to_list()
        misses = sum(task.metrics.join_misses.get("enrich", 0) for task in driver.tasks())
    return joined, misses


def test_a_stream_table_join_misses_every_order_when_the_table_is_stamped_later(
    example: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        joined, misses = run_backlog(example, "table")

    assert joined == []
    assert misses == len(ORDERS)
    assert any("found no table value in join enrich" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("variant", ["global", "table_at_zero"])
def test_a_global_table_or_a_table_stamped_at_zero_enriches_every_order(example: Any, variant: str) -> None:
    joined, misses = run_backlog(example, variant)

    assert misses == 0
    assert sorted((value["order"], value["name"]) for _, value in joined) == [
        (0, "kettle"),
        (1, "mug"),
        (2, "kettle"),
        (3, "mug"),
    ]


def test_a_versioned_table_does_not_enrich_orders_older_than_their_products(example: Any) -> None:
    """Kafka's ``KStreamKTableJoinProcessor`` reads a versioned table as of the order's timestamp: products stamped a
    day later have no version yet then, so versioning (and its grace) is no fix for reference data stamped later."""
    later = {"order": 99, "product": "p1"}  # stamped past the grace of the others: they are joined (and miss)
    orders = [*((order, DAY_MS + n) for n, order in enumerate(ORDERS)), (later, DAY_MS + example.GRACE_MS + 10)]
    joined, misses = run_backlog(example, "versioned", orders)

    assert joined == []
    assert misses == len(ORDERS)


def test_a_versioned_table_with_grace_enriches_orders_whose_products_arrive_late_but_stamped_earlier(
    example: Any,
) -> None:
    """KIP-923: orders wait ``GRACE_MS``, so products stamped before them but published after them still join; the
    plain table join, which looks up at once, misses every order."""
    results = {}
    for variant in ("table", "versioned"):
        with TopologyTestDriver(example.build(variant)) as driver:
            orders, products = driver.create_input_topic(example.ORDERS), driver.create_input_topic(example.PRODUCTS)
            for n, order in enumerate(ORDERS):
                orders.pipe_input(order["product"], order, DAY_MS + n)
            for key, product in PRODUCTS.items():
                products.pipe_input(key, product, DAY_MS - 60_000)  # stamped a minute before, published after
            orders.pipe_input("p1", {"order": 99, "product": "p1"}, DAY_MS + example.GRACE_MS + 10)  # moves time on
            results[variant] = [
                value["order"] for value in driver.create_output_topic(example.OUTPUT).read_values_to_list()
            ]
    assert results == {"table": [99], "versioned": [0, 1, 2, 3]}
