"""``kubectl port-forward`` connects to 127.0.0.1 inside the pod (kubernetes/kubernetes#72488), while the runtime
binds the pod IP (docs/adr/0003-pod-network.md): the server also listens on loopback beside a pod IP, best effort,
and not beside a loopback or wildcard address (the e2e node agent's pods share one ``lo``)."""

from __future__ import annotations

import socket
import urllib.request

import pytest
from prometheus_client import CollectorRegistry
from streamapp.monitoring.server import MonitoringServer, loopback_also


@pytest.mark.parametrize(
    ("host", "also"),
    [("10.244.1.7", ["127.0.0.1"]), ("fd00::7", ["::1"]), ("0.0.0.0", []), ("127.0.100.3", []), ("pod-0.app", [])],
)
def test_loopback_is_added_beside_a_specific_non_loopback_address(host: str, also: list[str]) -> None:
    assert loopback_also(host) == also


def server(host: str, also_on: list[str], port: int = 0) -> MonitoringServer:
    return MonitoringServer(
        host,
        port,
        lambda: (True, "alive"),
        lambda: (True, "ok"),
        CollectorRegistry(auto_describe=False),
        dict,
        also_on=also_on,
    )


def healthz(host: str, port: int) -> str:
    with urllib.request.urlopen(f"http://{host}:{port}/healthz", timeout=5) as response:
        return str(response.read().decode().strip())


def test_the_routes_answer_on_the_pod_address_and_on_loopback() -> None:
    srv = server("127.0.0.2", ["127.0.0.1"])
    srv.start()
    try:
        assert srv.addresses == [f"127.0.0.2:{srv.port}", f"127.0.0.1:{srv.port}"]
        assert healthz("127.0.0.2", srv.port) == healthz("127.0.0.1", srv.port) == "alive"
    finally:
        srv.stop()


def test_a_taken_loopback_port_leaves_the_main_address_serving(caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        srv = server("127.0.0.2", ["127.0.0.1"], port)
        srv.start()
        try:
            assert srv.addresses == [f"127.0.0.2:{port}"]
            assert healthz("127.0.0.2", port) == "alive"
            assert "Cannot also serve HTTP on 127.0.0.1" in caplog.text
        finally:
            srv.stop()
