"""A Secret the Kafka settings name that is missing, lacks its key or holds it empty is reported (a condition
naming the Secret and the key, and an event) before any Kafka client is built, for a StreamApp and a
StreamReplay; the running app is still reconciled, its pods untouched, and both recover when the Secret is there.

Runs the real ``reconcile`` and ``reconcile_replay`` against the hand-written seams of ``operator_fakes``.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from operator_fakes import TestingCluster, TestingInstances, TestingKafka, flights_spec
from replay_fakes import NS, REPLAY, SECOND_TOPOLOGY, ReplayCluster, ReplayKafka
from streamapp_operator.connection import KafkaConnection
from streamapp_operator.kafka import ConfluentKafkaAdmin, KafkaUnavailable
from streamapp_operator.streamapps.reconcile import App, Result, World, reconcile
from streamapp_operator.streamreplays.reconcile import ReplayWorld, reconcile_replay

APP = App(name="orders", namespace="team-x", uid="uid-orders", generation=1, created="2026-01-02T00:00:00Z")
NOW = "2026-01-03T00:00:00Z"
PASSWORD = {"name": "kafka-user", "key": "password"}
SASL = {"mechanism": "SCRAM-SHA-512", "username": "app", "passwordSecret": PASSWORD}


def _secure_spec() -> dict[str, Any]:
    return flights_spec(kafka={"bootstrapServers": "kafka:9094", "authentication": SASL})


class CountingClients:
    """``kafka_for``: records every connection a client was built for, hands out ``kafka``."""

    def __init__(self, kafka: TestingKafka) -> None:
        self.kafka = kafka
        self.built: list[KafkaConnection] = []

    def __call__(self, connection: KafkaConnection) -> Any:
        self.built.append(connection)
        return self.kafka


def _run(cluster: TestingCluster, clients: CountingClients, status: dict[str, Any] | None = None) -> Result:
    world = World(cluster=cluster, kafka_for=clients, instances=TestingInstances())
    return reconcile(APP, _secure_spec(), status or {}, world, NOW)


def _condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == kind)


SECRET_CASES = [
    pytest.param(None, "SecretMissing", "Secret kafka-user does not exist", id="no-secret"),
    pytest.param(
        {"user": "app"}, "SecretKeyMissing", "Secret kafka-user has no key 'password' (its keys: user)", id="no-key"
    ),
    pytest.param({"password": ""}, "SecretKeyMissing", "key 'password' of Secret kafka-user is empty", id="empty"),
]


@pytest.mark.parametrize(("data", "reason", "what"), SECRET_CASES)
def test_a_secret_problem_is_a_condition_and_an_event_before_any_kafka_client(
    cluster: TestingCluster, kafka: TestingKafka, data: dict[str, str] | None, reason: str, what: str
) -> None:
    if data is not None:
        cluster.secrets[("team-x", "kafka-user")] = data
    clients = CountingClients(kafka)
    result = _run(cluster, clients)
    degraded = _condition(result.status, "Degraded")
    message = f"spec.kafka.authentication.passwordSecret: {what}"
    assert (degraded["status"], degraded["reason"], degraded["message"]) == ("True", reason, message)
    assert [(e.type, e.reason, e.message) for e in result.events] == [("Warning", reason, message)]
    assert clients.built == []  # librdkafka would refuse an empty password: no client is built
    assert cluster.applied == [] and result.status["observedGeneration"] == 1


def test_an_app_whose_secret_disappears_keeps_its_pods_is_still_reconciled_and_recovers(
    cluster: TestingCluster, kafka: TestingKafka
) -> None:
    cluster.secrets[("team-x", "kafka-user")] = {"password": "s3cr3t-pw"}
    clients = CountingClients(kafka)
    first = _run(cluster, clients)
    assert _condition(first.status, "Degraded")["status"] == "False"
    running = copy.deepcopy(cluster.objects)

    del cluster.secrets[("team-x", "kafka-user")]
    built = len(clients.built)
    missing = _run(cluster, clients, first.status)
    assert _condition(missing.status, "Degraded")["reason"] == "SecretMissing"
    assert cluster.objects == running and len(clients.built) == built  # pods untouched, no client built
    again = _run(cluster, clients, missing.status)  # the next tick: still reported, no second event
    assert _condition(again.status, "Degraded")["reason"] == "SecretMissing" and again.events == []

    cluster.secrets[("team-x", "kafka-user")] = {"password": "s3cr3t-pw"}
    recovered = _run(cluster, clients, again.status)
    assert _condition(recovered.status, "Degraded")["status"] == "False"
    assert ("Normal", "Recovered") in [(e.type, e.reason) for e in recovered.events]
    assert "s3cr3t-pw" not in repr([first, missing, again, recovered])


# -- StreamReplay --------------------------------------------------------------------------------------------


def _replay_world(data: dict[str, str] | None) -> tuple[ReplayWorld, ReplayCluster, list[KafkaConnection]]:
    cluster, kafka = ReplayCluster(), ReplayKafka()
    if data is not None:
        cluster.secrets[(NS, "kafka-user")] = data
    cluster.add({"kind": "StreamApp", "metadata": {"name": "flights", "namespace": NS, "uid": "app-uid"},
                 "spec": flights_spec(kafka={"bootstrapServers": "kafka:9094", "authentication": SASL})})  # fmt: skip
    built: list[KafkaConnection] = []
    world = ReplayWorld(cluster=cluster, kafka_for=lambda c: built.append(c) or kafka, image="replay:1")
    return world, cluster, built


BACKFILL = {"appRef": {"name": "flights"}, "topology": SECOND_TOPOLOGY}


@pytest.mark.parametrize(("data", "reason", "what"), SECRET_CASES)
def test_a_replay_waits_degraded_on_a_secret_problem_before_any_kafka_client_or_job(
    data: dict[str, str] | None, reason: str, what: str
) -> None:
    world, cluster, built = _replay_world(data)
    result = reconcile_replay(REPLAY, BACKFILL, {}, world, NOW)
    status = result.status
    degraded, failed = _condition(status, "Degraded"), _condition(status, "Failed")
    message = f"StreamApp flights: spec.kafka.authentication.passwordSecret: {what}"
    assert (degraded["status"], degraded["reason"], degraded["message"]) == ("True", reason, message)
    assert failed["status"] == "False" and status["phase"] == "Pending"
    assert [(e.type, e.reason, e.message) for e in result.events] == [("Warning", reason, message)]
    assert built == [] and cluster.applied == []
    again = reconcile_replay(REPLAY, BACKFILL, status, world, NOW)
    assert again.events == []  # one event, not one a tick


def test_a_replay_blocked_on_its_secret_starts_once_the_secret_is_there() -> None:
    world, cluster, built = _replay_world(None)
    status = reconcile_replay(REPLAY, BACKFILL, {}, world, NOW).status
    cluster.secrets[(NS, "kafka-user")] = {"password": "s3cr3t-pw"}
    status = {**status, **reconcile_replay(REPLAY, BACKFILL, status, world, NOW).status}
    assert status["phase"] == "Running" and _condition(status, "Degraded")["status"] == "False"
    assert len(built) == 1 and [m["kind"] for m in cluster.applied] == ["ServiceAccount", "ConfigMap", "Job"]


def test_settings_librdkafka_refuses_are_kafka_unavailable_not_a_crash(cluster: TestingCluster) -> None:
    """Any other refusal at construction (an unreadable CA, say) is said the same way, never raised to kopf."""
    cluster.secrets[("team-x", "kafka-user")] = {"password": "s3cr3t-pw"}

    def refusing(connection: KafkaConnection) -> Any:
        raise KafkaUnavailable("the operator's Kafka client refused its settings: ssl.ca.pem failed: not in PEM format")

    world = World(cluster=cluster, kafka_for=refusing, instances=TestingInstances())
    result = reconcile(APP, _secure_spec(), {}, world, NOW)
    degraded = _condition(result.status, "Degraded")
    assert (degraded["reason"], degraded["message"]) == (
        "KafkaUnavailable",
        "the operator's Kafka client refused its settings: ssl.ca.pem failed: not in PEM format",
    )
    replay_world = ReplayWorld(cluster=_replay_world({"password": "pw"})[1], kafka_for=refusing, image="replay:1")
    replayed = reconcile_replay(REPLAY, BACKFILL, {}, replay_world, NOW).status
    assert _condition(replayed, "Degraded")["reason"] == "KafkaUnavailable" and replayed["phase"] == "Pending"


def test_the_real_admin_client_turns_a_refused_setting_into_kafka_unavailable() -> None:
    settings = (("security.protocol", "SASL_PLAINTEXT"), ("sasl.mechanism", "SCRAM-SHA-512"))
    with pytest.raises(KafkaUnavailable, match=r"refused its settings: .*sasl.username and sasl.password must be set"):
        ConfluentKafkaAdmin(KafkaConnection("127.0.0.1:1", settings))
