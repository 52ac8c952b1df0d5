"""/metrics shows every drop per task and reason, record lateness per task and processor, and join misses
(Kafka's task-level dropped-records and record-lateness), from the workers' reports."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from streamapp.monitoring.health import WorkerView
from streamapp.monitoring.metrics import WorkerMetricsCollector
from streamapp.processing.status import RecordLatenessStatus, TaskStatus, ThreadMetrics, WorkerStatus


def scrape(*tasks: TaskStatus) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    status = WorkerStatus(1, 1, "running", True, True, 0.0, tasks=list(tasks), metrics=ThreadMetrics())
    registry = CollectorRegistry(auto_describe=False)
    registry.register(WorkerMetricsCollector(lambda: [WorkerView(1, True, 0.0, 0, status)], lambda: True))
    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith(("streamapp_task_dropped", "streamapp_record_lateness", "streamapp_join_misses"))
    }


def test_drops_by_reason_lateness_and_join_misses_are_exported_per_task_and_processor() -> None:
    counted = TaskStatus(
        "0_1",
        "running",
        ["events-1"],
        dropped_records={"late": 3, "null_key_or_value": 1},
        record_lateness={"counts": RecordLatenessStatus(count=10, avg_ms=12.5, max_ms=400)},
        join_misses={"enrich": 7},
    )
    quiet = TaskStatus("0_2", "running", ["events-2"])

    task = (("task", "0_1"), ("thread", "1"))
    assert scrape(counted, quiet) == {
        ("streamapp_task_dropped_records_total", (("reason", "late"), *task)): 3,
        ("streamapp_task_dropped_records_total", (("reason", "null_key_or_value"), *task)): 1,
        ("streamapp_record_lateness_avg_ms", (("processor", "counts"), *task)): 12.5,
        ("streamapp_record_lateness_max_ms", (("processor", "counts"), *task)): 400,
        ("streamapp_join_misses_total", (("processor", "enrich"), *task)): 7,
    }
