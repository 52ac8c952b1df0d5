"""The late-drop benchmark's streamapp topology and its counting (no broker): page views piped in event-time order
are all counted, one window per country and hour, and the output's last counts add up to the views."""

from __future__ import annotations

import json

from streamapp.testing import TopologyTestDriver

from bench.late_drops import COUNTRIES, HOUR_MS, counted_windows, page_views, streamapp_topology


def test_the_benchmark_topology_counts_in_order_views_in_one_window_per_country_and_hour() -> None:
    views = list(page_views(views=600, days=1, end_ms=100 * HOUR_MS))
    with TopologyTestDriver(streamapp_topology("views", "out")) as driver:
        source = driver.create_input_topic("views", key_serde="bytes", value_serde="bytes")
        source.pipe_records(views)
        raw = driver.create_output_topic("out", key_serde="bytes", value_serde="bytes").read_key_values_to_list()
        late = driver.metrics().dropped_records_by_reason.get("late", 0)

    windows, counted = counted_windows(raw)
    assert late == 0
    assert counted == len(views)
    hours = {json.loads(value)["ts"] // HOUR_MS for _, value, _ in views}
    assert windows == len(COUNTRIES) * len(hours)
