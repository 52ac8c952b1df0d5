"""Desired child objects of a StreamApp: pure builders from the typed spec to Kubernetes manifests.

Each builder takes plain data and returns a manifest dict ready for server-side apply; nothing here reads
or writes the cluster. The workload follows the runtime process contract: a ConfigMap ``<name>-config``
with ``topology.yaml`` and ``streams.yaml`` mounted at ``/etc/streamapp``, a headless Service ``<name>``,
and a StatefulSet ``<name>`` whose pods keep their state stores on a per-pod volume (``state``) at
``/var/lib/streamapp``. A hash of the ConfigMap's data is stamped on the pod template, so a change of
topology or configuration rolls the pods. A PodDisruptionBudget ``<name>`` bounds how many of those pods a
node drain evicts at once (:func:`disruption_budget`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from streamapp_operator.connection import CA_DIR, CA_FILE, credentials_env, security_config
from streamapp_operator.kinds import CONTAINER_SECURITY, RUN_AS_USER, Owner, owned_by
from streamapp_operator.streamapps.resources import (
    DEFAULT_MAX_UNAVAILABLE,
    CleanupPolicy,
    StreamAppSpec,
)

CONFIG_DIR = "/etc/streamapp"
STATE_DIR = "/var/lib/streamapp"
HTTP_PORT = 8080
TOPOLOGY_FILE = "topology.yaml"
STREAMS_FILE = "streams.yaml"
CONFIG_HASH_ANNOTATION = "streamapp.io/config-hash"
TEMPLATE_HASH_ANNOTATION = "streamapp.io/template-hash"
CONTAINER_NAME = "streamapp"
TERMINATION_GRACE_SECONDS = 60
TMP_DIR = "/tmp"
#: Requests of the application container when ``spec.resources.requests`` does not set them: the scheduler
#: then reserves something, and namespaces with a ResourceQuota admit the pods.
DEFAULT_REQUESTS = {"cpu": "100m", "memory": "256Mi"}
#: Runtime configuration keys the operator derives from first-class spec fields; ``spec.config`` must not
#: set them (``validate.check_spec`` reports which field to use instead).
DERIVED_CONFIG_KEYS = {
    "application.id": "spec.applicationId",
    "bootstrap.servers": "spec.kafka.bootstrapServers",
    "num.stream.threads": "spec.threads",
    "processing.guarantee": "spec.processingGuarantee",
    "state.dir": "(fixed by the operator)",
    "http.port": "(fixed by the operator)",
    "application.server": "each pod's IP and http port (STREAMAPP_APPLICATION_SERVER)",
}


def selector_labels(name: str) -> dict[str, str]:
    """Labels that select the pods of StreamApp ``name``."""
    return {"app.kubernetes.io/name": "streamapp", "app.kubernetes.io/instance": name}


def selector(name: str) -> str:
    """``selector_labels`` as a label selector string (``status.selector``, the /scale subresource)."""
    return ",".join(f"{key}={value}" for key, value in selector_labels(name).items())


def labels(name: str) -> dict[str, str]:
    """Labels of every child object."""
    return {**selector_labels(name), "app.kubernetes.io/managed-by": "streamapp-operator"}


def config_map_name(name: str) -> str:
    return f"{name}-config"


def streams_config(spec: StreamAppSpec, application_id: str) -> dict[str, Any]:
    """The runtime's ``streams.yaml``: derived keys first, then ``spec.config`` in key order."""
    derived: dict[str, Any] = {
        "application.id": application_id,
        "bootstrap.servers": spec.kafka.bootstrap_servers,
        "num.stream.threads": spec.threads,
        "processing.guarantee": spec.processing_guarantee.value,
        "state.dir": STATE_DIR,
        "http.port": HTTP_PORT,
    }
    derived.update(security_config(spec.kafka))
    extra = {key: spec.config[key] for key in sorted(spec.config) if key not in derived}
    return {**derived, **extra}


def config_map(owner: Owner, topology_yaml: str, config: dict[str, Any]) -> dict[str, Any]:
    """ConfigMap ``<name>-config`` with the topology description and the runtime configuration."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(owner, config_map_name(owner.name)),
        "data": {
            TOPOLOGY_FILE: topology_yaml,
            STREAMS_FILE: yaml.safe_dump(config, sort_keys=False, default_flow_style=False),
        },
    }


def config_hash(config_map_manifest: dict[str, Any]) -> str:
    """A short, stable digest of a ConfigMap's data (16 hex digits)."""
    return _digest(config_map_manifest["data"])


def rolls_pods(current: dict[str, Any] | None, stateful_set_manifest: dict[str, Any]) -> bool:
    """Whether applying ``stateful_set_manifest`` over the ``current`` StatefulSet replaces running pods."""
    if current is None:
        return False
    annotations = current.get("metadata", {}).get("annotations") or {}
    wanted = stateful_set_manifest["metadata"]["annotations"][TEMPLATE_HASH_ANNOTATION]
    return bool(annotations.get(TEMPLATE_HASH_ANNOTATION) != wanted)


def _digest(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def service(owner: Owner) -> dict[str, Any]:
    """Headless Service ``<name>``: stable DNS names for the pods (``<pod>.<name>``). Its ``http`` port also serves
    the interactive queries (``POST /query``, ``GET /metadata``): any pod answers for the whole application,
    forwarding to the pod that owns a key's task (``kubectl port-forward svc/<name> 8080``, then ``streamapp query``;
    docs/interactive-queries.md)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(owner, owner.name),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": selector_labels(owner.name),
            "ports": [{"name": "http", "port": HTTP_PORT, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def stateful_set(owner: Owner, spec: StreamAppSpec, config_digest: str, partition: int = 0) -> dict[str, Any]:
    """StatefulSet ``<name>``: ``spec.replicas`` pods of the runtime, each with its own state volume.

    A partitioned rolling update: the StatefulSet controller replaces only the pods whose ordinal is at least
    ``partition``; the operator lowers it one pod at a time (``rollout.plan_rollout``, ADR 0009).

    Pods start in parallel (no ordinal ordering is needed: Kafka's group protocol coordinates them), and
    each pod's name is its static group membership id (``STREAMAPP_INSTANCE_ID``). The StatefulSet carries
    a digest of its pod template (``TEMPLATE_HASH_ANNOTATION``), so a change that rolls pods is visible
    before it is applied (the API server fills in defaults, so templates cannot be compared directly).
    """
    template = {
        "metadata": {
            "labels": labels(owner.name),
            "annotations": {CONFIG_HASH_ANNOTATION: config_digest},
        },
        "spec": _pod_spec(owner, spec),
    }
    metadata = _metadata(owner, owner.name)
    metadata["annotations"] = {TEMPLATE_HASH_ANNOTATION: _digest(template)}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": metadata,
        "spec": {
            "serviceName": owner.name,
            "replicas": spec.replicas,
            "podManagementPolicy": "Parallel",
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": partition}},
            "selector": {"matchLabels": selector_labels(owner.name)},
            "template": template,
            "volumeClaimTemplates": [_state_claim(owner, spec)],
            "persistentVolumeClaimRetentionPolicy": {
                # cleanupPolicy Delete: the StatefulSet controller deletes the state volumes with the
                # StatefulSet (garbage-collected after the StreamApp); a scale-down always keeps them.
                "whenDeleted": "Delete" if spec.cleanup_policy == CleanupPolicy.DELETE else "Retain",
                "whenScaled": "Retain",
            },
        },
    }


@dataclass(frozen=True)
class DisruptionBudget:
    """The decision on the PodDisruptionBudget: its manifest, or None when there must be none, and a
    one-line ``summary`` for ``status.disruptionBudget`` (the bound in force, or why there is none).
    ``blocking`` marks a budget left out because it would forbid every voluntary eviction."""

    manifest: dict[str, Any] | None
    summary: str
    blocking: bool = False
    foreign: bool = False
    """Left out because a PodDisruptionBudget the app does not own is in the way (same name, or it
    already selects the app's pods)."""


def disruption_budget(
    owner: Owner,
    spec: StreamAppSpec,
    existing: Sequence[Mapping[str, Any]] = (),
    pod_labels: Sequence[Mapping[str, str]] = (),
) -> DisruptionBudget:
    """PodDisruptionBudget ``<name>`` over the app's pods, from ``spec.disruptionBudget``.

    ``existing`` are the PodDisruptionBudgets of the namespace as served, ``pod_labels`` the labels of the
    app's pods as they run (the pod template's labels are always checked too). A budget this app does not
    own decides first (``foreign``), because our own budget would then do harm:

    - one named ``<name>``: none, never applied over (server-side apply would take it over, replace its
      selector and later delete it; or be refused when it sets the other bound);
    - one that selects the app's pods: none, because the Eviction API refuses any pod covered by two
      budgets ("more than one PodDisruptionBudget"), so with ours no pod could be evicted at all.

    Then:

    - disabled, or ``replicas == 0``: none (nothing to protect);
    - ``minAvailable`` not below ``replicas`` (e.g. 1 of 1 pod, or after a scale-down): none, because
      such a budget allows no eviction at all: ``kubectl drain`` would retry forever and the cluster
      autoscaler could never remove the node (the CRD already rejects ``maxUnavailable: 0`` for the
      same reason). ``blocking`` is set so that the reconcile warns once;
    - otherwise ``maxUnavailable`` (default 1) or ``minAvailable`` as given. With one replica the default
      budget still lets the pod go: one pod cannot be protected without blocking the drain.

    ``unhealthyPodEvictionPolicy: AlwaysAllow``: a pod that is not ready (restoring its state, crash-looping)
    may always be evicted; the bound still counts it as unavailable, so no ready pod goes while one is not
    ready. With the default (``IfHealthyBudget``) such a pod could not be evicted at all while the budget is
    not met (with 1 replica: never), and a drain would hang on it.
    """
    budget = spec.disruption_budget
    if not budget.enabled:
        return DisruptionBudget(None, "none: spec.disruptionBudget.enabled is false")
    if spec.replicas == 0:
        return DisruptionBudget(None, "none: no replicas")
    in_the_way = foreign_budget(owner, existing, [labels(owner.name), *pod_labels])
    if in_the_way is not None:
        return DisruptionBudget(None, f"none: {in_the_way}", foreign=True)
    bound: dict[str, int]
    if budget.min_available is not None:
        if budget.min_available >= spec.replicas:
            reason = (
                f"none: minAvailable {budget.min_available} with {spec.replicas} replicas would block every "
                "voluntary eviction"
            )
            return DisruptionBudget(None, reason, blocking=True)
        bound = {"minAvailable": budget.min_available}
    else:
        bound = {"maxUnavailable": budget.max_unavailable or DEFAULT_MAX_UNAVAILABLE}
    manifest = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _metadata(owner, owner.name),
        "spec": {
            **bound,
            "selector": {"matchLabels": selector_labels(owner.name)},
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }
    ((key, value),) = bound.items()
    return DisruptionBudget(manifest, f"{key}={value}")


def foreign_budget(
    owner: Owner, existing: Sequence[Mapping[str, Any]], pod_labels: Sequence[Mapping[str, str]]
) -> str | None:
    """Why a PodDisruptionBudget not owned by ``owner`` keeps ours out (None: nothing in the way).

    Owned means ``owner.uid`` among its ownerReferences. The same name is named first; otherwise the first
    budget (by name) whose selector matches any of ``pod_labels``.
    """
    foreign = [pdb for pdb in existing if not owned_by(pdb, owner.uid)]
    for pdb in foreign:
        if pdb.get("metadata", {}).get("name") == owner.name:
            return f"PodDisruptionBudget {owner.name} exists and is not owned by this StreamApp"
    for pdb in sorted(foreign, key=lambda p: str(p.get("metadata", {}).get("name"))):
        selector = (pdb.get("spec") or {}).get("selector")
        if any(selector_matches(selector, pod) for pod in pod_labels):
            return f"PodDisruptionBudget {pdb['metadata'].get('name')} already covers the pods"
    return None


def selector_matches(selector: Mapping[str, Any] | None, pod_labels: Mapping[str, str]) -> bool:
    """Whether a ``LabelSelector`` selects a pod with ``pod_labels``, as a policy/v1 budget does: a null
    selector selects nothing, an empty one every pod of the namespace. A requirement the operator does not
    know (a malformed budget) counts as matching: when in doubt, keep out of the way."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if pod_labels.get(key) != value:
            return False
    for requirement in selector.get("matchExpressions") or []:
        key, op, values = requirement.get("key"), requirement.get("operator"), requirement.get("values") or []
        present = key in pod_labels
        if op == "In":
            ok = present and pod_labels[key] in values
        elif op == "NotIn":
            ok = not present or pod_labels[key] not in values
        elif op == "Exists":
            ok = present
        elif op == "DoesNotExist":
            ok = not present
        else:
            ok = True
        if not ok:
            return False
    return True


def _resources(spec: StreamAppSpec) -> dict[str, Any]:
    given = spec.resources.model_dump(mode="json", by_alias=True, exclude_none=True) if spec.resources else {}
    requests = {key: value for key, value in DEFAULT_REQUESTS.items() if key not in (given.get("limits") or {})}
    return {**given, "requests": {**requests, **(given.get("requests") or {})}}


def _pod_spec(owner: Owner, spec: StreamAppSpec) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": CONTAINER_NAME,
        "image": spec.image,
        "imagePullPolicy": spec.image_pull_policy.value,
        "command": [
            "streamapp",
            "run",
            "--topology",
            f"{CONFIG_DIR}/{TOPOLOGY_FILE}",
            "--config",
            f"{CONFIG_DIR}/{STREAMS_FILE}",
        ],
        "env": [
            {"name": "STREAMAPP_INSTANCE_ID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "STREAMAPP_HTTP_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            # the pod's address for interactive queries (application.server), advertised in its client ids so any
            # pod forwards a query to the owner of the key's task (docs/adr/0012-query-endpoints.md)
            {"name": "STREAMAPP_APPLICATION_SERVER", "value": f"$(STREAMAPP_HTTP_HOST):{HTTP_PORT}"},
            *credentials_env(spec.kafka),
        ],
        "ports": [{"name": "http", "containerPort": HTTP_PORT, "protocol": "TCP"}],
        "readinessProbe": {
            "httpGet": {"path": "/readyz", "port": HTTP_PORT},
            "periodSeconds": 5,
            "failureThreshold": 3,
        },
        "livenessProbe": {
            "httpGet": {"path": "/healthz", "port": HTTP_PORT},
            "initialDelaySeconds": 10,
            "periodSeconds": 10,
            "failureThreshold": 6,
        },
        "volumeMounts": [
            {"name": "state", "mountPath": STATE_DIR},
            {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
            {"name": "tmp", "mountPath": TMP_DIR},
        ],
        "resources": _resources(spec),
        "securityContext": CONTAINER_SECURITY,
    }
    volumes: list[dict[str, Any]] = [
        {"name": "config", "configMap": {"name": config_map_name(owner.name)}},
        {"name": "tmp", "emptyDir": {}},
    ]
    ca = spec.kafka.tls.ca_secret if spec.kafka.tls is not None else None
    if ca is not None:
        container["volumeMounts"].append({"name": "kafka-ca", "mountPath": CA_DIR, "readOnly": True})
        items = [{"key": ca.key, "path": CA_FILE}]
        volumes.append({"name": "kafka-ca", "secret": {"secretName": ca.name, "items": items}})
    return {
        "containers": [container],
        "enableServiceLinks": False,
        "automountServiceAccountToken": False,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": RUN_AS_USER,
            "runAsGroup": RUN_AS_USER,
            "fsGroup": RUN_AS_USER,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "terminationGracePeriodSeconds": TERMINATION_GRACE_SECONDS,
        "volumes": volumes,
    }


def _state_claim(owner: Owner, spec: StreamAppSpec) -> dict[str, Any]:
    claim_spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": str(spec.state.size)}},
    }
    if spec.state.storage_class_name is not None:
        claim_spec["storageClassName"] = spec.state.storage_class_name
    return {"metadata": {"name": "state", "labels": selector_labels(owner.name)}, "spec": claim_spec}


def _metadata(owner: Owner, name: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": owner.namespace,
        "labels": labels(owner.name),
        "ownerReferences": [owner.reference()],
    }
