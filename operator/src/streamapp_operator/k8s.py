"""The operator's seam to the Kubernetes API: the only module that imports the ``kubernetes`` client.

:class:`Cluster` is the protocol the rest of the operator uses (tests pass a hand-written fake);
:class:`KubernetesCluster` implements it with server-side apply (field manager ``streamapp-operator``,
conflicts forced: the operator owns the fields it sets on its children). Objects travel as plain dicts,
exactly as the API server serves them. Status of the StreamApp itself and Kubernetes events are written
through kopf (``main.py``), which already holds the watch connection and knows the object.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import os
from typing import Any, Protocol

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from streamapp_operator.kinds import GROUP, PLURALS, VERSION

FIELD_MANAGER = "streamapp-operator"
#: The operator's own kinds, served as custom objects: kind -> plural.
_CUSTOM = PLURALS
_APPLY = "application/apply-patch+yaml"
_TIMEOUT = 15.0


class ApplyRejected(Exception):
    """The API server refused an object (invalid, or a change to an immutable field); not worth retrying."""


class KubernetesUnavailable(Exception):
    """The API server could not be reached or failed (5xx, timeout); retry later."""


class Cluster(Protocol):
    """Namespaced objects of the kinds the operator manages (ConfigMap, Service, StatefulSet,
    PodDisruptionBudget), its pods and the Secrets a StreamApp references."""

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        """The object as served, or None when it does not exist."""
        ...

    def apply(self, manifest: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        """Server-side apply ``manifest``; returns the object as stored afterwards. With ``dry_run`` the
        API server validates and admits it (schema, quantities, admission such as Pod Security) and stores
        nothing."""
        ...

    def delete(self, kind: str, namespace: str, name: str, uid: str) -> None:
        """Delete the object if it still is the one with ``uid`` (a precondition); absent is fine."""
        ...

    def list_pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        """Pods of ``namespace`` matching the label ``selector`` (``k=v,k2=v2``)."""
        ...

    def list_disruption_budgets(self, namespace: str) -> list[dict[str, Any]]:
        """Every PodDisruptionBudget of ``namespace`` (ours and anyone else's)."""
        ...

    def list_claims(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        """PersistentVolumeClaims of ``namespace`` matching the label ``selector``."""
        ...

    def annotate_claim(self, namespace: str, name: str, uid: str, annotations: dict[str, str | None]) -> None:
        """Merge ``annotations`` (None removes one) into PersistentVolumeClaim ``name`` if it still has ``uid``."""
        ...

    def list_events(self, namespace: str, kind: str, name: str, reason: str) -> list[dict[str, Any]]:
        """The events with ``reason`` about object ``kind``/``name`` of ``namespace`` (e.g. a StatefulSet's
        ``FailedCreate``)."""
        ...

    def patch_streamapp_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        """Merge ``status`` into a StreamApp's status now (intent written before an action)."""
        ...

    def read_secret(self, namespace: str, name: str) -> dict[str, str] | None:
        """The decoded data of Secret ``namespace/name``; None when it does not exist."""
        ...


class KubernetesCluster:
    """:class:`Cluster` over the official client; in-cluster credentials when present, else kubeconfig."""

    def __init__(self, api_client: client.ApiClient | None = None) -> None:
        if api_client is None:
            api_client = _default_api_client()
        self._core = client.CoreV1Api(api_client)
        self._apps = client.AppsV1Api(api_client)
        self._policy = client.PolicyV1Api(api_client)
        self._custom = client.CustomObjectsApi(api_client)
        self._batch = client.BatchV1Api(api_client)

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        if kind in _CUSTOM:
            return self._get_custom(kind, namespace, name)
        read = {
            "ConfigMap": self._core.read_namespaced_config_map,
            "Service": self._core.read_namespaced_service,
            "StatefulSet": self._apps.read_namespaced_stateful_set,
            "PodDisruptionBudget": self._policy.read_namespaced_pod_disruption_budget,
            "Job": self._batch.read_namespaced_job,
            "ServiceAccount": self._core.read_namespaced_service_account,
            "PersistentVolumeClaim": self._core.read_namespaced_persistent_volume_claim,
        }[kind]
        try:
            response = read(name, namespace, _preload_content=False, _request_timeout=_TIMEOUT)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise _unavailable(exc, f"reading {kind} {namespace}/{name}") from exc
        except OSError as exc:
            raise KubernetesUnavailable(f"reading {kind} {namespace}/{name}: {exc}") from exc
        return _json(response)

    def apply(self, manifest: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        kind = manifest["kind"]
        name, namespace = manifest["metadata"]["name"], manifest["metadata"]["namespace"]
        if kind in _CUSTOM:
            return self._apply_custom(manifest, dry_run=dry_run)
        patch = {
            "ConfigMap": self._core.patch_namespaced_config_map,
            "Service": self._core.patch_namespaced_service,
            "StatefulSet": self._apps.patch_namespaced_stateful_set,
            "PodDisruptionBudget": self._policy.patch_namespaced_pod_disruption_budget,
            "Job": self._batch.patch_namespaced_job,
            "ServiceAccount": self._core.patch_namespaced_service_account,
        }[kind]
        try:
            response = patch(
                name,
                namespace,
                manifest,
                field_manager=FIELD_MANAGER,
                force=True,
                dry_run="All" if dry_run else None,
                _content_type=_APPLY,
                _preload_content=False,
                _request_timeout=_TIMEOUT,
            )
        except ApiException as exc:
            raise _translate(exc, f"applying {kind} {namespace}/{name}") from exc
        except OSError as exc:
            raise KubernetesUnavailable(f"applying {kind} {namespace}/{name}: {exc}") from exc
        return _json(response)

    def delete(self, kind: str, namespace: str, name: str, uid: str) -> None:
        if kind in _CUSTOM:
            plural = _CUSTOM[kind]
            remove: Any = functools.partial(
                self._custom.delete_namespaced_custom_object, GROUP, VERSION, namespace, plural
            )
        else:
            remove = {
                "PodDisruptionBudget": self._policy.delete_namespaced_pod_disruption_budget,
                "StatefulSet": self._apps.delete_namespaced_stateful_set,
                "Job": self._batch.delete_namespaced_job,
                "PersistentVolumeClaim": self._core.delete_namespaced_persistent_volume_claim,
            }[kind]
            remove = functools.partial(remove, namespace=namespace)
        # Background: a Job's pods go with it (the API's default for Jobs orphans them)
        options = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=uid), propagation_policy="Background")
        try:
            remove(name, body=options, _preload_content=False, _request_timeout=_TIMEOUT)
        except ApiException as exc:
            if exc.status == 404:
                return
            raise _translate(exc, f"deleting {kind} {namespace}/{name}") from exc
        except OSError as exc:
            raise KubernetesUnavailable(f"deleting {kind} {namespace}/{name}: {exc}") from exc

    def list_pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        return _items(self._core.list_namespaced_pod, f"pods in {namespace}", namespace, label_selector=selector)

    def list_disruption_budgets(self, namespace: str) -> list[dict[str, Any]]:
        return _items(
            self._policy.list_namespaced_pod_disruption_budget, f"PodDisruptionBudgets in {namespace}", namespace
        )

    def list_claims(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        what = f"PersistentVolumeClaims in {namespace}"
        return _items(self._core.list_namespaced_persistent_volume_claim, what, namespace, label_selector=selector)

    def annotate_claim(self, namespace: str, name: str, uid: str, annotations: dict[str, str | None]) -> None:
        body = {"metadata": {"uid": uid, "annotations": annotations}}  # the uid makes it fail on another claim
        try:
            self._core.patch_namespaced_persistent_volume_claim(
                name, namespace, body, field_manager=FIELD_MANAGER, _content_type="application/merge-patch+json",
                _preload_content=False, _request_timeout=_TIMEOUT,
            )  # fmt: skip
        except ApiException as exc:
            if exc.status == 404:
                return
            raise _translate(exc, f"annotating PersistentVolumeClaim {namespace}/{name}") from exc
        except OSError as exc:
            raise KubernetesUnavailable(f"annotating PersistentVolumeClaim {namespace}/{name}: {exc}") from exc

    def list_events(self, namespace: str, kind: str, name: str, reason: str) -> list[dict[str, Any]]:
        selector = f"involvedObject.kind={kind},involvedObject.name={name},reason={reason}"
        what = f"events of {kind} {namespace}/{name}"
        return _items(self._core.list_namespaced_event, what, namespace, field_selector=selector)

    def patch_streamapp_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        try:
            self._custom.patch_namespaced_custom_object_status(
                GROUP, VERSION, namespace, PLURALS["StreamApp"], name, {"status": status}, field_manager=FIELD_MANAGER,
                _content_type="application/merge-patch+json", _preload_content=False, _request_timeout=_TIMEOUT,
            )  # fmt: skip
        except ApiException as exc:
            raise _unavailable(exc, f"patching the status of StreamApp {namespace}/{name}") from exc
        except OSError as exc:
            raise KubernetesUnavailable(f"patching the status of StreamApp {namespace}/{name}: {exc}") from exc

    def patch_replay_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        try:
            self._custom.patch_namespaced_custom_object_status(
                GROUP, VERSION, namespace, _CUSTOM["StreamReplay"], name, {"status": status},
                field_manager=FIELD_MANAGER, _content_type="application/merge-patch+json", _preload_content=False,
                _request_timeout=_TIMEOUT,
            )  # fmt: skip
        except ApiException as exc:
            raise _unavailable(exc, f"patching the status of StreamReplay {namespace}/{name}") from exc
        except OSError as exc:
            raise KubernetesUnavailable(f"patching the status of StreamReplay {namespace}/{name}: {exc}") from exc

    def scale_streamapp(self, namespace: str, name: str, replicas: int) -> None:
        """Set a StreamApp's ``spec.replicas`` through its ``/scale`` subresource (what ``kubectl scale`` does: only
        that field changes, no field manager takes the rest of the user's spec)."""
        what = f"scaling StreamApp {namespace}/{name} to {replicas}"
        try:
            self._custom.patch_namespaced_custom_object_scale(
                GROUP, VERSION, namespace, PLURALS["StreamApp"], name, {"spec": {"replicas": replicas}},
                _content_type="application/merge-patch+json", _preload_content=False, _request_timeout=_TIMEOUT,
            )  # fmt: skip
        except ApiException as exc:
            raise _translate(exc, what) from exc
        except OSError as exc:
            raise KubernetesUnavailable(f"{what}: {exc}") from exc

    def read_pod_log(self, namespace: str, name: str, tail_lines: int = 50) -> str:
        try:
            response = self._core.read_namespaced_pod_log(
                name, namespace, tail_lines=tail_lines, _preload_content=False, _request_timeout=_TIMEOUT
            )
        except ApiException as exc:
            if exc.status in (400, 404):  # not started yet, or gone
                return ""
            raise _unavailable(exc, f"reading the log of pod {namespace}/{name}") from exc
        except OSError as exc:
            raise KubernetesUnavailable(f"reading the log of pod {namespace}/{name}: {exc}") from exc
        data: bytes = getattr(response, "data", b"")
        return data.decode("utf-8", "replace")

    def _get_custom(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            response = self._custom.get_namespaced_custom_object(
                GROUP, VERSION, namespace, _CUSTOM[kind], name, _preload_content=False, _request_timeout=_TIMEOUT
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise _unavailable(exc, f"reading {kind} {namespace}/{name}") from exc
        except OSError as exc:
            raise KubernetesUnavailable(f"reading {kind} {namespace}/{name}: {exc}") from exc
        return _json(response)

    def _apply_custom(self, manifest: dict[str, Any], *, dry_run: bool) -> dict[str, Any]:
        kind = manifest["kind"]
        name, namespace = manifest["metadata"]["name"], manifest["metadata"]["namespace"]
        try:
            response = self._custom.patch_namespaced_custom_object(
                GROUP, VERSION, namespace, _CUSTOM[kind], name, manifest, field_manager=FIELD_MANAGER, force=True,
                dry_run="All" if dry_run else None, _content_type=_APPLY, _preload_content=False,
                _request_timeout=_TIMEOUT,
            )  # fmt: skip
        except ApiException as exc:
            raise _translate(exc, f"applying {kind} {namespace}/{name}") from exc
        except OSError as exc:
            raise KubernetesUnavailable(f"applying {kind} {namespace}/{name}: {exc}") from exc
        return _json(response)

    def read_secret(self, namespace: str, name: str) -> dict[str, str] | None:
        try:
            response = self._core.read_namespaced_secret(
                name, namespace, _preload_content=False, _request_timeout=_TIMEOUT
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise _unavailable(exc, f"reading Secret {namespace}/{name}") from exc
        except OSError as exc:
            raise KubernetesUnavailable(f"reading Secret {namespace}/{name}: {exc}") from exc
        data = _json(response).get("data") or {}
        return {key: base64.b64decode(value).decode("utf-8", "replace") for key, value in data.items()}


def _default_api_client() -> client.ApiClient:
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config()
    else:
        config.load_kube_config()
    return client.ApiClient()


def _items(list_call: Any, what: str, namespace: str, **selectors: str) -> list[dict[str, Any]]:
    """The ``items`` of one namespaced list call; any failure is ``KubernetesUnavailable`` naming ``what``."""
    try:
        response = list_call(namespace, **selectors, _preload_content=False, _request_timeout=_TIMEOUT)
    except ApiException as exc:
        raise _unavailable(exc, f"listing {what}") from exc
    except OSError as exc:
        raise KubernetesUnavailable(f"listing {what}: {exc}") from exc
    items: list[dict[str, Any]] = _json(response).get("items", [])
    return items


def _json(response: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(response.data)
    return data


def _unavailable(exc: ApiException, action: str) -> KubernetesUnavailable:
    """A failed read: whatever the status (even 403), the reconcile cannot go on and is retried later."""
    return KubernetesUnavailable(f"{action}: HTTP {exc.status} {_message(exc)}")


def _message(exc: ApiException) -> str:
    message = exc.reason or ""
    with contextlib.suppress(ValueError, AttributeError):
        message = json.loads(exc.body or "{}").get("message", message)
    return str(message)


def _translate(exc: ApiException, action: str) -> Exception:
    """A failed write: 4xx (except 408/409/429) and 500 -> ApplyRejected with the API server's message, else
    KubernetesUnavailable. A 500 on a write is how the API server answers some invalid objects (an
    unparsable quantity in a StatefulSet), so it is reported like a rejection; the reconcile reports both
    kinds in status and retries at its timer, never in a silent loop."""
    message = _message(exc)
    status = exc.status or 0
    if (400 <= status < 500 and status not in (408, 409, 429)) or status == 500:
        return ApplyRejected(f"{action}: {message}")
    return KubernetesUnavailable(f"{action}: HTTP {status} {message}")
