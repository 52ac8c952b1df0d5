"""/metrics exports the stream threads' Kafka Streams metrics as ``kafka_streams_<group>_<name>`` with Kafka's
tags as labels (``streamapp.monitoring.kafka_metrics``), counters with ``_total``, next to the ``streamapp_*``
series; every family is described even before a thread reports."""

from __future__ import annotations

import math

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from streamapp.monitoring.health import WorkerView
from streamapp.monitoring.kafka_metrics import KAFKA_METRICS, exported_names
from streamapp.monitoring.metrics import WorkerMetricsCollector
from streamapp.processing.status import WorkerStatus
from streamapp.sensors import NODE_GROUP, THREAD_GROUP


def _scrape(*statuses: WorkerStatus) -> str:
    registry = CollectorRegistry(auto_describe=False)
    views = [WorkerView(s.thread, True, 0.0, 0, s) for s in statuses]
    registry.register(WorkerMetricsCollector(lambda: views, lambda: True))
    return generate_latest(registry).decode()


def test_samples_are_exported_in_kafka_names_and_tags() -> None:
    status = WorkerStatus(0, 1, "running", True, True, 0.0)
    status.kafka_metrics = [
        (THREAD_GROUP, "process-total", {"thread-id": "app-StreamThread-1"}, 42.0),
        (
            NODE_GROUP,
            "record-e2e-latency-max",
            {"thread-id": "app-StreamThread-1", "task-id": "0_1", "processor-node-id": "out"},
            1_500.0,
        ),
        (
            NODE_GROUP,
            "record-e2e-latency-avg",
            {"thread-id": "app-StreamThread-1", "task-id": "0_1", "processor-node-id": "out"},
            math.nan,
        ),
    ]

    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(_scrape(status))
        for s in family.samples
        if s.name.startswith("kafka_streams_")
    }

    node = (("processor_node_id", "out"), ("task_id", "0_1"), ("thread", "0"), ("thread_id", "app-StreamThread-1"))
    assert (
        samples[
            (
                "kafka_streams_stream_thread_metrics_process_total",
                (("thread", "0"), ("thread_id", "app-StreamThread-1")),
            )
        ]
        == 42
    )
    assert samples[("kafka_streams_stream_processor_node_metrics_record_e2e_latency_max", node)] == 1_500
    assert math.isnan(samples[("kafka_streams_stream_processor_node_metrics_record_e2e_latency_avg", node)])
    assert len(samples) == 3


def test_every_catalog_metric_is_described_by_a_scrape_without_workers() -> None:
    described = {
        family.name + ("_total" if family.type == "counter" else "")
        for family in text_string_to_metric_families(_scrape())
        if family.name.startswith("kafka_streams_")
    }

    assert described == exported_names()
    assert len(described) == len(KAFKA_METRICS)
    assert "kafka_streams_stream_state_metrics_put_latency_avg" in described
