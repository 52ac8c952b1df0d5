"""The instance's HTTP endpoints on one port: /healthz, /readyz, /metrics, /status.

The server runs in a daemon thread of the supervisor and only reads: every answer is computed from
callables the supervisor provides.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

__all__ = ["MonitoringServer"]

log = logging.getLogger(__name__)

Check = Callable[[], tuple[bool, str]]


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
    ) -> None:
        routes: dict[str, Callable[[], tuple[int, str, bytes]]] = {
            "/healthz": lambda: _check(liveness),
            "/livez": lambda: _check(liveness),
            "/readyz": lambda: _check(readiness),
            "/metrics": lambda: (200, CONTENT_TYPE_LATEST, generate_latest(registry)),
            "/status": lambda: (200, "application/json", json.dumps(status(), indent=2).encode()),
        }

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                route = routes.get(self.path.split("?", 1)[0])
                if route is None:
                    code, content_type, body = 404, "text/plain", b"not found\n"
                else:
                    try:
                        code, content_type, body = route()
                    except Exception as exc:
                        log.exception("HTTP %s failed", self.path)
                        code, content_type, body = 500, "text/plain", f"{exc}\n".encode()
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("HTTP " + format, *args)

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="http", daemon=True)

    @property
    def port(self) -> int:
        """The bound port (useful with port 0)."""
        return int(self._server.server_address[1])

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _check(check: Check) -> tuple[int, str, bytes]:
    ok, reason = check()
    return (200 if ok else 503), "text/plain", f"{reason}\n".encode()
