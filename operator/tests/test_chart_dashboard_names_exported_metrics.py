"""The chart's Grafana dashboard and example PrometheusRule query only metrics the runtime exports: every PromQL
expression (panel targets, variable queries, alert rules) is parsed and each metric it names must be a series
name of a scrape of the runtime's own ``/metrics`` collector. Both are off by default, and the PrometheusRule
and PodMonitor are rendered only where the Prometheus Operator's CRDs exist.

Runs the real helm binary (``operator_helm``) and the real collector (``streamapp.monitoring.metrics``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import promql_parser
import pytest
from operator_helm import CHART, helm_binary, render
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from streamapp.monitoring.metrics import WorkerMetricsCollector

NAMESPACE = "streamapp-system"
MONITORING = (
    "monitoring.grafanaDashboard.enabled=true",
    "monitoring.prometheusRule.enabled=true",
    "monitoring.podMonitor.enabled=true",
)
CRDS = ("monitoring.coreos.com/v1/PrometheusRule", "monitoring.coreos.com/v1/PodMonitor")
_SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}
_GRAFANA_INTERVALS = re.compile(r"\$__(rate_interval|interval|range)\b")
_LABEL_VALUES = re.compile(r"^label_values\((.*),\s*\w+\)$")


@pytest.fixture(scope="module")
def helm() -> Path:
    return helm_binary()


def exported_series() -> set[str]:
    """Every series name the runtime's ``/metrics`` can show: a scrape of its collector before any stream thread
    reported describes every family."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(WorkerMetricsCollector(list, lambda: False))
    families = text_string_to_metric_families(generate_latest(registry).decode())
    return {family.name + suffix for family in families for suffix in _SUFFIXES[family.type]}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression (Grafana's interval variables allowed) selects."""
    found: set[str] = set()

    def visit(node: Any) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            names = [node.name] if node.name else []
            names += [m.value for m in node.matchers.matchers if m.name == "__name__"]
            found.update(names)

    promql_parser.walk(promql_parser.parse(_GRAFANA_INTERVALS.sub("5m", expr)), visit)
    return found


def _dashboard_queries(dashboard: dict[str, Any]) -> list[str]:
    panels = [p for row in dashboard["panels"] for p in [row, *row.get("panels", [])]]
    queries = [target["expr"] for panel in panels for target in panel.get("targets", [])]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            match = _LABEL_VALUES.match(variable["query"]["query"])
            assert match, f"variable {variable['name']}: not a label_values(<selector>, <label>) query"
            queries.append(match.group(1))
    return queries


def _rendered(helm: Path, *, crds: bool) -> dict[str, dict[str, Any]]:
    docs = render(helm, "streamapp-operator", NAMESPACE, *MONITORING, api_versions=CRDS if crds else ())
    return {doc["kind"]: doc for doc in docs}


def test_every_dashboard_and_alert_query_names_only_metrics_the_runtime_exports(helm: Path) -> None:
    docs = _rendered(helm, crds=True)
    (dashboard_json,) = docs["ConfigMap"]["data"].values()
    queries = _dashboard_queries(json.loads(dashboard_json))
    queries += [rule["expr"] for group in docs["PrometheusRule"]["spec"]["groups"] for rule in group["rules"]]
    exported = exported_series()

    unknown = {expr: sorted(metric_names(expr) - exported) for expr in queries}
    assert {expr: names for expr, names in unknown.items() if names} == {}
    assert all(metric_names(expr) for expr in queries), "a query that names no metric checks nothing"
    named = set().union(*(metric_names(expr) for expr in queries))
    assert {
        "kafka_streams_stream_thread_metrics_process_total",
        "kafka_streams_stream_processor_node_metrics_record_e2e_latency_max",
        "kafka_streams_stream_task_metrics_dropped_records_total",
        "kafka_streams_stream_state_metrics_put_latency_avg",
        "kafka_streams_stream_state_metrics_get_latency_avg",
    } <= named


def test_a_query_naming_a_metric_the_runtime_does_not_export_is_caught() -> None:
    expr = "sum(rate(kafka_streams_stream_thread_metrics_process_rate[$__rate_interval])) + streamapp_ready"
    assert metric_names(expr) - exported_series() == {"kafka_streams_stream_thread_metrics_process_rate"}


def test_the_dashboard_configmap_is_the_charts_dashboard_file(helm: Path) -> None:
    (dashboard_json,) = _rendered(helm, crds=False)["ConfigMap"]["data"].values()
    assert json.loads(dashboard_json) == json.loads((CHART / "dashboards" / "streamapp-kafka-streams.json").read_text())


def test_monitoring_is_off_by_default_and_the_crd_kinds_need_their_crds(helm: Path) -> None:
    default = {doc["kind"] for doc in render(helm, "streamapp-operator", NAMESPACE, api_versions=CRDS)}
    assert not default & {"PrometheusRule", "PodMonitor"} and "ConfigMap" not in default
    assert set(_rendered(helm, crds=False)) & {"PrometheusRule", "PodMonitor"} == set()
    assert {"PrometheusRule", "PodMonitor"} <= set(_rendered(helm, crds=True))
