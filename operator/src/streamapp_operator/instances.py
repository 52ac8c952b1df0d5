"""The operator's seam to the app's pods: the ``/status`` document each StreamApp instance serves.

The runtime's supervisor serves ``GET /status`` on the pod's HTTP port (``streamapp.monitoring.server``):
per stream thread its state and its tasks, each with ``state`` (created | restoring | running) and
``restore_remaining`` (changelog records left). The operator reads it from pods that are not ready, to
say which tasks restore (the ``Restoring`` condition), as the Flink operator reads job state from the
JobManager's REST API. Plain ``urllib``, no proxy (pod IPs are cluster-internal), a short timeout: a
slow pod must not hold up the reconcile of the others.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any, Protocol

STATUS_PATH = "/status"
_TIMEOUT = 2.0
#: The most of a pod's answer read: a pod is the user's code, and must not make the operator run out of memory.
MAX_STATUS_BYTES = 1024 * 1024


class InstanceUnavailable(Exception):
    """The pod did not answer ``/status`` with a JSON object (not listening yet, refused, timed out, a
    malformed or truncated answer, one larger than ``MAX_STATUS_BYTES``)."""


class InstanceReader(Protocol):
    """Reads one instance's status document."""

    def status(self, pod_ip: str, port: int) -> dict[str, Any]:
        """The ``/status`` document of the pod at ``pod_ip``; raises :class:`InstanceUnavailable`."""
        ...


class HttpInstanceReader:
    """:class:`InstanceReader` over HTTP, bypassing any ``HTTP_PROXY`` of the operator's environment."""

    def __init__(self, timeout: float = _TIMEOUT) -> None:
        self._timeout = timeout
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def status(self, pod_ip: str, port: int) -> dict[str, Any]:
        host = f"[{pod_ip}]" if ":" in pod_ip else pod_ip
        url = f"http://{host}:{port}{STATUS_PATH}"
        try:
            with self._opener.open(url, timeout=self._timeout) as response:
                body = response.read(MAX_STATUS_BYTES + 1)
            if len(body) > MAX_STATUS_BYTES:
                raise InstanceUnavailable(f"GET {url}: answer larger than {MAX_STATUS_BYTES} bytes")
            document = json.loads(body)
        except InstanceUnavailable:
            raise
        except Exception as exc:  # whatever the pod sends: HTTPException, RecursionError, ...
            raise InstanceUnavailable(f"GET {url}: {type(exc).__name__}: {exc}") from exc
        if not isinstance(document, dict):
            raise InstanceUnavailable(f"GET {url}: not a JSON object")
        return document
