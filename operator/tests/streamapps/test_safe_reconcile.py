"""The reconcile never touches what it does not own, never shares an application.id, validates everything
before applying anything, and says every failure in status.

Runs the real ``reconcile`` (its ``STEPS``) against the hand-written seams of ``operator_fakes``.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from operator_fakes import TestingCluster, TestingInstances, TestingKafka, flights_spec
from streamapp_operator.connection import KafkaSpec, kafka_connection
from streamapp_operator.identity import Peer, identity_conflicts
from streamapp_operator.kafka import GroupMember
from streamapp_operator.streamapps.handlers import application_ids
from streamapp_operator.streamapps.reconcile import STEPS, App, Result, World, reconcile

APP = App(name="victim", namespace="team-x", uid="uid-victim", generation=1, created="2026-01-02T00:00:00Z")
NOW = "2026-01-03T00:00:00Z"


def _run(
    cluster: TestingCluster,
    kafka: TestingKafka,
    spec: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
    app: App = APP,
    peers: list[Peer] | None = None,
) -> Result:
    world = World(
        cluster=cluster, kafka_for=lambda _: kafka, instances=TestingInstances(), peers=lambda: list(peers or [])
    )
    return reconcile(app, spec if spec is not None else flights_spec(), status or {}, world, NOW)


def _degraded(result: Result) -> dict[str, Any]:
    return next(c for c in result.status["conditions"] if c["type"] == "Degraded")


def test_reconcile_is_the_named_step_table() -> None:
    assert [step.__name__ for step in STEPS] == [
        "dry_run_children",
        "operate",
        "create_internal_topics",
        "apply_config_map",
        "apply_service",
        "apply_stateful_set",
        "apply_disruption_budget",
        "roll_pods",
        "retain_state_volumes",
        "release_departed_members",
    ]


def test_a_foreign_service_and_config_map_are_never_applied_over_nor_adopted(
    cluster: TestingCluster, kafka: TestingKafka
) -> None:
    service = {"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "victim", "namespace": "team-x", "uid": "svc-1"},
               "spec": {"selector": {"app": "team-x-db"}}}  # fmt: skip
    config_map = {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": "victim-config", "namespace": "team-x", "uid": "cm-1"},
                  "data": {"password.txt": "hunter2"}}  # fmt: skip
    cluster.add(service)
    cluster.add(config_map)
    result = _run(cluster, kafka)
    degraded = _degraded(result)
    assert (degraded["status"], degraded["reason"]) == ("True", "ForeignObject")
    assert "ConfigMap victim-config exists and is not owned by this StreamApp" in degraded["message"]
    assert "Service victim exists and is not owned by this StreamApp" in degraded["message"]
    assert cluster.applied == [] and not [line for line in cluster.journal if not line.startswith("dry-run")]
    assert cluster.get("Service", "team-x", "victim") == service
    assert cluster.get("ConfigMap", "team-x", "victim-config") == config_map
    assert kafka.topics == {"flights": 4}, "no topic created for an app that cannot run"


def _update_with_the_stateful_set_rejected(
    cluster: TestingCluster, kafka: TestingKafka, spec: dict[str, Any]
) -> tuple[dict[Any, Any], Result]:
    """The app deployed, then updated to ``spec`` (generation 2) while the API server rejects its StatefulSet:
    the objects before the update, and the update's result."""
    first = _run(cluster, kafka)
    before = copy.deepcopy(cluster.objects)
    cluster.reject["StatefulSet"] = "applying StatefulSet team-x/victim: spec.template.spec.containers[0]: Invalid"
    app = App(APP.name, APP.namespace, APP.uid, 2, APP.created)
    return before, _run(cluster, kafka, spec=spec, status=first.status, app=app)


def test_a_child_the_api_server_rejects_leaves_no_half_applied_app(
    cluster: TestingCluster, kafka: TestingKafka
) -> None:
    spec = flights_spec(config={"commit.interval.ms": "50"})
    before, result = _update_with_the_stateful_set_rejected(cluster, kafka, spec)
    assert cluster.objects == before, "the new ConfigMap was applied beside the old StatefulSet"
    degraded = _degraded(result)
    assert (degraded["reason"], degraded["message"]) == ("ApplyRejected", cluster.reject["StatefulSet"])
    assert ("Warning", "ApplyRejected") in [(e.type, e.reason) for e in result.events]


def test_a_reset_does_not_start_while_the_api_server_rejects_a_child(
    cluster: TestingCluster, kafka: TestingKafka
) -> None:
    before, result = _update_with_the_stateful_set_rejected(cluster, kafka, flights_spec(reset={"nonce": "r1"}))
    assert cluster.objects == before, "the reset scaled the app to zero though its new children are rejected"
    assert "reset" not in result.status and not cluster.status_writes
    assert _degraded(result)["reason"] == "ApplyRejected"


def test_a_topic_kafka_refuses_says_what_kafka_answered(cluster: TestingCluster, kafka: TestingKafka) -> None:
    kafka.refuse_creation = "Kafka refused topic 'victim-x-changelog': Replication factor: 3 larger than brokers: 1"
    degraded = _degraded(_run(cluster, kafka, spec=flights_spec(config={"replication.factor": "3"})))
    assert (degraded["reason"], degraded["message"]) == ("TopicCreationFailed", kafka.refuse_creation)


def test_created_topics_are_recorded_and_kept_across_reconciles(cluster: TestingCluster, kafka: TestingKafka) -> None:
    kafka.topics["victim-per-carrier-repartition"] = 4  # someone else made it: not ours to delete later
    first = _run(cluster, kafka)
    assert first.status["createdTopics"] == ["victim-departures-per-carrier-store-changelog"]
    assert _run(cluster, kafka, status=first.status).status["createdTopics"] == first.status["createdTopics"]


def test_the_same_default_application_id_in_another_namespace_is_refused_by_name(
    cluster: TestingCluster, kafka: TestingKafka
) -> None:
    older = Peer("team-y", "victim", "uid-older", "2026-01-01T00:00:00Z", "victim")
    me = Peer(APP.namespace, APP.name, APP.uid, APP.created, "victim")
    result = _run(cluster, kafka, peers=[older, me])
    degraded = _degraded(result)
    assert degraded["reason"] == "ApplicationIdInUse"
    assert degraded["message"].startswith("application.id 'victim' is already used by StreamApp team-y/victim")
    assert cluster.applied == [] and kafka.topics == {"flights": 4}
    # The older app is not affected by the younger one.
    older_app = App("victim", "team-y", "uid-older", 1, older.created)
    assert _degraded(_run(TestingCluster(), kafka, app=older_app, peers=[older, me]))["status"] == "False"


def test_the_same_explicit_application_id_is_refused(cluster: TestingCluster, kafka: TestingKafka) -> None:
    other = Peer("team-x", "counts", "uid-counts", "2026-01-01T00:00:00Z", "shared")
    me = Peer(APP.namespace, APP.name, APP.uid, APP.created, "shared")
    result = _run(cluster, kafka, spec=flights_spec(applicationId="shared"), peers=[other, me])
    assert _degraded(result)["reason"] == "ApplicationIdInUse"
    assert "StreamApp team-x/counts" in _degraded(result)["message"]


def test_a_consumer_group_with_members_that_are_not_the_apps_pods_is_reported_not_joined(
    cluster: TestingCluster, kafka: TestingKafka
) -> None:
    kafka.members = [GroupMember("rdkafka", None, "/10.0.0.9")]
    result = _run(cluster, kafka)
    degraded = _degraded(result)
    assert degraded["reason"] == "ConsumerGroupInUse"
    assert "(rdkafka)" in degraded["message"]
    assert cluster.get("StatefulSet", "team-x", "victim") is None
    kafka.members = [
        GroupMember("victim-victim-1-StreamThread-2-consumer", "victim-1-1", "/127.0.0.1"),
        GroupMember("victim-victim-7-StreamThread-1-consumer", "victim-7-0", "/127.0.0.1"),  # a pod scaled away
        # a pod advertising its application.server for interactive queries (docs/adr/0012-query-endpoints.md)
        GroupMember("victim-victim-0-StreamThread-1-consumer@10.0.0.7:8080", "victim-0-0", "/127.0.0.1"),
    ]
    assert _degraded(_run(cluster, kafka))["status"] == "False"
    kafka.members = [GroupMember("victim-victimized-0-StreamThread-1-consumer", None, "/127.0.0.1")]
    assert _degraded(_run(cluster, kafka))["reason"] == "ConsumerGroupInUse"


@pytest.mark.parametrize(
    ("overrides", "reason", "message"),
    [
        ({"config": {"comit.interval.ms": "100"}}, "ConfigInvalid", "spec.config['comit.interval.ms']: unknown key"),
        (
            {"config": {"commit.interval.ms": "soon"}},
            "ConfigInvalid",
            "spec.config['commit.interval.ms']: Input should be a valid integer",
        ),
        (
            {"config": {"processing.exception.handler": "dead_letter_queue"}},
            "ConfigInvalid",
            "processing.exception.handler=dead_letter_queue needs errors.dead.letter.queue.topic.name",
        ),
        ({"threads": 65}, "SpecInvalid", "spec: threads: Input should be less than or equal to 64"),
        ({"replicas": 100000}, "SpecInvalid", "spec: replicas: Input should be less than or equal to 256"),
        ({"state": {"size": "lots"}}, "SpecInvalid", "'lots' is not a Kubernetes quantity"),
        (
            {"resources": {"limits": {"memory": "a lot"}}},
            "SpecInvalid",
            "resources.limits.memory: Value error, 'a lot' is not a Kubernetes quantity",
        ),
        (
            {"config": {"producer.sasl.password": "hunter2"}},
            "SecretInConfig",
            "spec.config['producer.sasl.password'] looks like a credential",
        ),
        (
            {"config": {"consumer.security.protocol": "SASL_SSL"}},
            "SpecInvalid",
            "spec.config['consumer.security.protocol'] is set by the operator from spec.kafka.authentication/tls",
        ),
        (
            {"config": {"consumer.no.such.property": "1"}},
            "ConfigInvalid",
            "spec.config: Kafka client settings refused: config key 'consumer.no.such.property'",
        ),
    ],
    ids=[
        "typo",
        "ill-typed",
        "dlq-without-topic",
        "threads-65",
        "replicas-100000",
        "state-size-lots",
        "memory-limit",
        "sasl-password",
        "security-protocol",
        "librdkafka-typo",
    ],
)
def test_a_spec_the_runtime_would_refuse_is_a_condition_naming_the_field_not_a_crash_loop(
    cluster: TestingCluster, kafka: TestingKafka, overrides: dict[str, Any], reason: str, message: str
) -> None:
    result = _run(cluster, kafka, spec=flights_spec(**overrides))
    degraded = _degraded(result)
    assert (degraded["status"], degraded["reason"]) == ("True", reason)
    assert message in degraded["message"]
    assert cluster.applied == []
    assert "hunter2" not in repr(result)


def test_a_missing_credentials_secret_is_named(cluster: TestingCluster, kafka: TestingKafka) -> None:
    auth = {"mechanism": "SCRAM-SHA-256", "username": "app", "passwordSecret": {"name": "kafka-user", "key": "pw"}}
    spec = flights_spec(kafka={"bootstrapServers": "127.0.0.1:9094", "authentication": auth})
    degraded = _degraded(_run(cluster, kafka, spec=spec))
    assert (degraded["reason"], degraded["message"]) == (
        "SecretMissing",
        "spec.kafka.authentication.passwordSecret: Secret kafka-user does not exist",
    )


def test_the_operators_admin_client_authenticates_with_the_secret_and_nothing_secret_is_written(
    cluster: TestingCluster, kafka: TestingKafka
) -> None:
    cluster.secrets[("team-x", "kafka-user")] = {"pw": "s3cr3t-pw"}
    auth = {"mechanism": "SCRAM-SHA-256", "username": "app", "passwordSecret": {"name": "kafka-user", "key": "pw"}}
    spec = flights_spec(kafka={"bootstrapServers": "127.0.0.1:9094", "authentication": auth})
    connections = []
    world = World(cluster=cluster, kafka_for=lambda c: connections.append(c) or kafka, instances=TestingInstances())
    result = reconcile(APP, spec, {}, world, NOW)
    assert _degraded(result)["status"] == "False"
    settings = connections[0].settings()
    assert settings["sasl.password"] == "s3cr3t-pw" and settings["sasl.mechanism"] == "SCRAM-SHA-256"
    assert settings["security.protocol"] == "SASL_PLAINTEXT"
    assert "s3cr3t-pw" not in repr(connections[0])
    assert "s3cr3t-pw" not in repr(result) + repr(cluster.objects)


def test_a_paused_app_is_neither_observed_nor_changed_and_says_so(cluster: TestingCluster, kafka: TestingKafka) -> None:
    first = _run(cluster, kafka)
    before = copy.deepcopy(cluster.objects)
    paused = App(APP.name, APP.namespace, APP.uid, 2, APP.created, {"streamapp.io/paused": "true"})
    result = _run(cluster, kafka, spec=flights_spec(replicas=5), status=first.status, app=paused)
    assert cluster.objects == before
    assert result.status["paused"] is True
    progressing = next(c for c in result.status["conditions"] if c["type"] == "Progressing")
    assert (progressing["status"], progressing["reason"]) == ("False", "Paused")
    assert [e.reason for e in result.events] == ["Paused"]
    resumed = _run(cluster, kafka, spec=flights_spec(replicas=5), status=result.status)
    assert resumed.status["paused"] is None
    assert cluster.get("StatefulSet", "team-x", "victim")["spec"]["replicas"] == 5  # type: ignore[index]


def test_the_admin_clients_connection_takes_user_name_password_and_ca_from_their_secrets(
    cluster: TestingCluster,
) -> None:
    cluster.secrets[("team-x", "kafka-user")] = {"user": "flights", "pw": "s3cr3t-pw"}
    cluster.secrets[("team-x", "kafka-ca")] = {"ca.crt": "-----BEGIN CERTIFICATE-----"}
    kafka = KafkaSpec.model_validate({
        "bootstrapServers": "kafka:9093",
        "authentication": {"mechanism": "PLAIN", "usernameSecret": {"name": "kafka-user", "key": "user"},
                           "passwordSecret": {"name": "kafka-user", "key": "pw"}},
        "tls": {"caSecret": {"name": "kafka-ca", "key": "ca.crt"}},
    })  # fmt: skip
    connection, problems = kafka_connection(cluster, "team-x", kafka)
    assert problems == []
    assert connection.settings() == {
        "bootstrap.servers": "kafka:9093",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "flights",
        "sasl.password": "s3cr3t-pw",
        "ssl.ca.pem": "-----BEGIN CERTIFICATE-----",
    }
    del cluster.secrets[("team-x", "kafka-ca")]
    _, problems = kafka_connection(cluster, "team-x", kafka)
    assert [p.message for p in problems] == ["spec.kafka.tls.caSecret: Secret kafka-ca does not exist"]


def test_the_application_id_an_upgrade_runs_under_is_claimed_beside_the_specs() -> None:
    meta = {"name": "orders", "namespace": "team-x", "uid": "uid-orders", "creationTimestamp": "2026-01-01T00:00:00Z"}
    index = application_ids(meta=meta, spec={"applicationId": "orders"}, status={"applicationId": "orders-g3"})
    claimed = sorted(peer.application_id for peer in index.values())
    assert claimed == ["orders", "orders-g3"]
    newer = Peer("team-y", "copycat", "uid-copycat", "2026-02-01T00:00:00Z", "orders-g3")
    assert [p.reason for p in identity_conflicts(newer, index.values())] == ["ApplicationIdInUse"]
    assert list(application_ids(meta=meta, spec={}, status={}).values()) == [
        Peer("team-x", "orders", "uid-orders", "2026-01-01T00:00:00Z", "orders")
    ]


def test_many_refused_client_settings_name_ten_and_count_the_rest() -> None:
    """A condition message stays small: 30 librdkafka typos name the first ten and count the other twenty."""
    result = _run(TestingCluster(), TestingKafka(), flights_spec(config={f"consumer.x{i:02d}": "v" for i in range(30)}))
    degraded = _degraded(result)
    assert degraded["reason"] == "ConfigInvalid" and degraded["message"].count("config key 'consumer.x") == 10
    assert '"x09"; and 20 more' in degraded["message"]
