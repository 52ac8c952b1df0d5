"""The HTTP endpoints: health codes, Prometheus text from worker reports, JSON status."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families
from streamapp.monitoring.health import WorkerView
from streamapp.monitoring.metrics import WorkerMetricsCollector
from streamapp.monitoring.server import MonitoringServer
from streamapp.processing.status import StoreRestoreStatus, TaskStatus, ThreadMetrics, WorkerStatus


def worker_views() -> list[WorkerView]:
    metrics = ThreadMetrics(records_processed_total=42, restore_records_total=7)
    metrics.observe_commit(0.02)
    metrics.observe_commit(3.0)
    status = WorkerStatus(
        thread=0,
        pid=1,
        state="running",
        ready=False,
        group_joined=True,
        reported_at=0.0,
        tasks=[
            TaskStatus(
                "0_0", "running", ["flights-0"], stores=[StoreRestoreStatus("done", "app-done-changelog-0", 5, 0)]
            ),
            TaskStatus(
                "1_0",
                "restoring",
                [],
                restored_records=3,
                restore_remaining=97,
                stores=[
                    StoreRestoreStatus("counts", "app-counts-changelog-0", 3, 57, records_per_second=1.5),
                    StoreRestoreStatus("totals", "app-totals-changelog-0", 0, 40),
                ],
            ),
        ],
        metrics=metrics,
        consumer_lag={"flights-0": 5},
    )
    return [WorkerView(0, True, 0.0, 2, status)]


@pytest.fixture
def server() -> Iterator[MonitoringServer]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(WorkerMetricsCollector(worker_views, lambda: False))
    srv = MonitoringServer(
        "127.0.0.1", 0, lambda: (True, "ok"), lambda: (False, "restoring"), registry, lambda: {"phase": "running"}
    )
    srv.start()
    yield srv
    srv.stop()


def get(server: MonitoringServer, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}{path}", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_health_endpoints_answer_200_or_503_with_the_reason(server: MonitoringServer) -> None:
    assert get(server, "/healthz") == (200, "ok\n")
    assert get(server, "/readyz") == (503, "restoring\n")
    assert get(server, "/nope")[0] == 404


def test_metrics_expose_worker_reports_per_thread(server: MonitoringServer) -> None:
    code, text = get(server, "/metrics")
    assert code == 200
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    assert samples[("streamapp_records_processed_total", (("thread", "0"),))] == 42
    assert samples[("streamapp_restore_records_total", (("thread", "0"),))] == 7
    assert samples[("streamapp_restore_remaining_records", (("task", "1_0"), ("thread", "0")))] == 97
    assert samples[("streamapp_tasks", (("state", "restoring"), ("thread", "0")))] == 1
    assert samples[("streamapp_consumer_lag_records", (("partition", "0"), ("thread", "0"), ("topic", "flights")))] == 5
    assert samples[("streamapp_worker_restarts_total", (("thread", "0"),))] == 2
    assert samples[("streamapp_commit_latency_seconds_count", (("thread", "0"),))] == 2
    assert samples[("streamapp_commit_latency_seconds_bucket", (("le", "0.025"), ("thread", "0")))] == 1
    assert samples[("streamapp_commit_latency_seconds_bucket", (("le", "5.0"), ("thread", "0")))] == 2
    assert samples[("streamapp_ready", ())] == 0


def test_metrics_expose_restore_progress_per_store_of_the_restoring_tasks_only(server: MonitoringServer) -> None:
    text = get(server, "/metrics")[1]
    per_store = {
        (s.name, s.labels["task"], s.labels["store"]): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith("streamapp_store_") and s.labels["thread"] == "0"
    }
    assert per_store == {
        ("streamapp_store_restore_remaining_records", "1_0", "counts"): 57,
        ("streamapp_store_restore_remaining_records", "1_0", "totals"): 40,
        ("streamapp_store_restored_records", "1_0", "counts"): 3,
        ("streamapp_store_restored_records", "1_0", "totals"): 0,
        ("streamapp_store_restore_rate_records_per_second", "1_0", "counts"): 1.5,
    }


def test_status_is_json(server: MonitoringServer) -> None:
    code, text = get(server, "/status")
    assert code == 200 and json.loads(text) == {"phase": "running"}
