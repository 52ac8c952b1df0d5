"""The kubelet's container log endpoint, so that ``kubectl logs`` works for pods of the node agent.

``kubectl logs POD -c C`` asks the API server (``GET /api/v1/namespaces/NS/pods/POD/log``), which asks the kubelet
of the pod's Node: ``GET https://<node address>:<daemonEndpoints.kubeletEndpoint.Port>/containerLogs/NS/POD/C``
(Kubernetes' ``pkg/kubelet/server``), authenticated with its ``--kubelet-client-certificate`` and verifying the
kubelet's serving certificate against ``--kubelet-certificate-authority``. This server answers that path from the
files the agent writes, ``<run_dir>/pods/NS/POD/C.log``, over TLS with the node's serving certificate, and accepts
only clients whose certificate the cluster CA signed (the API server's; the kubelet's ``--client-ca-file``).

Query parameters (the kubelet's ``PodLogOptions``): ``tailLines``, ``limitBytes`` and ``follow`` are honoured;
``previous`` is answered 400 (the agent appends every run of a container to one file, so the whole file is the
current and the earlier runs); ``sinceSeconds``, ``sinceTime`` and ``timestamps`` are ignored (the file has no
times per line). ``parse_request`` and ``log_slice`` decide; ``LogServer`` serves.
"""

from __future__ import annotations

import logging
import ssl
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

log = logging.getLogger(__name__)

KUBELET_PORT = 10250
FOLLOW_POLL_S = 0.5
_CHUNK = 64 * 1024


@dataclass(frozen=True)
class LogRequest:
    """One ``/containerLogs`` request: the log file's coordinates and the options honoured."""

    namespace: str
    pod: str
    container: str
    tail_lines: int | None = None
    limit_bytes: int | None = None
    follow: bool = False


class BadRequest(ValueError):
    """The request cannot be served; ``status`` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def parse_request(target: str) -> LogRequest:
    """The ``LogRequest`` of a request target such as ``/containerLogs/ns/pod/c?tailLines=10&follow=true``.
    Raises BadRequest (404 for another path, 400 for a bad or unsupported option)."""
    url = urlsplit(target)
    parts = [unquote(p) for p in url.path.split("/")]
    if len(parts) != 5 or parts[:2] != ["", "containerLogs"] or not all(parts[2:]):
        raise BadRequest(404, f"not found: {url.path} (this node serves /containerLogs/NAMESPACE/POD/CONTAINER)")
    if any(p in ("..", ".") or "/" in p for p in parts[2:]):
        raise BadRequest(400, f"bad path {url.path}")
    query = {key: values[-1] for key, values in parse_qs(url.query).items()}
    if query.get("previous") == "true":
        raise BadRequest(
            400,
            "previous=true is not supported by the local node agent: its log file holds every run of the container",
        )
    return LogRequest(
        parts[2],
        parts[3],
        parts[4],
        tail_lines=_non_negative(query, "tailLines"),
        limit_bytes=_non_negative(query, "limitBytes"),
        follow=query.get("follow") == "true",
    )


def _non_negative(query: dict[str, str], name: str) -> int | None:
    if name not in query:
        return None
    try:
        value = int(query[name])
    except ValueError:
        value = -1
    if value < 0:
        raise BadRequest(400, f"{name} must be a non-negative integer, got {query[name]!r}")
    return value


def log_slice(data: bytes, tail_lines: int | None, limit_bytes: int | None) -> bytes:
    """What the kubelet returns of a log ``data``: its last ``tail_lines`` lines (all when None), then at most
    ``limit_bytes`` bytes of those from the start (the kubelet's ``LimitBytes`` cuts the end)."""
    if tail_lines is not None:
        lines = data.splitlines(keepends=True)
        data = b"".join(lines[max(0, len(lines) - tail_lines) :])
    if limit_bytes is not None:
        data = data[:limit_bytes]
    return data


def log_path(pods_dir: Path, request: LogRequest) -> Path:
    """The file the agent writes the container's output to (``PodWorker``'s ``<pod dir>/<container>.log``)."""
    return pods_dir / request.namespace / request.pod / f"{request.container}.log"


class LogServer:
    """``/containerLogs`` over HTTPS on ``host:port`` for the pods under ``pods_dir``. ``tls`` is an
    ``ssl.SSLContext`` requiring client certificates (``server_context``); None serves plain HTTP (tests only)."""

    def __init__(self, pods_dir: Path, host: str, port: int, tls: ssl.SSLContext | None) -> None:
        self.pods_dir = pods_dir
        self.stopping = threading.Event()
        self.httpd = _Server((host, port), _handler(self))
        if tls is not None:  # the handshake runs in the request's thread (_handler.setup), not in accept()
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True, do_handshake_on_connect=False)
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="kubelet-logs", daemon=True)

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    def start(self) -> None:
        self._thread.start()
        log.info("Serving /containerLogs on %s:%d (kubectl logs)", *self.httpd.server_address[:2])

    def stop(self) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        log.debug("log server: request from %s failed", client_address, exc_info=True)  # e.g. a refused client


def server_context(cert_file: Path, key_file: Path, client_ca_file: Path) -> ssl.SSLContext:
    """TLS for the log server: the node's serving certificate, clients must present one the cluster CA signed."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    context.load_verify_locations(client_ca_file)
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def _handler(server: LogServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            if isinstance(self.request, ssl.SSLSocket):
                self.request.settimeout(10)
                self.request.do_handshake()  # raises for a client without a certificate of the cluster CA
                self.request.settimeout(None)
            super().setup()

        def do_GET(self) -> None:
            try:
                request = parse_request(self.path)
                path = log_path(server.pods_dir, request)
                if not path.is_file():
                    raise BadRequest(
                        404, f'container "{request.container}" in pod "{request.namespace}/{request.pod}" has no log'
                    )
                data = path.read_bytes()
            except BadRequest as exc:
                self._answer(exc.status, str(exc).encode() + b"\n")
                return
            start = log_slice(data, request.tail_lines, request.limit_bytes)
            if not request.follow:
                self._answer(200, start)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self._follow(path, start, len(data), request.limit_bytes)

        def _follow(self, path: Path, start: bytes, offset: int, limit: int | None) -> None:
            """Stream ``start``, then what is appended to ``path`` after ``offset``, until the client goes, the
            server stops or ``limit`` bytes were sent."""
            sent = 0
            chunk = start
            try:
                while True:
                    if limit is not None:
                        chunk = chunk[: limit - sent]
                    if chunk:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        self.wfile.flush()
                        sent += len(chunk)
                    if (limit is not None and sent >= limit) or server.stopping.wait(FOLLOW_POLL_S):
                        break
                    chunk, offset = _read_from(path, offset)
                self.wfile.write(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
                pass  # the client (kubectl, through the API server) went away

        def _answer(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            log.debug("log server: " + format, *args)

    return Handler


def _read_from(path: Path, offset: int) -> tuple[bytes, int]:
    """The bytes appended to ``path`` after ``offset`` (at most 64 KiB) and the new offset; a file that shrank
    (truncated) is read from its start again."""
    try:
        with path.open("rb") as file:
            size = file.seek(0, 2)
            offset = 0 if size < offset else offset
            file.seek(offset)
            data = file.read(_CHUNK)
    except FileNotFoundError:
        return b"", offset
    return data, offset + len(data)
