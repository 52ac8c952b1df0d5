"""Deleting a StreamApp follows ``spec.cleanupPolicy`` and never hangs (issue 9, item 4; docs/operator.md).

On the real stack, with one running pod each:
- ``Retain`` (default): the StreamApp goes at once; its internal topic, consumer group and state volume stay;
- ``Delete``: the pods stop, then the consumer group, the internal topics the operator created and the state
  volume are deleted;
- a StreamApp deleted while the operator is absent waits (finalizer) and is gone soon after it is back;
- a spec of about 300 KB is handled and deleted (kopf's record of it is a digest, not a copy).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from e2e import cluster

pytestmark = pytest.mark.e2e
OPERATOR = ("deployment", "streamapp-operator", "streamapp-system")


@pytest.fixture
def namespace(operator_installed: None) -> Iterator[str]:
    name = cluster.create_namespace("deletion")
    yield name
    cluster.delete_namespace(name)


def _app(name: str, **spec: Any) -> dict[str, Any]:
    """A pass-through with a repartition topic (an internal topic the operator creates)."""
    topology = {
        "nodes": [
            {"name": "in", "type": "source", "topics": [f"{name}-in"], "keySerde": "string", "valueSerde": "json"},
            {"name": "again", "type": "repartition", "input": "in", "keySerde": "string", "valueSerde": "json"},
            {"name": "out", "type": "sink", "input": "again", "topic": f"{name}-out", "keySerde": "string",
             "valueSerde": "json"},
        ]
    }  # fmt: skip
    return cluster.passthrough_app(name, f"{name}-in", f"{name}-out", topology=topology, **spec)


def _groups() -> set[str]:
    admin = AdminClient({"bootstrap.servers": cluster.stack_env()["KAFKA_BOOTSTRAP"]})
    return {g.group_id for g in admin.list_consumer_groups().result(30).valid}


def _claims(namespace: str) -> list[str]:
    return cluster.kubectl("get", "pvc", "-n", namespace, "-o", "name").split()


def _running(name: str, namespace: str, **spec: Any) -> None:
    cluster.create_topics({f"{name}-in": 1, f"{name}-out": 1})
    cluster.apply(_app(name, **spec), namespace)
    cluster.wait_condition(name, namespace, "Ready", "True", timeout_s=180)
    cluster.wait_until(lambda: name in _groups(), 60, f"consumer group {name}")
    assert f"{name}-again-repartition" in cluster.topics(name)
    assert cluster.get_json("streamapp", name, namespace)["status"]["createdTopics"] == [f"{name}-again-repartition"]


def _gone(name: str, namespace: str) -> bool:
    return cluster.kubectl("get", "streamapp", name, "-n", namespace, "--ignore-not-found") == ""


def test_retain_keeps_topics_group_and_state_volume(namespace: str) -> None:
    name = f"keep-{uuid.uuid4().hex[:6]}"
    try:
        _running(name, namespace)
        cluster.kubectl("delete", "streamapp", name, "-n", namespace, "--wait=true", "--timeout=60s")
        cluster.wait_until(lambda: not cluster.kubectl("get", "pods", "-n", namespace, "-o", "name"), 90, "pods gone")
        assert f"{name}-again-repartition" in cluster.topics(name)
        assert name in _groups()
        assert _claims(namespace) == [f"persistentvolumeclaim/state-{name}-0"]
    finally:
        cluster.delete_topics(name)


def test_delete_removes_group_created_topics_and_state_volume(namespace: str) -> None:
    name = f"drop-{uuid.uuid4().hex[:6]}"
    try:
        _running(name, namespace, cleanupPolicy="Delete")
        cluster.kubectl("delete", "streamapp", name, "-n", namespace, "--wait=true", "--timeout=120s")
        assert cluster.topics(name) == {f"{name}-in", f"{name}-out"}, "user topics must stay, internal ones go"
        assert name not in _groups()
        cluster.wait_until(lambda: not _claims(namespace), 60, "the state volume to be deleted")
        reasons = [e["reason"] for e in cluster.events(name, namespace)]
        assert "ConsumerGroupDeleted" in reasons and "TopicsDeleted" in reasons, reasons
    finally:
        cluster.delete_topics(name)


def test_deleted_while_the_operator_is_absent_is_gone_once_it_is_back(namespace: str) -> None:
    name = f"away-{uuid.uuid4().hex[:6]}"
    kind, deployment, operator_ns = OPERATOR
    try:
        cluster.create_topics({f"{name}-in": 1, f"{name}-out": 1})
        cluster.apply(_app(name, replicas=0), namespace)
        cluster.wait_condition(name, namespace, "Ready", "True")
        cluster.kubectl("scale", kind, deployment, "-n", operator_ns, "--replicas=0")
        cluster.kubectl("wait", "--for=delete", "pod", "-n", operator_ns, "-l",
                        "app.kubernetes.io/name=streamapp-operator", "--timeout=90s", check=False)  # fmt: skip
        cluster.kubectl("delete", "streamapp", name, "-n", namespace, "--wait=false")
        time.sleep(3)
        app = cluster.get_json("streamapp", name, namespace)
        assert app["metadata"].get("deletionTimestamp") and app["metadata"].get("finalizers"), "no finalizer"
    finally:
        cluster.kubectl("scale", kind, deployment, "-n", operator_ns, "--replicas=1")
    try:
        cluster.wait_until(lambda: _gone(name, namespace), 90, "the StreamApp to go once the operator is back")
    finally:
        cluster.delete_topics(name)


def test_a_spec_of_300_kb_is_reconciled_and_deleted(namespace: str) -> None:
    name = f"big-{uuid.uuid4().hex[:6]}"
    # a setting librdkafka takes as any string: the operator tries spec.config on throwaway clients (ConfigInvalid)
    config = {"consumer.client.rack": "v" * 300_000}
    try:
        cluster.create_topics({f"{name}-in": 1, f"{name}-out": 1})
        cluster.apply(_app(name, replicas=0, config=config), namespace)
        cluster.wait_condition(name, namespace, "Ready", "True")
        app = cluster.get_json("streamapp", name, namespace)
        assert len(json.dumps(app["spec"])) > 300_000
        assert len(json.dumps(app["metadata"].get("annotations") or {})) < 2_000
        cluster.kubectl("delete", "streamapp", name, "-n", namespace, "--wait=true", "--timeout=60s")
    finally:
        cluster.delete_topics(name)
