"""Test data and hand-written fakes of the operator's two seams (imported by the tests and conftest).

``TestingCluster`` stands in for ``k8s.KubernetesCluster`` and ``TestingKafka`` for
``kafka.ConfluentKafkaAdmin``; they keep objects and topics in dicts and behave like the real thing where
the reconcile depends on it (server-side apply keeps ``generation`` unless the spec changes; topic
creation is idempotent). Tests against the real API server and broker live in the ``integration``/``e2e``
marked modules.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from typing import Any

from streamapp_operator.instances import InstanceUnavailable
from streamapp_operator.k8s import ApplyRejected
from streamapp_operator.kafka import GroupLag, GroupMember, KafkaUnavailable, TopicCreationFailed, TopicSpec

FLIGHTS_TOPOLOGY: dict[str, Any] = {
    "nodes": [
        {"name": "flights", "type": "source", "topics": ["flights"], "keySerde": "string", "valueSerde": "json"},
        {"name": "departed", "type": "filter", "input": "flights", "predicate": "flights_app.logic:is_departed"},
        {"name": "per-carrier-key", "type": "select_key", "input": "departed", "mapper": "flights_app.logic:carrier"},
        {
            "name": "per-carrier",
            "type": "repartition",
            "input": "per-carrier-key",
            "keySerde": "string",
            "valueSerde": "json",
        },
        {"name": "count", "type": "count", "input": "per-carrier", "store": "departures-per-carrier-store"},
        {"name": "changes", "type": "to_stream", "input": "count"},
        {
            "name": "out",
            "type": "sink",
            "input": "changes",
            "topic": "departures-per-carrier",
            "keySerde": "string",
            "valueSerde": "long",
        },
    ],
    "stores": [
        {"name": "departures-per-carrier-store", "type": "key_value", "keySerde": "string", "valueSerde": "long"}
    ],
}


def flights_spec(**overrides: Any) -> dict[str, Any]:
    """A valid StreamApp spec (as the API server stores it, defaults applied) with ``overrides`` on top."""
    spec: dict[str, Any] = {
        "image": "localhost/streamapp:dev",
        "imagePullPolicy": "IfNotPresent",
        "replicas": 2,
        "threads": 2,
        "processingGuarantee": "at_least_once",
        "kafka": {"bootstrapServers": "127.0.0.1:9092"},
        "topology": copy.deepcopy(FLIGHTS_TOPOLOGY),
        "state": {"size": "1Gi"},
        "config": {"commit.interval.ms": "1000"},
    }
    spec.update(overrides)
    return spec


class TestingCluster:
    """In-memory ``k8s.Cluster``. Applying the same manifest twice changes nothing (as server-side apply);
    a different manifest bumps ``generation`` and ``resourceVersion`` and keeps the object's status and
    ``uid``; ``delete`` honours the uid precondition."""

    __test__ = False  # a fake, not a test class

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.applied: list[dict[str, Any]] = []
        self.reject: dict[str, str] = {}
        self.status_writes: list[dict[str, Any]] = []
        self.secrets: dict[tuple[str, str], dict[str, str]] = {}
        self.journal: list[str] = []  # writes in order: "dry-run <Kind>", "apply <Kind>", "status", "delete <Kind>"
        self._manifests: dict[tuple[str, str, str], dict[str, Any]] = {}
        self._version = 0

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        obj = self.objects.get((kind, namespace, name))
        return copy.deepcopy(obj) if obj is not None else None

    def apply(self, manifest: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        kind, meta = manifest["kind"], manifest["metadata"]
        if kind in self.reject:
            raise ApplyRejected(self.reject[kind])
        if dry_run:
            self.journal.append(f"dry-run {kind}")
            return copy.deepcopy(manifest)
        self.applied.append(copy.deepcopy(manifest))
        self.journal.append(f"apply {kind}")
        key = (kind, meta["namespace"], meta["name"])
        before = self.objects.get(key)
        if before is not None and self._manifests[key] == manifest:
            return copy.deepcopy(before)
        self._manifests[key] = copy.deepcopy(manifest)
        self._version += 1
        stored = copy.deepcopy(manifest)
        stored["metadata"]["generation"] = before["metadata"]["generation"] + 1 if before else 1
        stored["metadata"]["resourceVersion"] = str(self._version)
        stored["metadata"]["uid"] = before["metadata"]["uid"] if before else f"uid-{kind}-{self._version}"
        stored["status"] = copy.deepcopy(before.get("status", {})) if before else {}
        self.objects[key] = stored
        return copy.deepcopy(stored)

    def delete(self, kind: str, namespace: str, name: str, uid: str) -> None:
        key = (kind, namespace, name)
        obj = self.objects.get(key)
        if obj is None:
            return
        if obj["metadata"].get("uid") != uid:
            raise ApplyRejected(f"deleting {kind} {namespace}/{name}: precondition failed: UID mismatch")
        self.journal.append(f"delete {kind}")
        del self.objects[key]
        self._manifests.pop(key, None)

    def list_pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        wanted = dict(term.split("=", 1) for term in selector.split(","))
        return [
            copy.deepcopy(pod)
            for (kind, ns, _), pod in sorted(self.objects.items())
            if kind == "Pod" and ns == namespace and wanted.items() <= pod["metadata"].get("labels", {}).items()
        ]

    def list_disruption_budgets(self, namespace: str) -> list[dict[str, Any]]:
        return [
            copy.deepcopy(obj)
            for (kind, ns, _), obj in sorted(self.objects.items())
            if kind == "PodDisruptionBudget" and ns == namespace
        ]

    def list_claims(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        wanted = dict(term.split("=", 1) for term in selector.split(","))
        return [
            copy.deepcopy(obj)
            for (kind, ns, _), obj in sorted(self.objects.items())
            if kind == "PersistentVolumeClaim" and ns == namespace
            and wanted.items() <= obj["metadata"].get("labels", {}).items()
        ]  # fmt: skip

    def annotate_claim(self, namespace: str, name: str, uid: str, annotations: dict[str, str | None]) -> None:
        claim = self.objects.get(("PersistentVolumeClaim", namespace, name))
        if claim is None or claim["metadata"].get("uid") != uid:
            return
        self.journal.append("annotate PersistentVolumeClaim")
        current = claim["metadata"].setdefault("annotations", {})
        for key, value in annotations.items():
            if value is None:
                current.pop(key, None)
            else:
                current[key] = value

    def list_events(self, namespace: str, kind: str, name: str, reason: str) -> list[dict[str, Any]]:
        return [
            copy.deepcopy(obj)
            for (k, ns, _), obj in sorted(self.objects.items())
            if k == "Event" and ns == namespace and obj.get("reason") == reason
            and obj.get("involvedObject", {}).get("kind") == kind and obj["involvedObject"].get("name") == name
        ]  # fmt: skip

    def patch_streamapp_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        self.status_writes.append(copy.deepcopy(status))
        self.journal.append("status")

    def read_secret(self, namespace: str, name: str) -> dict[str, str] | None:
        data = self.secrets.get((namespace, name))
        return dict(data) if data is not None else None

    def add(self, manifest: dict[str, Any]) -> None:
        """An object someone else made (no owner reference unless the manifest has one)."""
        meta = manifest["metadata"]
        self.objects[(manifest["kind"], meta["namespace"], meta["name"])] = copy.deepcopy(manifest)

    def add_pod(self, namespace: str, name: str, labels: dict[str, str], status: dict[str, Any]) -> None:
        """What the StatefulSet controller and the kubelet would create and report."""
        metadata = {"name": name, "namespace": namespace, "labels": labels}
        self.objects[("Pod", namespace, name)] = {"kind": "Pod", "metadata": metadata, "status": status}

    def set_status(self, kind: str, namespace: str, name: str, status: dict[str, Any]) -> None:
        """What a controller would write: e.g. the StatefulSet controller's replica counts."""
        self.objects[(kind, namespace, name)]["status"] = status


class TestingInstances:
    """In-memory ``instances.InstanceReader``: ``/status`` documents (or an error text) per pod IP."""

    __test__ = False

    def __init__(self) -> None:
        self.documents: dict[str, dict[str, Any] | str] = {}
        self.asked: list[str] = []

    def status(self, pod_ip: str, port: int) -> dict[str, Any]:
        self.asked.append(pod_ip)
        document = self.documents.get(pod_ip, "connection refused")
        if isinstance(document, str):
            raise InstanceUnavailable(f"GET http://{pod_ip}:{port}/status: {document}")
        return copy.deepcopy(document)


class TestingKafka:
    """In-memory ``kafka.KafkaAdmin``: topics with partition counts, a lag and group state to report."""

    __test__ = False

    def __init__(self, topics: dict[str, int] | None = None) -> None:
        self.topics: dict[str, int] = dict(topics or {})
        self.configs: dict[str, dict[str, str]] = {}
        self.lag = 0
        self.state = "Stable"
        self.unavailable: str | None = None
        self.refuse_creation: str | None = None
        self.members: list[GroupMember] = []
        self.groups: set[str] = set()
        self.lag_requests: list[tuple[str, list[str]]] = []
        self.resets: list[tuple[str, list[str], Any]] = []
        self.removed_members: list[str] = []

    def _check(self) -> None:
        if self.unavailable is not None:
            raise KafkaUnavailable(self.unavailable)

    def partition_counts(self, topics: Iterable[str]) -> dict[str, int]:
        self._check()
        return {t: self.topics[t] for t in topics if t in self.topics}

    def retention_ms(self, topics: Iterable[str]) -> dict[str, int]:
        self._check()
        return {t: int(self.configs.get(t, {}).get("retention.ms", "604800000")) for t in topics if t in self.topics}

    def create_topics(self, topics: Sequence[TopicSpec], replication_factor: int) -> list[str]:
        self._check()
        if self.refuse_creation is not None:
            raise TopicCreationFailed(self.refuse_creation)
        created = []
        for topic in topics:
            if topic.name not in self.topics:
                self.topics[topic.name] = topic.partitions
                self.configs[topic.name] = dict(topic.config)
                created.append(topic.name)
        return sorted(created)

    def group_lag(self, group_id: str, topics: Iterable[str]) -> GroupLag:
        self._check()
        self.lag_requests.append((group_id, list(topics)))
        return GroupLag(lag=self.lag, state=self.state, members=tuple(self.members))

    def delete_topics(self, topics: Sequence[str]) -> list[str]:
        self._check()
        deleted = sorted(t for t in topics if t in self.topics)
        for topic in deleted:
            del self.topics[topic]
        return deleted

    def remove_static_members(self, group_id: str, instance_ids: Sequence[str]) -> list[str]:
        self._check()
        removed = [m.instance_id for m in self.members if m.instance_id in instance_ids]
        self.members = [m for m in self.members if m.instance_id not in instance_ids]
        self.removed_members.extend(i for i in removed if i is not None)
        return [i for i in removed if i is not None]

    def delete_group(self, group_id: str) -> bool:
        self._check()
        if group_id not in self.groups:
            return False
        self.groups.discard(group_id)
        return True

    def reset_offsets(self, group_id: str, input_topics: Sequence[str], target: Any) -> int:
        """Records the reset (group, topics, target); refuses as Kafka would while the group has members."""
        self._check()
        if self.members:
            raise KafkaUnavailable(f"resetting the offsets of {group_id!r} failed: the group has members")
        self.resets.append((group_id, list(input_topics), target))
        return sum(self.topics.get(t, 0) for t in input_topics)

    def internal_topics(self, application_id: str) -> list[str]:
        self._check()
        suffixes = ("-repartition", "-changelog")
        return sorted(t for t in self.topics if t.startswith(f"{application_id}-") and t.endswith(suffixes))


#: ``spec.config`` as a user writes it in YAML, unquoted: numbers and booleans the runtime must still read.
UNQUOTED = """
commit.interval.ms: 1000
statestore.cache.max.bytes: 0
replication.factor: 1
producer.enable.idempotence: true
consumer.check.crcs: false
producer.linger.ms: 0.5
default.deserialization.exception.handler: log_and_continue
"""
