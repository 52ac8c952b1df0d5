"""Every bad input is either refused by the API server (the CRD) or a Degraded condition naming the field,
and never a silent loop or a crash loop left unreported (issue 9, items 6, 7, 8, 11).

On the real stack: the CRD rejects what a schema can say (maxima, quantities, enums, one user name); the
operator reports what only the runtime's config model, Kafka or the API server can say; a child the API
server refuses leaves the running app as it was (no half-applied update); a client setting only librdkafka
rejects, found inside the pods, is Degraded too; a pod no node can take is Degraded with the scheduler's message
and its rollout is not complete (issue 19, audit D-M4: it was ``RolloutComplete`` with ``Degraded=False``).
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from e2e import cluster

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def namespace(operator_installed: None) -> Iterator[str]:
    name = cluster.create_namespace("invalid-spec")
    yield name
    cluster.delete_namespace(name)


@pytest.fixture(scope="module")
def topics() -> Iterator[tuple[str, str]]:
    prefix = f"invalid-{uuid.uuid4().hex[:6]}"
    cluster.create_topics({f"{prefix}-in": 1, f"{prefix}-out": 1})
    yield f"{prefix}-in", f"{prefix}-out"
    cluster.delete_topics(prefix)


def _rejection(manifest: dict[str, Any], namespace: str) -> str:
    done = subprocess.run(
        ["kubectl", "create", "--dry-run=server", "-n", namespace, "-f", "-"],
        env=cluster.process_env(), input=json.dumps(manifest), capture_output=True, text=True, check=False,
    )  # fmt: skip
    return done.stderr if done.returncode != 0 else ""


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"threads": 65}, "spec.threads: Invalid value: 65: spec.threads in body should be less than or equal to 64"),
        ({"replicas": 100000}, "spec.replicas in body should be less than or equal to 256"),
        ({"state": {"size": "lots"}}, "spec.state.size in body should match"),
        ({"resources": {"limits": {"memory": "a lot"}}}, "spec.resources.limits.memory in body should match"),
        ({"cleanupPolicy": "Shred"}, 'spec.cleanupPolicy: Unsupported value: "Shred"'),
        ({"processingGuarantee": "exactly_once"}, "spec.processingGuarantee: Unsupported value"),
        (
            {
                "kafka": {
                    "bootstrapServers": "k:9092",
                    "authentication": {
                        "mechanism": "PLAIN",
                        "username": "u",
                        "usernameSecret": {"name": "s", "key": "u"},
                        "passwordSecret": {"name": "s", "key": "p"},
                    },
                }
            },
            "set either username or usernameSecret",
        ),
    ],
    ids=[
        "threads-65",
        "replicas-100000",
        "state-size-lots",
        "memory-limit",
        "cleanup-policy",
        "guarantee",
        "two-usernames",
    ],
)
def test_the_crd_rejects_what_a_schema_can_say(
    namespace: str, topics: tuple[str, str], spec: dict[str, Any], message: str
) -> None:
    manifest = cluster.passthrough_app("rejected", *topics, **spec)
    assert message in _rejection(manifest, namespace)
    assert _rejection(cluster.passthrough_app("rejected", *topics), namespace) == ""


@pytest.mark.parametrize(
    ("config", "reason", "message"),
    [
        ({"comit.interval.ms": "100"}, "ConfigInvalid", "spec.config['comit.interval.ms']: unknown key"),
        ({"commit.interval.ms": "soon"}, "ConfigInvalid", "spec.config['commit.interval.ms']: Input should be"),
        (
            {"default.deserialization.exception.handler": "dead_letter_queue"},
            "ConfigInvalid",
            "default.deserialization.exception.handler=dead_letter_queue needs errors.dead.letter.queue.topic.name",
        ),
        ({"producer.sasl.password": "hunter2"}, "SecretInConfig", "put it in a Secret and reference it"),
        ({"num.stream.threads": "4"}, "SpecInvalid", "is set by the operator from spec.threads"),
    ],
    ids=["typo", "ill-typed", "dlq-without-topic", "password", "derived-key"],
)
def test_a_config_the_runtime_would_refuse_is_degraded_naming_the_key_and_creates_no_pods(
    namespace: str, topics: tuple[str, str], config: dict[str, str], reason: str, message: str
) -> None:
    name = f"cfg-{uuid.uuid4().hex[:6]}"
    cluster.apply(cluster.passthrough_app(name, *topics, config=config, applicationId=name), namespace)
    degraded = cluster.wait_condition(name, namespace, "Degraded", "True", reason)
    assert message in degraded["message"]
    assert reason in [e["reason"] for e in cluster.events(name, namespace)]
    assert cluster.kubectl("get", "statefulset", name, "-n", namespace, "--ignore-not-found") == ""
    # The value the user put in spec.config stays there only: not in status, annotations, events, ConfigMaps.
    app = cluster.get_json("streamapp", name, namespace)
    written = [app.get("status"), app["metadata"].get("annotations"),
               cluster.kubectl("get", "events,configmaps", "-n", namespace, "-o", "json")]  # fmt: skip
    assert "hunter2" not in json.dumps(written)
    cluster.kubectl("delete", "streamapp", name, "-n", namespace, "--wait=true", "--timeout=60s")


def test_a_topic_kafka_refuses_is_degraded_with_kafkas_answer(namespace: str, topics: tuple[str, str]) -> None:
    name = f"rf-{uuid.uuid4().hex[:6]}"
    topology = {
        "nodes": [
            {"name": "in", "type": "source", "topics": [topics[0]], "keySerde": "string", "valueSerde": "json"},
            {"name": "again", "type": "repartition", "input": "in", "keySerde": "string", "valueSerde": "json"},
            {"name": "out", "type": "sink", "input": "again", "topic": topics[1], "keySerde": "string",
             "valueSerde": "json"},
        ]
    }  # fmt: skip
    manifest = cluster.passthrough_app(name, *topics, topology=topology, config={"replication.factor": "3"})
    cluster.apply(manifest, namespace)
    degraded = cluster.wait_condition(name, namespace, "Degraded", "True", "TopicCreationFailed")
    assert f"Kafka refused topic '{name}-again-repartition'" in degraded["message"]
    assert "replication factor" in degraded["message"].lower(), degraded["message"]
    cluster.kubectl("delete", "streamapp", name, "-n", namespace, "--wait=true", "--timeout=60s")


def test_a_child_the_api_server_rejects_leaves_the_running_app_as_it_was(
    namespace: str, topics: tuple[str, str]
) -> None:
    name = f"half-{uuid.uuid4().hex[:6]}"
    cluster.apply(cluster.passthrough_app(name, *topics, replicas=0), namespace)
    cluster.wait_condition(name, namespace, "Ready", "True")
    config_map = cluster.get_json("configmap", f"{name}-config", namespace)
    # Valid for the CRD and the operator's own checks, refused by the API server: a StatefulSet's volume claim
    # templates cannot change ("updates to statefulset spec for fields other than ... are forbidden").
    cluster.apply(cluster.passthrough_app(name, *topics, replicas=0, state={"size": "2Gi"},
                                          config={"commit.interval.ms": "50"}), namespace)  # fmt: skip
    degraded = cluster.wait_condition(name, namespace, "Degraded", "True", "ApplyRejected")
    assert f"StatefulSet {namespace}/{name}" in degraded["message"]
    assert "Forbidden" in degraded["message"], degraded["message"]
    after = cluster.get_json("configmap", f"{name}-config", namespace)
    assert after["metadata"]["resourceVersion"] == config_map["metadata"]["resourceVersion"], "half-applied"
    cluster.apply(cluster.passthrough_app(name, *topics, replicas=0), namespace)
    cluster.wait_condition(name, namespace, "Degraded", "False")
    cluster.kubectl("delete", "streamapp", name, "-n", namespace, "--wait=true", "--timeout=60s")


def test_a_client_setting_only_librdkafka_rejects_is_degraded_from_inside_the_pod(
    namespace: str, topics: tuple[str, str]
) -> None:
    name = f"rdk-{uuid.uuid4().hex[:6]}"
    manifest = cluster.passthrough_app(name, *topics, config={"consumer.no.such.property": "1"})
    cluster.apply(manifest, namespace)
    # tried on throwaway librdkafka clients by the operator before any pod or topic exists (the runtime does the same
    # at start, before it creates topics): named in the condition, never a crash loop of every pod
    degraded = cluster.wait_condition(name, namespace, "Degraded", "True", "ConfigInvalid", timeout_s=60)
    assert "config key 'consumer.no.such.property'" in degraded["message"], degraded["message"]
    assert cluster.kubectl("get", "statefulset", name, "-n", namespace, "--ignore-not-found").strip() == ""
    cluster.kubectl("delete", "streamapp", name, "-n", namespace, "--wait=true", "--timeout=90s")


def test_a_pod_no_node_can_take_is_degraded_with_the_schedulers_message_and_not_a_finished_rollout(
    namespace: str, topics: tuple[str, str]
) -> None:
    name = f"huge-{uuid.uuid4().hex[:6]}"
    cluster.apply(cluster.passthrough_app(name, *topics, resources={"requests": {"memory": "1000Gi"}}), namespace)

    degraded = cluster.wait_condition(name, namespace, "Degraded", "True", "PodsFailing", timeout_s=90)

    pod = cluster.get_json("pod", f"{name}-0", namespace)["status"]
    scheduled = next(c for c in pod["conditions"] if c["type"] == "PodScheduled")
    assert (scheduled["status"], scheduled["reason"]) == ("False", "Unschedulable"), scheduled
    said = " ".join(scheduled["message"].split())
    assert "Insufficient memory" in said
    assert degraded["message"] == f"pod {name}-0: Unschedulable ({said})"
    progressing = cluster.condition(name, namespace, "Progressing")
    assert (progressing["status"], progressing["reason"], progressing["message"]) == (
        "False", "PodsUnschedulable", f"no node can take pod {name}-0 (Degraded says why)"
    )  # fmt: skip
    ready = cluster.condition(name, namespace, "Ready")
    assert (ready["reason"], ready["message"]) == ("ReplicasNotReady", f"0/1 pods ready; {degraded['message']}")
    cluster.kubectl("delete", "streamapp", name, "-n", namespace, "--wait=true", "--timeout=60s")


def test_kafka_credentials_from_a_secret_appear_nowhere_even_when_kafka_refuses_them(
    namespace: str, topics: tuple[str, str]
) -> None:
    """SASL against the PLAINTEXT listener fails (``KafkaUnavailable``); the password, read by the operator from
    the Secret for its own admin client, is in no status, event, ConfigMap, annotation or operator log."""
    name = f"auth-{uuid.uuid4().hex[:6]}"
    password = f"pw-{uuid.uuid4().hex}"
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"{name}-kafka"},
              "stringData": {"password": password}}  # fmt: skip
    cluster.apply(secret, namespace)
    auth = {"mechanism": "SCRAM-SHA-512", "username": "admin",
            "passwordSecret": {"name": f"{name}-kafka", "key": "password"}}  # fmt: skip
    kafka = {"bootstrapServers": cluster.stack_env()["KAFKA_BOOTSTRAP"], "authentication": auth}
    cluster.apply(cluster.passthrough_app(name, *topics, kafka=kafka), namespace)
    degraded = cluster.wait_condition(name, namespace, "Degraded", "True", "KafkaUnavailable", 120)
    app = cluster.get_json("streamapp", name, namespace)
    children = cluster.kubectl("get", "events,configmaps,statefulsets", "-n", namespace, "-o", "json")
    written = json.dumps([app.get("status"), app["metadata"].get("annotations"), degraded, children])
    assert password not in written
    logs = sorted((cluster.ROOT / ".cache" / "run" / "pods" / "streamapp-system").glob("streamapp-operator-*/*.log"))
    assert logs, "no operator log found (the node agent keeps the containers' logs there)"
    for log in logs:
        assert password not in log.read_text(errors="replace"), f"the password is in {log}"
    cluster.kubectl("delete", "streamapp", name, "-n", namespace, "--wait=true", "--timeout=60s")
