"""Container probes: run httpGet / tcpSocket / exec checks and apply the kubelet's timing and thresholds.

``ProbeTracker`` is the pure part: given a probe spec and the container start time (monotonic seconds)
it says when the next check is due and folds results into a pass/fail state with
``successThreshold``/``failureThreshold``. ``check`` performs one check.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass
class ProbeTracker:
    """Timing and threshold state of one probe of one container run.

    ``passing`` starts False for readiness/startup and True for liveness (a container is presumed alive
    until proven otherwise). Times are ``time.monotonic()`` seconds.
    """

    spec: dict[str, Any]
    kind: str  # "readiness" | "liveness" | "startup"
    container_started: float
    passing: bool = False
    successes: int = 0
    failures: int = 0
    next_at: float = 0.0
    last_message: str = ""

    def __post_init__(self) -> None:
        self.passing = self.kind == "liveness"
        self.next_at = self.container_started + float(self.spec.get("initialDelaySeconds", 0))

    @property
    def period(self) -> float:
        return float(self.spec.get("periodSeconds", 10))

    @property
    def timeout(self) -> float:
        return float(self.spec.get("timeoutSeconds", 1))

    def due(self, now: float) -> bool:
        """Whether a check should run at ``now``."""
        return now >= self.next_at

    def record(self, ok: bool, now: float, message: str = "") -> bool:
        """Fold one result in; schedule the next check. Returns True when ``passing`` flipped."""
        before = self.passing
        self.last_message = message
        if ok:
            self.successes, self.failures = self.successes + 1, 0
            threshold = 1 if self.kind in ("liveness", "startup") else int(self.spec.get("successThreshold", 1))
            if self.successes >= threshold:
                self.passing = True
        else:
            self.failures, self.successes = self.failures + 1, 0
            if self.failures >= int(self.spec.get("failureThreshold", 3)):
                self.passing = False
        self.next_at = now + self.period
        return self.passing != before


def resolve_port(port: int | str, container: dict[str, Any]) -> int:
    """A probe port: an int, a numeric string, or the name of one of the container's ports."""
    if isinstance(port, int):
        return port
    if port.isdigit():
        return int(port)
    for p in container.get("ports") or []:
        if p.get("name") == port:
            return int(p["containerPort"])
    raise ValueError(f"unknown named port {port!r}")


def check(
    spec: dict[str, Any],
    container: dict[str, Any],
    pod_ip: str,
    env: Mapping[str, str],
    exec_prefix: list[str],
    timeout: float,
) -> tuple[bool, str]:
    """Run one probe check. Returns (success, message); never raises.

    ``exec_prefix`` is put before an exec probe's command to run it inside the container (nsenter ...).
    """
    try:
        if "httpGet" in spec:
            return _http_get(spec["httpGet"], container, pod_ip, timeout)
        if "tcpSocket" in spec:
            action = spec["tcpSocket"]
            port = resolve_port(action["port"], container)
            with socket.create_connection((action.get("host") or pod_ip, port), timeout=timeout):
                return True, ""
        if "exec" in spec:
            argv = [*exec_prefix, *(spec["exec"].get("command") or [])]
            done = subprocess.run(argv, env=dict(env), capture_output=True, timeout=timeout)
            output = (done.stdout + done.stderr).decode(errors="replace")[-500:]
            return done.returncode == 0, output
        return False, f"unsupported probe handler {sorted(spec)}"
    except subprocess.TimeoutExpired:
        return False, f"command timed out after {timeout}s"
    except (OSError, ValueError, http.client.HTTPException) as exc:
        return False, str(exc)


def _http_get(action: dict[str, Any], container: dict[str, Any], pod_ip: str, timeout: float) -> tuple[bool, str]:
    host = action.get("host") or pod_ip
    port = resolve_port(action["port"], container)
    conn: http.client.HTTPConnection
    if str(action.get("scheme", "HTTP")).upper() == "HTTPS":
        conn = http.client.HTTPSConnection(host, port, timeout=timeout, context=ssl._create_unverified_context())
    else:
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
    headers = {h["name"]: h["value"] for h in action.get("httpHeaders") or []}
    headers.setdefault("User-Agent", "kube-probe/1.33")
    try:
        conn.request("GET", action.get("path") or "/", headers=headers)
        response = conn.getresponse()
        body = response.read(1024).decode(errors="replace")
        ok = 200 <= response.status < 400
        return ok, "" if ok else f"HTTP probe failed with statuscode: {response.status} {body[:200]}"
    finally:
        conn.close()
