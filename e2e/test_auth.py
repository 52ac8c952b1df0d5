"""Kafka credentials come from a Secret, authenticate the pods and the operator, and appear nowhere else
(issue 9, item 5).

On the real stack's SASL_PLAINTEXT listener (``hack/stack/kafka.sh``: SCRAM-SHA-512, ``KAFKA_SASL_*``): a
StreamApp whose user name and password are Secret references gets its internal topic created by the
operator's authenticated admin client and copies every record exactly once through pods that authenticate
the same way; one with a wrong password is Degraded with Kafka's answer. Neither password is in the
StreamApp's status or annotations, any event, ConfigMap, StatefulSet or pod spec, nor in the operator's or
the pods' logs.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer

from e2e import cluster

pytestmark = pytest.mark.e2e
RECORDS = 200


@pytest.fixture
def namespace(operator_installed: None) -> Iterator[str]:
    name = cluster.create_namespace("auth")
    yield name
    cluster.delete_namespace(name)


def _sasl() -> tuple[str, str, str]:
    env = cluster.stack_env()
    missing = [
        key for key in ("KAFKA_SASL_BOOTSTRAP", "KAFKA_SASL_USERNAME", "KAFKA_SASL_PASSWORD") if not env.get(key)
    ]
    assert not missing, (
        f"the stack has no SASL listener ({', '.join(missing)} missing): restart it with hack/stack/up.sh"
    )
    return env["KAFKA_SASL_BOOTSTRAP"], env["KAFKA_SASL_USERNAME"], env["KAFKA_SASL_PASSWORD"]


def _app(name: str, bootstrap: str, secret: str) -> dict[str, Any]:
    auth = {"mechanism": "SCRAM-SHA-512", "usernameSecret": {"name": secret, "key": "username"},
            "passwordSecret": {"name": secret, "key": "password"}}  # fmt: skip
    topology = {
        "nodes": [
            {"name": "in", "type": "source", "topics": [f"{name}-in"], "keySerde": "string", "valueSerde": "json"},
            {"name": "again", "type": "repartition", "input": "in", "keySerde": "string", "valueSerde": "json"},
            {"name": "out", "type": "sink", "input": "again", "topic": f"{name}-out", "keySerde": "string",
             "valueSerde": "json"},
        ]
    }  # fmt: skip
    kafka = {"bootstrapServers": bootstrap, "authentication": auth}
    return cluster.passthrough_app(name, f"{name}-in", f"{name}-out", kafka=kafka, topology=topology)


def _secret(namespace: str, name: str, username: str, password: str) -> None:
    manifest = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
                "stringData": {"username": username, "password": password}}  # fmt: skip
    cluster.apply(manifest, namespace)


def _everything_written(namespace: str, names: list[str]) -> str:
    """What the operator and the pods wrote: statuses, annotations, events, ConfigMaps, StatefulSets, pods
    (specs included) and their logs, and the operator's logs."""
    apps = [cluster.get_json("streamapp", name, namespace) for name in names]
    texts = [json.dumps([(a.get("status"), a["metadata"].get("annotations")) for a in apps])]
    texts.append(cluster.kubectl("get", "events,configmaps,statefulsets,pods", "-n", namespace, "-o", "json"))
    pods = cluster.ROOT / ".cache" / "run" / "pods"
    logs = [*pods.glob("streamapp-system/streamapp-operator-*/*.log"), *pods.glob(f"{namespace}/*/*.log")]
    assert logs, "no logs found (the node agent keeps the containers' logs under .cache/run/pods)"
    texts += [log.read_text(errors="replace") for log in logs]
    return "\n".join(texts)


def test_credentials_from_a_secret_authenticate_operator_and_pods_and_appear_nowhere(namespace: str) -> None:
    bootstrap, username, password = _sasl()
    name, wrong = f"auth-{uuid.uuid4().hex[:6]}", f"bad-{uuid.uuid4().hex[:6]}"
    wrong_password = f"not-{uuid.uuid4().hex}"
    cluster.create_topics({f"{name}-in": 1, f"{name}-out": 1, f"{wrong}-in": 1, f"{wrong}-out": 1})
    try:
        _secret(namespace, f"{name}-kafka", username, password)
        _secret(namespace, f"{wrong}-kafka", username, wrong_password)
        cluster.apply(_app(name, bootstrap, f"{name}-kafka"), namespace)
        cluster.apply(_app(wrong, bootstrap, f"{wrong}-kafka"), namespace)

        cluster.wait_condition(name, namespace, "Ready", "True", timeout_s=180)
        status = cluster.get_json("streamapp", name, namespace)["status"]
        assert status["createdTopics"] == [f"{name}-again-repartition"]
        producer = Producer({"bootstrap.servers": cluster.stack_env()["KAFKA_BOOTSTRAP"]})
        for i in range(RECORDS):
            producer.produce(f"{name}-in", json.dumps({"n": i}).encode(), f"k{i}".encode())
        assert producer.flush(30) == 0
        assert cluster.count_records(f"{name}-out", RECORDS) == RECORDS

        degraded = cluster.wait_condition(wrong, namespace, "Degraded", "True", "KafkaUnavailable")
        assert "authentication" in degraded["message"].lower(), degraded["message"]
        assert cluster.kubectl("get", "statefulset", wrong, "-n", namespace, "--ignore-not-found") == ""

        config = cluster.get_json("configmap", f"{name}-config", namespace)["data"]["streams.yaml"]
        assert "security.protocol: SASL_PLAINTEXT" in config and "sasl.mechanism: SCRAM-SHA-512" in config
        written = _everything_written(namespace, [name, wrong])
        assert password not in written, "the password leaked"
        assert wrong_password not in written, "the wrong password leaked"
    finally:
        cluster.delete_topics(name)
        cluster.delete_topics(wrong)
