"""Probes honour initialDelay/period/thresholds and really check HTTP, TCP and exec."""

from __future__ import annotations

import http.server
import socket
import threading
from collections.abc import Iterator

import pytest

from e2e.nodeagent.probes import ProbeTracker, check, resolve_port


def test_readiness_needs_success_threshold_and_fails_after_failure_threshold() -> None:
    spec = {"initialDelaySeconds": 5, "periodSeconds": 2, "successThreshold": 2, "failureThreshold": 2}
    t = ProbeTracker(spec, "readiness", container_started=100.0)
    assert not t.passing and not t.due(104.9) and t.due(105.0)
    t.record(True, 105.0)
    assert not t.passing and t.next_at == 107.0
    assert t.record(True, 107.0) and t.passing
    t.record(False, 109.0)
    assert t.passing  # one failure is below the threshold
    assert t.record(False, 111.0) and not t.passing


def test_liveness_starts_passing_and_success_threshold_is_one() -> None:
    t = ProbeTracker({"successThreshold": 5, "failureThreshold": 1}, "liveness", container_started=0.0)
    assert t.passing
    t.record(False, 0.0)
    assert not t.passing
    t.record(True, 10.0)
    assert t.passing


@pytest.fixture
def http_server() -> Iterator[int]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if self.path == "/ok" else 503)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.100.250", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


def test_http_get_checks_the_pod_ip_and_status_code(http_server: int) -> None:
    container = {"ports": [{"name": "http", "containerPort": http_server}]}
    ok = {"httpGet": {"path": "/ok", "port": "http"}}
    bad = {"httpGet": {"path": "/bad", "port": http_server}}
    assert check(ok, container, "127.0.100.250", {}, [], 1.0) == (True, "")
    passed, message = check(bad, container, "127.0.100.250", {}, [], 1.0)
    assert not passed and "503" in message
    assert not check(ok, container, "127.0.100.251", {}, [], 1.0)[0]  # nobody listens on another pod IP


def test_tcp_socket_and_exec_probes() -> None:
    listener = socket.socket()
    listener.bind(("127.0.100.251", 0))
    listener.listen()
    port = listener.getsockname()[1]
    assert check({"tcpSocket": {"port": port}}, {}, "127.0.100.251", {}, [], 1.0)[0]
    listener.close()
    assert not check({"tcpSocket": {"port": port}}, {}, "127.0.100.251", {}, [], 1.0)[0]
    env = {"PATH": "/usr/bin:/bin"}
    assert check({"exec": {"command": ["sh", "-c", "exit 0"]}}, {}, "", env, [], 1.0)[0]
    assert check({"exec": {"command": ["sh", "-c", "echo no; exit 1"]}}, {}, "", env, [], 1.0) == (False, "no\n")
    assert check({"exec": {"command": ["sleep", "5"]}}, {}, "", env, [], 0.2) == (False, "command timed out after 0.2s")


def test_named_port_must_exist() -> None:
    assert resolve_port("8080", {}) == 8080
    with pytest.raises(ValueError, match="unknown named port"):
        resolve_port("metrics", {"ports": [{"name": "http", "containerPort": 80}]})
