"""The operator's /metrics endpoint serves reconcile counts and per-app figures, and forgets deleted apps."""

from __future__ import annotations

import socket
import urllib.request

from streamapp_operator import metrics


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_metrics_show_reconciles_lag_and_degraded_per_app_and_forget_deleted_apps() -> None:
    port = _free_port()
    assert metrics.serve({metrics.PORT_ENV: str(port), metrics.HOST_ENV: "127.0.0.1"}) == port
    status = {"lag": 42, "tasks": 8, "readyReplicas": 2, "restoreRemaining": None,
              "conditions": [{"type": "Degraded", "status": "True"}]}  # fmt: skip
    metrics.record("apps", "flights", status)
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    assert 'streamapp_operator_app_lag_records{name="flights",namespace="apps"} 42.0' in text
    assert 'streamapp_operator_app_degraded{name="flights",namespace="apps"} 1.0' in text
    assert 'streamapp_operator_reconciles_total{outcome="degraded"}' in text
    metrics.forget("apps", "flights")
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    assert 'namespace="apps"' not in text


def test_a_taken_port_leaves_the_operator_running_without_metrics() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert metrics.serve({metrics.PORT_ENV: str(port), metrics.HOST_ENV: "127.0.0.1"}) == 0
    assert metrics.serve({metrics.PORT_ENV: "0"}) == 0
