"""The node agent's only door to the Kubernetes API: reads, writes and watches on plain dicts.

Every object crosses this seam as the JSON dict the API server sent (camelCase keys), never as a
generated model, so the rest of the agent reads exactly what ``kubectl get -o json`` shows. Requests go
through the kubernetes client's authenticated ``ApiClient`` by path. Reads of missing objects return
None; other API errors raise ``ApiException`` (``.status`` is the HTTP code, 0 when the API server
could not be reached).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from e2e.nodeagent.status import rfc3339

log = logging.getLogger(__name__)

MERGE_PATCH = "application/merge-patch+json"
Obj = dict[str, Any]

__all__ = ["ApiException", "Kube", "Obj"]


def _path(*parts: str) -> str:
    return "/" + "/".join(quote(p, safe="") if i % 2 else p for i, p in enumerate(parts) if p is not None)


class Kube:
    """Dict-level API calls (thread-safe: one pooled ApiClient)."""

    def __init__(self, kubeconfig: str) -> None:
        cfg = client.Configuration()
        config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
        cfg.connection_pool_maxsize = 64
        self.api = client.ApiClient(cfg)

    # --- transport -------------------------------------------------------------------------------
    def _send(
        self,
        method: str,
        path: str,
        query: dict[str, Any] | None = None,
        body: Obj | None = None,
        content_type: str = "application/json",
        timeout: float | tuple[float, float] = 30.0,
    ) -> Any:
        """One request; returns the raw urllib3 response (not yet read). Raises ApiException >= 400."""
        headers = {"Accept": "application/json", "Content-Type": content_type}
        serialized = self.api.param_serialize(
            method=method,
            resource_path=path,
            query_params=list((query or {}).items()),
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        try:
            response = self.api.call_api(*serialized, _request_timeout=timeout)
        except urllib3.exceptions.HTTPError as exc:  # API server unreachable/restarting
            raise ApiException(status=0, reason=f"transport error: {exc}") from exc
        raw = response.response
        if raw.status >= 400:
            data = raw.read()
            raise ApiException(status=raw.status, reason=raw.reason, body=data.decode(errors="replace"))
        return raw

    def request(
        self,
        method: str,
        path: str,
        query: dict[str, Any] | None = None,
        body: Obj | None = None,
        content_type: str = "application/json",
    ) -> Obj:
        """A request whose JSON answer is returned as a dict."""
        raw = self._send(method, path, query, body, content_type)
        data: Obj = json.loads(raw.read() or b"{}")
        return data

    def get(self, path: str) -> Obj | None:
        """GET an object; None when it does not exist."""
        try:
            return self.request("GET", path)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def create(self, path: str, body: Obj) -> bool:
        """POST ``body`` to a collection; False when an object of that name exists (409)."""
        try:
            self.request("POST", path, body=body)
            return True
        except ApiException as exc:
            if exc.status != 409:
                raise
            return False

    def merge_patch(self, path: str, patch: Obj) -> Obj:
        return self.request("PATCH", path, body=patch, content_type=MERGE_PATCH)

    def watch(
        self, path: str, resource_version: str, query: dict[str, Any] | None = None, timeout_seconds: int = 60
    ) -> Iterator[Obj]:
        """Events ``{"type": ..., "object": {...}}`` of a collection from ``resource_version``.

        Ends after ``timeout_seconds``; an ``ERROR`` event (e.g. 410 Gone) is yielded as is.
        """
        params = {
            **(query or {}),
            "watch": "true",
            "resourceVersion": resource_version,
            "timeoutSeconds": timeout_seconds,
            "allowWatchBookmarks": "true",
        }
        raw = self._send("GET", path, params, timeout=(10.0, timeout_seconds + 15.0))
        buffer = b""
        try:
            for chunk in raw.stream(4096, decode_content=True):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        yield json.loads(line)
        finally:
            raw.release_conn()

    # --- pods ------------------------------------------------------------------------------------
    def list_pods_on(self, node: str) -> Obj:
        """PodList of all pods bound to ``node`` (all namespaces)."""
        return self.request("GET", "/api/v1/pods", {"fieldSelector": f"spec.nodeName={node}"})

    def watch_pods_on(self, node: str, resource_version: str) -> Iterator[Obj]:
        return self.watch("/api/v1/pods", resource_version, {"fieldSelector": f"spec.nodeName={node}"})

    def get_pod(self, namespace: str, name: str) -> Obj | None:
        return self.get(_path("api/v1/namespaces", namespace, "pods", name))

    def patch_pod_status(self, namespace: str, name: str, status: Obj) -> None:
        """JSON merge patch of ``pods/status`` (lists such as conditions are replaced whole)."""
        self.merge_patch(_path("api/v1/namespaces", namespace, "pods", name) + "/status", {"status": status})

    def delete_pod_now(self, namespace: str, name: str, uid: str) -> None:
        """Delete with grace period 0, only if the object is still the pod ``uid`` (the kubelet's last step)."""
        try:
            self.request(
                "DELETE",
                _path("api/v1/namespaces", namespace, "pods", name),
                body={"gracePeriodSeconds": 0, "preconditions": {"uid": uid}},
            )
        except ApiException as exc:
            if exc.status not in (404, 409):
                raise

    def create_token(
        self, namespace: str, service_account: str, pod: Obj, audience: str | None, expiration: int
    ) -> str:
        """A TokenRequest for ``service_account`` bound to ``pod``; returns the JWT."""
        spec: Obj = {
            "expirationSeconds": expiration,
            "boundObjectRef": {
                "kind": "Pod",
                "apiVersion": "v1",
                "name": pod["metadata"]["name"],
                "uid": pod["metadata"]["uid"],
            },
        }
        if audience:
            spec["audiences"] = [audience]
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}
        path = _path("api/v1/namespaces", namespace, "serviceaccounts", service_account) + "/token"
        token: str = self.request("POST", path, body=body)["status"]["token"]
        return token

    def emit_event(self, obj: Obj, kind: str, event_type: str, reason: str, message: str, component: str) -> None:
        """Record a core/v1 Event about ``obj`` (best effort: failures are logged, not raised)."""
        meta = obj["metadata"]
        namespace = meta.get("namespace") or "default"
        now = rfc3339()
        body = {
            "metadata": {"generateName": f"{meta['name']}.", "namespace": namespace},
            "involvedObject": {
                "kind": kind,
                "apiVersion": "v1",
                "name": meta["name"],
                "namespace": namespace,
                "uid": meta.get("uid"),
            },
            "reason": reason,
            "message": message[:1000],
            "type": event_type,
            "source": {"component": component},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            self.create(_path("api/v1/namespaces", namespace, "events"), body)
        except ApiException as exc:  # 403 while the namespace terminates is expected
            level = logging.DEBUG if exc.status == 403 else logging.WARNING
            log.log(level, "Failed to create event %s for %s: %s", reason, meta["name"], exc.reason)

    # --- config maps, secrets, claims, volumes ---------------------------------------------------
    def get_config_map(self, namespace: str, name: str) -> Obj | None:
        return self.get(_path("api/v1/namespaces", namespace, "configmaps", name))

    def get_secret(self, namespace: str, name: str) -> Obj | None:
        return self.get(_path("api/v1/namespaces", namespace, "secrets", name))

    def get_pvc(self, namespace: str, name: str) -> Obj | None:
        return self.get(_path("api/v1/namespaces", namespace, "persistentvolumeclaims", name))

    def list_pvcs(self) -> Obj:
        return self.request("GET", "/api/v1/persistentvolumeclaims")

    def watch_pvcs(self, resource_version: str) -> Iterator[Obj]:
        return self.watch("/api/v1/persistentvolumeclaims", resource_version)

    def get_pv(self, name: str) -> Obj | None:
        return self.get(_path("api/v1/persistentvolumes", name))

    def list_pvs(self, label_selector: str) -> Obj:
        return self.request("GET", "/api/v1/persistentvolumes", {"labelSelector": label_selector})

    def create_pv(self, body: Obj) -> bool:
        """Create a PersistentVolume; False when one of that name exists already (left alone)."""
        return self.create("/api/v1/persistentvolumes", body)

    def delete_pv(self, name: str) -> None:
        try:
            self.request("DELETE", _path("api/v1/persistentvolumes", name))
        except ApiException as exc:
            if exc.status != 404:
                raise

    def ensure_storage_class(self, body: Obj) -> None:
        """Create the StorageClass unless one of that name exists (never changed afterwards)."""
        self.create("/apis/storage.k8s.io/v1/storageclasses", body)

    # --- node and lease --------------------------------------------------------------------------
    def get_node(self, name: str) -> Obj | None:
        return self.get(_path("api/v1/nodes", name))

    def create_node(self, body: Obj) -> bool:
        return self.create("/api/v1/nodes", body)

    def patch_node(self, name: str, patch: Obj) -> None:
        self.merge_patch(_path("api/v1/nodes", name), patch)

    def patch_node_status(self, name: str, status: Obj) -> None:
        self.merge_patch(_path("api/v1/nodes", name) + "/status", {"status": status})

    def get_lease(self, namespace: str, name: str) -> Obj | None:
        return self.get(_path("apis/coordination.k8s.io/v1/namespaces", namespace, "leases", name))

    def create_lease(self, namespace: str, body: Obj) -> bool:
        return self.create(_path("apis/coordination.k8s.io/v1/namespaces", namespace, "leases"), body)

    def patch_lease(self, namespace: str, name: str, patch: Obj) -> None:
        self.merge_patch(_path("apis/coordination.k8s.io/v1/namespaces", namespace, "leases", name), patch)
