"""The operator's seam to the app's pods: the ``/status`` document each StreamApp instance serves.

The runtime's supervisor serves ``GET /status`` on the pod's HTTP port (``streamapp.monitoring.server``):
per stream thread its state and its tasks, each with ``state`` (created | restoring | running),
``restore_remaining`` (changelog records left) and, from newer runtimes, ``stores`` (each store's restore
progress). The operator reads it from pods that are not ready, to say which tasks and stores restore (the
``Restoring`` condition, ``status.restore``), as the Flink operator reads job state from the
JobManager's REST API. Plain ``urllib``, no proxy (pod IPs are cluster-internal), a short timeout: a
slow pod must not hold up the reconcile of the others.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any, Protocol

STATUS_PATH = "/status"
_TIMEOUT = 2.0
#: All pods of one reconcile are asked at once and together get this long (the reconcile timer is 10 s).
STATUS_DEADLINE = 3.0
#: At most this many pods are asked per reconcile (the first by name); the others are noted as not asked.
MAX_PODS_ASKED = 10
_CHUNK = 64 * 1024
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

    def __init__(self, timeout: float = _TIMEOUT, deadline: float = STATUS_DEADLINE) -> None:
        self._timeout, self._deadline = timeout, deadline
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def status(self, pod_ip: str, port: int) -> dict[str, Any]:
        host = f"[{pod_ip}]" if ":" in pod_ip else pod_ip
        url = f"http://{host}:{port}{STATUS_PATH}"
        try:
            give_up = time.monotonic() + self._deadline
            with self._opener.open(url, timeout=min(self._timeout, self._deadline)) as response:
                body = b""
                # In chunks, so that a pod dripping its answer is dropped at the deadline.
                while len(body) <= MAX_STATUS_BYTES and (chunk := response.read1(_CHUNK)):
                    body += chunk
                    if time.monotonic() > give_up:
                        raise InstanceUnavailable(f"GET {url}: no full answer within {self._deadline:g} s")
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


def read_statuses(
    reader: InstanceReader,
    pods: Sequence[tuple[str, str]],
    port: int,
    deadline: float = STATUS_DEADLINE,
    max_pods: int = MAX_PODS_ASKED,
) -> dict[str, dict[str, Any] | str]:
    """Pod name -> ``/status`` document, or why there is none, for ``pods`` (``(name, IP)``).

    The first ``max_pods`` are asked concurrently and all answers are awaited for ``deadline`` seconds in
    total, so hung pods cost the reconcile one deadline, not a timeout each. Never raises: any exception
    of ``reader`` becomes the pod's error text. A request still running at the deadline is abandoned (its
    own socket timeout and deadline end it).
    """
    asked, left_out = pods[:max_pods], pods[max_pods:]
    documents: dict[str, dict[str, Any] | str] = {}
    if asked:
        pool = ThreadPoolExecutor(max_workers=len(asked), thread_name_prefix="instance-status")
        try:
            futures = {pool.submit(reader.status, ip, port): name for name, ip in asked}
            done, _ = wait(futures, timeout=deadline)
            for future, name in futures.items():
                if future not in done:
                    documents[name] = f"no answer within {deadline:g} s"
                elif (exc := future.exception()) is not None:
                    documents[name] = (
                        str(exc) if isinstance(exc, InstanceUnavailable) else f"{type(exc).__name__}: {exc}"
                    )
                else:
                    documents[name] = future.result()
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
    for name, _ in left_out:
        documents[name] = f"not asked: at most {max_pods} pods are asked per reconcile"
    return documents
