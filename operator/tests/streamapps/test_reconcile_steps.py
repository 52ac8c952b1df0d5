"""Reconcile is level-based and idempotent; an invalid StreamApp is reported, never raised or half-applied.

Runs the real ``reconcile`` against the hand-written seams of ``operator_fakes``.
"""

from __future__ import annotations

import copy
from typing import Any

import yaml
from operator_fakes import FLIGHTS_TOPOLOGY, TestingCluster, TestingInstances, TestingKafka, flights_spec
from streamapp_operator.streamapps.reconcile import App, Result, World, reconcile

APP = App(name="flights-per-carrier", namespace="apps", uid="uid-1", generation=1)
NOW = "2026-01-01T00:00:00Z"


def _run(
    cluster: TestingCluster,
    kafka: TestingKafka,
    spec: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
    app: App = APP,
    instances: TestingInstances | None = None,
) -> Result:
    world = World(cluster=cluster, kafka_for=lambda servers: kafka, instances=instances or TestingInstances())
    return reconcile(app, spec if spec is not None else flights_spec(), status or {}, world, NOW)


def _conditions(result: Result) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in result.status["conditions"]}


def test_creates_internal_topics_then_config_map_service_stateful_set_and_disruption_budget(
    cluster: TestingCluster, kafka: TestingKafka
) -> None:
    result = _run(cluster, kafka)
    assert kafka.topics == {
        "flights": 4,
        "flights-per-carrier-per-carrier-repartition": 4,
        "flights-per-carrier-departures-per-carrier-store-changelog": 4,
    }
    assert kafka.configs["flights-per-carrier-departures-per-carrier-store-changelog"] == {"cleanup.policy": "compact"}
    assert [(m["kind"], m["metadata"]["name"]) for m in cluster.applied] == [
        ("ConfigMap", "flights-per-carrier-config"),
        ("Service", "flights-per-carrier"),
        ("StatefulSet", "flights-per-carrier"),
        ("PodDisruptionBudget", "flights-per-carrier"),
    ]
    assert [e.reason for e in result.events] == ["TopicsCreated", "Created", "Created", "Created", "Created"]
    config_map = cluster.get("ConfigMap", "apps", "flights-per-carrier-config")
    assert config_map is not None
    topology = yaml.safe_load(config_map["data"]["topology.yaml"])
    assert [n["name"] for n in topology["nodes"]] == [n["name"] for n in FLIGHTS_TOPOLOGY["nodes"]]


def test_status_reports_generation_tasks_selector_lag_and_ready_count(
    cluster: TestingCluster, kafka: TestingKafka
) -> None:
    kafka.lag, kafka.state = 42, "Stable"
    status = _run(cluster, kafka).status
    assert status["observedGeneration"] == 1
    assert status["tasks"] == 8
    assert status["selector"] == "app.kubernetes.io/name=streamapp,app.kubernetes.io/instance=flights-per-carrier"
    assert status["applicationId"] == "flights-per-carrier"
    assert (status["ready"], status["readyReplicas"], status["replicas"]) == ("0/2", 0, 0)
    cluster.set_status(
        "StatefulSet",
        "apps",
        "flights-per-carrier",
        {"observedGeneration": 1, "replicas": 2, "readyReplicas": 2, "updatedReplicas": 2},
    )
    status = _run(cluster, kafka, status=status).status
    assert (status["ready"], status["lag"], status["consumerGroupState"]) == ("2/2", 42, "Stable")
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "Ready": "True",
        "Progressing": "False",
        "Degraded": "False",
        "TopologyValid": "True",
        "Restoring": "False",
        "ScalingLimited": "False",
        "RecordsDropped": "Unknown",  # the pods' /status is not read here
    }
    group, topics = kafka.lag_requests[-1]
    assert group == "flights-per-carrier"
    assert topics == ["flights", "flights-per-carrier-per-carrier-repartition"]


def test_second_reconcile_of_an_unchanged_app_changes_nothing(cluster: TestingCluster, kafka: TestingKafka) -> None:
    first = _run(cluster, kafka)
    objects = copy.deepcopy(cluster.objects)
    second = _run(cluster, kafka, status=first.status)
    assert cluster.objects == objects
    assert second.events == []
    assert second.status == first.status


def test_replicas_change_updates_the_stateful_set_in_place(cluster: TestingCluster, kafka: TestingKafka) -> None:
    first = _run(cluster, kafka)
    result = _run(cluster, kafka, spec=flights_spec(replicas=3), status=first.status)
    sts = cluster.get("StatefulSet", "apps", "flights-per-carrier")
    assert sts is not None and sts["spec"]["replicas"] == 3
    assert [(e.reason, e.message) for e in result.events] == [("Updated", "Updated StatefulSet flights-per-carrier")]
    assert result.status["ready"] == "0/3"


def test_config_change_rolls_the_pods_through_the_template_hash(cluster: TestingCluster, kafka: TestingKafka) -> None:
    _run(cluster, kafka)
    before = cluster.get("StatefulSet", "apps", "flights-per-carrier")
    _run(cluster, kafka, spec=flights_spec(config={"commit.interval.ms": "100"}))
    after = cluster.get("StatefulSet", "apps", "flights-per-carrier")
    assert before is not None and after is not None
    key = "streamapp.io/config-hash"
    assert (
        before["spec"]["template"]["metadata"]["annotations"][key]
        != (after["spec"]["template"]["metadata"]["annotations"][key])
    )


def test_invalid_topology_is_degraded_and_creates_nothing(cluster: TestingCluster, kafka: TestingKafka) -> None:
    topology = copy.deepcopy(FLIGHTS_TOPOLOGY)
    topology["nodes"][4]["input"] = "nowhere"
    result = _run(cluster, kafka, spec=flights_spec(topology=topology))
    conditions = _conditions(result)
    assert conditions["Degraded"]["status"] == "True"
    assert conditions["Degraded"]["message"] == "spec.topology: node 'count': input 'nowhere' does not exist"
    assert conditions["TopologyValid"]["status"] == "False"
    assert result.status["observedGeneration"] == 1
    assert cluster.applied == []
    assert kafka.topics == {"flights": 4}
    assert [(e.type, e.reason) for e in result.events] == [("Warning", "TopologyInvalid")]


def test_missing_source_topic_is_degraded_and_recovers_once_the_topic_exists(cluster: TestingCluster) -> None:
    kafka = TestingKafka({})
    degraded = _run(cluster, kafka)
    assert _conditions(degraded)["Degraded"]["message"] == "source topic 'flights' does not exist in Kafka"
    assert cluster.applied == []
    kafka.topics["flights"] = 4
    recovered = _run(cluster, kafka, status=degraded.status)
    assert _conditions(recovered)["Degraded"]["status"] == "False"
    assert _conditions(recovered)["TopologyValid"]["status"] == "True"
    assert "Recovered" in [e.reason for e in recovered.events]
    assert cluster.get("StatefulSet", "apps", "flights-per-carrier") is not None


def test_invalid_update_leaves_the_running_workload_untouched(cluster: TestingCluster, kafka: TestingKafka) -> None:
    first = _run(cluster, kafka)
    objects = copy.deepcopy(cluster.objects)
    topology = copy.deepcopy(FLIGHTS_TOPOLOGY)
    topology["nodes"][1]["type"] = "flatten"
    app = App(name=APP.name, namespace=APP.namespace, uid=APP.uid, generation=2)
    result = _run(cluster, kafka, spec=flights_spec(topology=topology, replicas=5), status=first.status, app=app)
    assert cluster.objects == objects
    assert result.status["observedGeneration"] == 2
    assert "unknown type 'flatten'" in _conditions(result)["Degraded"]["message"]


def test_unreachable_kafka_is_degraded_without_raising(cluster: TestingCluster, kafka: TestingKafka) -> None:
    kafka.unavailable = "listing topics failed: Local: Timed out"
    result = _run(cluster, kafka)
    degraded = _conditions(result)["Degraded"]
    assert (degraded["status"], degraded["reason"]) == ("True", "KafkaUnavailable")
    assert "Timed out" in degraded["message"]
    assert _conditions(result)["TopologyValid"]["status"] == "Unknown"
    assert result.status["lag"] is None and result.status["tasks"] is None


def test_object_rejected_by_the_api_server_is_degraded_with_its_message(
    cluster: TestingCluster, kafka: TestingKafka
) -> None:
    cluster.reject["StatefulSet"] = "applying StatefulSet apps/flights-per-carrier: spec: Forbidden: updates to ..."
    result = _run(cluster, kafka)
    degraded = _conditions(result)["Degraded"]
    assert (degraded["status"], degraded["reason"]) == ("True", "ApplyRejected")
    assert degraded["message"].startswith("applying StatefulSet apps/flights-per-carrier: spec: Forbidden")


def test_spec_that_fails_parsing_is_degraded(cluster: TestingCluster, kafka: TestingKafka) -> None:
    spec = flights_spec()
    del spec["image"]
    result = _run(cluster, kafka, spec=spec)
    assert _conditions(result)["Degraded"]["message"] == "spec: image: Field required"
    assert result.status["ready"] == "0/0"


def test_crash_looping_pods_degrade_but_do_not_block_a_fixed_spec(cluster: TestingCluster, kafka: TestingKafka) -> None:
    first = _run(cluster, kafka)
    crash = {"waiting": {"reason": "CrashLoopBackOff"}}
    cluster.add_pod(
        "apps",
        "flights-per-carrier-0",
        {"app.kubernetes.io/name": "streamapp", "app.kubernetes.io/instance": "flights-per-carrier"},
        {"containerStatuses": [{"name": "streamapp", "state": crash, "lastState": {"terminated": {"exitCode": 1}}}]},
    )
    crashing = _run(cluster, kafka, status=first.status)
    degraded = _conditions(crashing)["Degraded"]
    assert (degraded["status"], degraded["reason"]) == ("True", "PodsFailing")
    assert degraded["message"] == "pod flights-per-carrier-0: CrashLoopBackOff (last exit code 1)"
    assert [(e.type, e.reason) for e in crashing.events] == [("Warning", "PodsFailing")]
    _run(cluster, kafka, spec=flights_spec(image="localhost/streamapp:fixed"), status=crashing.status)
    sts = cluster.get("StatefulSet", "apps", "flights-per-carrier")
    assert sts is not None
    assert sts["spec"]["template"]["spec"]["containers"][0]["image"] == "localhost/streamapp:fixed"


def test_intent_is_written_to_status_before_pods_are_replaced(cluster: TestingCluster, kafka: TestingKafka) -> None:
    first = _run(cluster, kafka)
    labels = {"app.kubernetes.io/name": "streamapp", "app.kubernetes.io/instance": "flights-per-carrier"}
    cluster.add_pod("apps", "flights-per-carrier-0", labels, {"phase": "Running"})
    _run(cluster, kafka, spec=flights_spec(replicas=4), status=first.status)
    assert cluster.status_writes == []  # scaling replaces no pod
    cluster.journal.clear()
    app = App(name=APP.name, namespace=APP.namespace, uid=APP.uid, generation=3)
    new_image = flights_spec(replicas=4, image="localhost/streamapp:2")
    result = _run(cluster, kafka, spec=new_image, status=first.status, app=app)
    assert cluster.journal == [
        "dry-run ConfigMap", "dry-run Service", "dry-run StatefulSet", "dry-run PodDisruptionBudget",
        "apply ConfigMap", "apply Service", "status", "apply StatefulSet", "apply PodDisruptionBudget",
    ]  # fmt: skip
    applied = cluster.get("StatefulSet", "apps", "flights-per-carrier")
    assert applied is not None and applied["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == 4
    (intent,) = cluster.status_writes
    assert intent["rollout"]["partition"] == 4 and intent["rollout"]["replacing"] is None
    progressing = {c["type"]: c for c in intent["conditions"]}["Progressing"]
    assert (progressing["status"], progressing["reason"]) == ("True", "RollingOut")
    assert progressing["observedGeneration"] == 3
    assert progressing["message"] == "replacing 1 pods with the pod template of generation 3, one at a time"
    assert [c["type"] for c in intent["conditions"]] == [
        "Ready",
        "Progressing",
        "Degraded",
        "TopologyValid",
        "Restoring",
        "ScalingLimited",
        "RecordsDropped",
    ]
    assert _conditions(result)["Progressing"]["status"] == "True"
