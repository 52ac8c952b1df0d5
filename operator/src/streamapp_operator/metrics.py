"""The operator's own Prometheus metrics (prometheus-client), served on ``STREAMAPP_OPERATOR_METRICS_PORT``
(default 9090) at ``/metrics``.

Per reconcile: a counter by outcome and a duration histogram; per StreamApp (``namespace``, ``name``): the
consumer lag, tasks, ready pods, records left to restore and whether it is Degraded, as the last reconcile
wrote them to status. A deleted StreamApp's series are removed (:func:`forget`).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Mapping
from typing import Any

from prometheus_client import Counter, Gauge, Histogram, start_http_server

PORT_ENV = "STREAMAPP_OPERATOR_METRICS_PORT"
HOST_ENV = "STREAMAPP_OPERATOR_METRICS_HOST"
DEFAULT_PORT = 9090
_APP = ("namespace", "name")
logger = logging.getLogger(__name__)

RECONCILES = Counter(
    "streamapp_operator_reconciles_total", "Reconciles of StreamApps by outcome (ok, degraded, paused).",
    ["outcome"],
)  # fmt: skip
RECONCILE_SECONDS = Histogram("streamapp_operator_reconcile_duration_seconds", "Duration of one reconcile.")
ERRORS = Counter("streamapp_operator_errors_total", "Reconciles that raised (the API server failed), retried.")
LAG = Gauge("streamapp_operator_app_lag_records", "Consumer lag of the StreamApp's group (records).", _APP)
TASKS = Gauge("streamapp_operator_app_tasks", "Kafka Streams tasks of the StreamApp's topology.", _APP)
READY = Gauge("streamapp_operator_app_ready_replicas", "Pods of the StreamApp passing readiness.", _APP)
RESTORE = Gauge("streamapp_operator_app_restore_remaining_records", "Changelog records left to restore.", _APP)
DEGRADED = Gauge("streamapp_operator_app_degraded", "1 while the StreamApp's Degraded condition is True.", _APP)
_PER_APP = (LAG, TASKS, READY, RESTORE, DEGRADED)


def serve(environ: Mapping[str, str] = os.environ) -> int:
    """Start the ``/metrics`` endpoint in a daemon thread; returns the port, 0 when there is none (0 in the
    environment, or the port is taken: the operator runs on without metrics and says so in its log).

    It binds ``STREAMAPP_OPERATOR_METRICS_HOST``, else the pod's IP (``POD_IP``, as kopf's liveness
    endpoint), else every address."""
    port = int(environ.get(PORT_ENV, DEFAULT_PORT))
    host = environ.get(HOST_ENV) or environ.get("POD_IP") or "0.0.0.0"
    if not port:
        return 0
    try:
        start_http_server(port, addr=host)
    except OSError as exc:
        logger.warning("no operator metrics: cannot listen on %s:%s: %s", host, port, exc)
        return 0
    return port


def record(namespace: str, name: str, status: Mapping[str, Any]) -> None:
    """The per-app gauges from the status a reconcile wrote, and the reconcile's outcome."""
    labels = (namespace, name)
    if status.get("paused"):
        RECONCILES.labels("paused").inc()
        return
    degraded = any(c.get("type") == "Degraded" and c.get("status") == "True" for c in status.get("conditions") or [])
    RECONCILES.labels("degraded" if degraded else "ok").inc()
    DEGRADED.labels(*labels).set(1 if degraded else 0)
    for gauge, key in ((LAG, "lag"), (TASKS, "tasks"), (READY, "readyReplicas"), (RESTORE, "restoreRemaining")):
        value = status.get(key)
        if isinstance(value, int):
            gauge.labels(*labels).set(value)


def forget(namespace: str, name: str) -> None:
    """Drop a deleted StreamApp's series."""
    for gauge in _PER_APP:
        with contextlib.suppress(KeyError):
            gauge.remove(namespace, name)
