"""A Secret that the Kafka settings reference, missing, without its key or with an empty value, is reported
before the operator builds any Kafka client: a condition naming the Secret and the key, and a Warning event,
for a StreamApp and a StreamReplay. A running app whose Secret disappears is still reconciled and its pods
untouched; both recover once the Secret is there (issue 19: audit K4, K5, D-H3).

On the real stack's SASL_PLAINTEXT listener (``hack/stack/kafka.sh``: SCRAM-SHA-512).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer

from e2e import cluster, replay

pytestmark = pytest.mark.e2e


@pytest.fixture
def namespace(operator_installed: None) -> Iterator[str]:
    name = cluster.create_namespace("secrets")
    yield name
    cluster.kubectl("delete", "streamreplays", "--all", "-n", name, "--wait=true", check=False)
    cluster.delete_namespace(name)


def _sasl() -> tuple[str, str, str]:
    env = cluster.stack_env()
    assert env.get("KAFKA_SASL_BOOTSTRAP"), "the stack has no SASL listener: restart it with hack/stack/up.sh"
    return env["KAFKA_SASL_BOOTSTRAP"], env["KAFKA_SASL_USERNAME"], env["KAFKA_SASL_PASSWORD"]


def _app(name: str, secret: str) -> dict[str, Any]:
    bootstrap, username, _ = _sasl()
    auth = {"mechanism": "SCRAM-SHA-512", "username": username, "passwordSecret": {"name": secret, "key": "password"}}
    return cluster.passthrough_app(name, f"{name}-in", f"{name}-out",
                                   kafka={"bootstrapServers": bootstrap, "authentication": auth})  # fmt: skip


def _secret(namespace: str, name: str, data: dict[str, str]) -> None:
    cluster.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "stringData": data}, namespace)


def _warnings(name: str, namespace: str, reason: str) -> list[str]:
    return [str(e.get("message")) for e in cluster.events(name, namespace)
            if e.get("type") == "Warning" and e.get("reason") == reason]  # fmt: skip


def test_a_missing_secret_then_a_missing_key_then_an_empty_value_are_named_before_any_kafka_client(
    namespace: str,
) -> None:
    _, _, password = _sasl()
    name = f"sec-{uuid.uuid4().hex[:6]}"
    field = "spec.kafka.authentication.passwordSecret"
    cluster.create_topics({f"{name}-in": 1, f"{name}-out": 1})
    try:
        cluster.apply(_app(name, f"{name}-kafka"), namespace)
        degraded = cluster.wait_condition(name, namespace, "Degraded", "True", "SecretMissing", timeout_s=60)
        assert degraded["message"] == f"{field}: Secret {name}-kafka does not exist"
        assert degraded["message"] in _warnings(name, namespace, "SecretMissing")
        status = cluster.get_json("streamapp", name, namespace)["status"]
        assert status["observedGeneration"] == 1
        assert cluster.kubectl("get", "statefulset", name, "-n", namespace, "--ignore-not-found") == ""

        _secret(namespace, f"{name}-kafka", {"username": "app"})
        degraded = cluster.wait_condition(name, namespace, "Degraded", "True", "SecretKeyMissing", timeout_s=60)
        assert degraded["message"] == f"{field}: Secret {name}-kafka has no key 'password' (its keys: username)"

        _secret(namespace, f"{name}-kafka", {"username": "app", "password": ""})
        empty = f"{field}: key 'password' of Secret {name}-kafka is empty"
        cluster.wait_until(lambda: cluster.degraded_message(name, namespace) == empty, 60, "the empty value named",
                           describe=lambda: str(cluster.degraded_message(name, namespace)))  # fmt: skip
        assert cluster.condition(name, namespace, "Degraded")["reason"] == "SecretKeyMissing"

        _secret(namespace, f"{name}-kafka", {"username": "app", "password": password})
        cluster.wait_condition(name, namespace, "Ready", "True", timeout_s=180)
        assert cluster.condition(name, namespace, "Degraded")["status"] == "False"
    finally:
        cluster.delete_topics(name)


def test_a_running_app_whose_secret_disappears_keeps_its_pods_and_recovers(namespace: str) -> None:
    _, _, password = _sasl()
    name = f"gone-{uuid.uuid4().hex[:6]}"
    cluster.create_topics({f"{name}-in": 1, f"{name}-out": 1})
    try:
        _secret(namespace, f"{name}-kafka", {"password": password})
        cluster.apply(_app(name, f"{name}-kafka"), namespace)
        cluster.wait_condition(name, namespace, "Ready", "True", timeout_s=180)
        pod_uid = cluster.get_json("pod", f"{name}-0", namespace)["metadata"]["uid"]
        generation = cluster.get_json("statefulset", name, namespace)["metadata"]["generation"]

        cluster.kubectl("delete", "secret", f"{name}-kafka", "-n", namespace)
        degraded = cluster.wait_condition(name, namespace, "Degraded", "True", "SecretMissing", timeout_s=60)
        assert degraded["message"] == f"spec.kafka.authentication.passwordSecret: Secret {name}-kafka does not exist"
        assert cluster.get_json("pod", f"{name}-0", namespace)["metadata"]["uid"] == pod_uid
        assert cluster.get_json("statefulset", name, namespace)["metadata"]["generation"] == generation

        _secret(namespace, f"{name}-kafka", {"password": password})
        cluster.wait_condition(name, namespace, "Degraded", "False", timeout_s=60)
        cluster.wait_condition(name, namespace, "Ready", "True", timeout_s=60)
        assert cluster.get_json("pod", f"{name}-0", namespace)["metadata"]["uid"] == pod_uid
        assert any(e.get("reason") == "Recovered" for e in cluster.events(name, namespace))
    finally:
        cluster.delete_topics(name)


def test_a_replay_waits_degraded_for_its_apps_secret_and_runs_once_it_is_there(namespace: str) -> None:
    _, _, password = _sasl()
    name = f"rsec-{uuid.uuid4().hex[:6]}"
    cluster.create_topics({f"{name}-in": 1, f"{name}-out": 1})
    try:
        producer = Producer({"bootstrap.servers": cluster.stack_env()["KAFKA_BOOTSTRAP"]})
        for i in range(50):
            producer.produce(f"{name}-in", json.dumps({"n": i}).encode(), f"k{i}".encode())
        assert producer.flush(30) == 0
        cluster.apply(_app(name, f"{name}-kafka"), namespace)
        topology = {"nodes": [
            {"name": "in", "type": "source", "topics": [f"{name}-in"], "keySerde": "string", "valueSerde": "json"},
            {"name": "out", "type": "sink", "input": "in", "topic": f"{name}-copy", "keySerde": "string",
             "valueSerde": "json"},
        ]}  # fmt: skip
        cluster.apply(replay.streamreplay("copy", name, "backfill", topology), namespace)
        message = f"StreamApp {name}: spec.kafka.authentication.passwordSecret: Secret {name}-kafka does not exist"

        def degraded() -> bool:
            found = {c["type"]: c for c in replay.replay_status("copy", namespace).get("conditions") or []}
            return found.get("Degraded", {}).get("reason") == "SecretMissing"

        cluster.wait_until(degraded, 60, "the replay to name the missing Secret",
                           describe=lambda: str(replay.replay_status("copy", namespace)))  # fmt: skip
        status = replay.replay_status("copy", namespace)
        conditions = {c["type"]: c for c in status["conditions"]}
        assert conditions["Degraded"]["message"] == message and conditions["Failed"]["status"] == "False"
        assert status["phase"] == "Pending" and "job" not in status
        assert message in _warnings("copy", namespace, "SecretMissing")

        _secret(namespace, f"{name}-kafka", {"password": password})
        status = replay.wait_phase("copy", namespace, ("Succeeded",), timeout_s=600)
        assert status["recordsRead"] == 50
    finally:
        cluster.delete_topics(name)
