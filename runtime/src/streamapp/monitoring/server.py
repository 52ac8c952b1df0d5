"""The instance's HTTP endpoints on one port: /healthz (= /livez), /readyz, /metrics, /status, and the
interactive-query routes (``/query``, ``/metadata``: ``streamapp.query.http``) when ``extra_routes`` is given.

The server runs in a daemon thread of the supervisor and only reads: every answer is computed from
callables the supervisor provides. A request body (``POST``) is at most ``MAX_BODY_BYTES`` (else 413).

``also_on``: more addresses to serve the same routes on (``loopback_also``: 127.0.0.1 beside a pod IP, where
``kubectl port-forward`` connects; kubernetes/kubernetes#72488). Taking one of them is best effort: a failure is
logged and the server runs on its main address.

Robust to idle and broken clients (a probe must never be starved by them):

- every socket read and write times out after ``timeout_s`` (default ``SOCKET_TIMEOUT_S``, 5 s): an idle
  connection, or one that sent half a request, is closed then instead of pinning its thread for ever;
- at most ``max_connections`` (default ``MAX_CONNECTIONS``, 32) connections are served at once, one thread
  each; a connection beyond that is closed at once without an answer (the client retries, as probes do);
- a client that disconnects or resets mid-request is logged in one line (no traceback).
"""

from __future__ import annotations

import ipaddress
import json
import logging
import socket
import sys
import threading
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_CONNECTIONS",
    "SOCKET_TIMEOUT_S",
    "ExtraRoutes",
    "MonitoringServer",
    "loopback_also",
]

log = logging.getLogger(__name__)

Check = Callable[[], tuple[bool, str]]
ExtraRoutes = Callable[[str, str, str, bytes], "tuple[int, str, bytes] | None"]
"""``routes(method, path, query string, body)``: an answer ``(status, content type, body)``, or ``None`` (404)."""

MAX_BODY_BYTES = 1 << 20
"""The largest request body the server reads (a query is small)."""

SOCKET_TIMEOUT_S = 5.0
"""Longest a connection may stay silent (per read or write) before the server closes it."""
MAX_CONNECTIONS = 32
"""Connections served at once (one thread each); more are closed unanswered."""


class MonitoringServer:
    """Serves ``liveness``/``readiness`` checks, a metrics registry and a status document."""

    def __init__(
        self,
        host: str,
        port: int,
        liveness: Check,
        readiness: Check,
        registry: CollectorRegistry,
        status: Callable[[], dict[str, Any]],
        *,
        timeout_s: float = SOCKET_TIMEOUT_S,
        max_connections: int = MAX_CONNECTIONS,
        extra_routes: ExtraRoutes | None = None,
        also_on: Sequence[str] = (),
    ) -> None:
        routes: dict[str, Callable[[], tuple[int, str, bytes]]] = {
            "/healthz": lambda: _check(liveness),
            "/livez": lambda: _check(liveness),
            "/readyz": lambda: _check(readiness),
            "/metrics": lambda: (200, CONTENT_TYPE_LATEST, generate_latest(registry)),
            "/status": lambda: (200, "application/json", json.dumps(status(), indent=2).encode()),
        }

        class Handler(BaseHTTPRequestHandler):
            timeout = timeout_s  # StreamRequestHandler.setup: socket timeout of every read and write

            def do_GET(self) -> None:
                self._answer("GET", b"")

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length > MAX_BODY_BYTES:
                    self._send(413, "text/plain", f"request body over {MAX_BODY_BYTES} bytes\n".encode())
                    return
                self._answer("POST", self.rfile.read(length))

            def _answer(self, method: str, request_body: bytes) -> None:
                path, _, query_string = self.path.partition("?")
                route = routes.get(path) if method == "GET" else None
                try:
                    if route is not None:
                        code, content_type, body = route()
                    else:
                        extra = extra_routes(method, path, query_string, request_body) if extra_routes else None
                        code, content_type, body = extra or (404, "text/plain", b"not found\n")
                except Exception as exc:
                    log.exception("HTTP %s failed", self.path)
                    code, content_type, body = 500, "text/plain", f"{exc}\n".encode()
                self._send(code, content_type, body)

            def _send(self, code: int, content_type: str, body: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("HTTP " + format, *args)

        self._server = _BoundedHTTPServer((host, port), Handler, max_connections)
        self._servers = [self._server]
        for other in also_on:
            try:
                self._servers.append(_BoundedHTTPServer((other, self.port), Handler, max_connections))
            except OSError as exc:
                log.warning("Cannot also serve HTTP on %s:%d: %s", other, self.port, exc)
        self._threads = [
            threading.Thread(target=server.serve_forever, name="http", daemon=True) for server in self._servers
        ]

    @property
    def port(self) -> int:
        """The bound port (useful with port 0)."""
        return int(self._server.server_address[1])

    @property
    def addresses(self) -> list[str]:
        """Every ``host:port`` served."""
        return [f"{server.server_address[0]!s}:{server.server_address[1]}" for server in self._servers]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()


def loopback_also(host: str) -> list[str]:
    """``["127.0.0.1"]`` when ``host`` is a specific address that is not a loopback one (a pod IP): ``kubectl
    port-forward`` connects to 127.0.0.1 inside the pod's network namespace, where a server on the pod IP alone
    refuses it. Nothing for a wildcard (it covers loopback already), a loopback address (the e2e node agent's pod
    IPs share one ``lo``: docs/adr/0003-pod-network.md) or a host name."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return []
    if address.is_unspecified or address.is_loopback:
        return []
    return ["127.0.0.1"] if address.version == 4 else ["::1"]


class _BoundedHTTPServer(ThreadingHTTPServer):
    """A thread per connection, at most ``max_connections`` at once; client failures in one log line."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], max_connections: int) -> None:
        super().__init__(address, handler)
        self._slots = threading.BoundedSemaphore(max_connections)
        self._max_connections = max_connections

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            log.warning("HTTP: %d connections open, closing one from %s", self._max_connections, client_address[0])
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """One line per failed connection (the client went away or timed out), never a traceback."""
        exc = sys.exc_info()[1]
        level = logging.DEBUG if isinstance(exc, (ConnectionError, socket.timeout)) else logging.WARNING
        log.log(level, "HTTP client %s: %s: %s", client_address[0], type(exc).__name__, exc)


def _check(check: Check) -> tuple[int, str, bytes]:
    ok, reason = check()
    return (200 if ok else 503), "text/plain", f"{reason}\n".encode()
