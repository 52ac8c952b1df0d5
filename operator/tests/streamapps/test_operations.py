"""The upgrade check, the declarative reset and autoscaling, wired into reconcile (``operations``).

Runs the real ``reconcile`` against the hand-written seams of ``operator_fakes``; the decisions themselves are
tested in ``test_upgrade_decisions``, ``test_reset_decisions`` and ``test_autoscale_decisions``.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from operator_fakes import TestingCluster, TestingInstances, TestingKafka, flights_spec
from streamapp_operator.kafka import GroupMember, KafkaUnavailable
from streamapp_operator.streamapps.observe import observe_instances
from streamapp_operator.streamapps.operations import (
    processing_rate,
    running_application_id,
    with_upgrade_condition,
)
from streamapp_operator.streamapps.reconcile import App, Result, World, reconcile

NAME, NAMESPACE = "flights-per-carrier", "apps"
NOW = "2026-01-01T00:00:00Z"
LABELS = {"app.kubernetes.io/name": "streamapp", "app.kubernetes.io/instance": NAME}
READY = {
    "phase": "Running",
    "podIP": "10.0.0.1",
    "conditions": [{"type": "Ready", "status": "True"}],
    "containerStatuses": [{"started": True}],
}


class Driver:
    """Reconciles one StreamApp again and again, keeping its status as the API server would (merged)."""

    def __init__(self, cluster: TestingCluster, kafka: TestingKafka, instances: TestingInstances | None = None):
        self.cluster, self.kafka = cluster, kafka
        self.world = World(cluster=cluster, kafka_for=lambda _: kafka, instances=instances or TestingInstances())
        self.status: dict[str, Any] = {}

    def reconcile(self, spec: dict[str, Any], generation: int = 1) -> Result:
        app = App(name=NAME, namespace=NAMESPACE, uid="uid-1", generation=generation)
        result = reconcile(app, spec, copy.deepcopy(self.status), self.world, NOW)
        for write in self.cluster.status_writes:
            self.status.update(write)
        self.cluster.status_writes.clear()
        self.status.update(result.status)
        self.status = {k: v for k, v in self.status.items() if v is not None}
        return result

    def replicas(self) -> int:
        stateful_set = self.cluster.get("StatefulSet", NAMESPACE, NAME)
        assert stateful_set is not None
        return int(stateful_set["spec"]["replicas"])

    def condition(self, kind: str) -> dict[str, Any] | None:
        return next((c for c in self.status.get("conditions", []) if c["type"] == kind), None)

    def running(self, pods: int) -> None:
        """The StatefulSet controller made ``pods`` pods (each a group member and with a state volume)."""
        for kind, namespace, name in list(self.cluster.objects):
            if kind == "Pod":
                del self.cluster.objects[(kind, namespace, name)]
        for i in range(pods):
            self.cluster.add_pod(NAMESPACE, f"{NAME}-{i}", dict(LABELS), READY)
            self.cluster.add(_claim(i))
        client = f"{NAME}-{NAME}-{{}}-StreamThread-1-consumer"
        self.kafka.members = [GroupMember(client.format(i), f"{NAME}-{i}-1", "/10.0.0.1") for i in range(pods)]


def _claim(ordinal: int) -> dict[str, Any]:
    name = f"state-{NAME}-{ordinal}"
    metadata = {"name": name, "namespace": NAMESPACE, "labels": dict(LABELS), "uid": f"uid-{name}"}
    return {"kind": "PersistentVolumeClaim", "metadata": metadata}


def _renamed_store(spec: dict[str, Any]) -> dict[str, Any]:
    spec = copy.deepcopy(spec)
    spec["topology"]["stores"][0]["name"] = "carrier-counts"
    spec["topology"]["nodes"][4]["store"] = "carrier-counts"
    return spec


def _running(cluster: TestingCluster) -> tuple[list[str], str]:
    """The running topology's store names and application.id (from the ConfigMap the operator wrote)."""
    config_map = cluster.get("ConfigMap", NAMESPACE, f"{NAME}-config")
    assert config_map is not None
    topology = yaml.safe_load(config_map["data"]["topology.yaml"])
    streams = yaml.safe_load(config_map["data"]["streams.yaml"])
    return [s["name"] for s in topology["stores"]], streams["application.id"]


# -- upgrade policy ---------------------------------------------------------------------------------------


def test_an_incompatible_topology_change_is_refused_naming_the_store_and_the_workload_is_untouched(
    cluster: TestingCluster, kafka: TestingKafka
) -> None:
    driver = Driver(cluster, kafka)
    driver.reconcile(flights_spec())
    assert driver.condition("UpgradeCompatible") is None  # nothing compared yet
    applied = len(cluster.applied)
    result = driver.reconcile(_renamed_store(flights_spec()), generation=2)
    assert len(cluster.applied) == applied  # nothing written: the ConfigMap still holds the running topology
    assert _running(cluster) == (["departures-per-carrier-store"], NAME)
    condition = driver.condition("UpgradeCompatible")
    assert condition is not None
    assert (condition["status"], condition["reason"]) == ("False", "IncompatibleTopologyChange")
    assert "departures-per-carrier-store" in condition["message"]
    assert [e.reason for e in result.events if e.type == "Warning"] == ["IncompatibleTopologyChange"]  # once
    assert driver.status["upgrade"]["action"] == "refuse"
    again = driver.reconcile(_renamed_store(flights_spec()), generation=2)
    assert not [e for e in again.events if e.reason == "IncompatibleTopologyChange"]  # one event per change


def test_a_compatible_topology_change_rolls_and_a_reverted_one_clears_the_refusal(
    cluster: TestingCluster, kafka: TestingKafka
) -> None:
    driver = Driver(cluster, kafka)
    driver.reconcile(flights_spec())
    driver.reconcile(_renamed_store(flights_spec()), generation=2)
    changed = flights_spec()
    changed["topology"]["nodes"][1]["predicate"] = "flights_app.logic:is_departed_late"
    driver.reconcile(changed, generation=3)
    condition = driver.condition("UpgradeCompatible")
    assert condition is not None and condition["status"] == "True"
    config_map = cluster.get("ConfigMap", NAMESPACE, f"{NAME}-config")
    assert config_map is not None and "is_departed_late" in config_map["data"]["topology.yaml"]


def test_new_application_id_runs_the_incompatible_topology_as_a_new_application_and_keeps_it(
    cluster: TestingCluster, kafka: TestingKafka
) -> None:
    driver = Driver(cluster, kafka)
    driver.reconcile(flights_spec())
    spec = _renamed_store(flights_spec(upgradePolicy="newApplicationId"))
    driver.reconcile(spec, generation=2)
    assert _running(cluster) == (["carrier-counts"], f"{NAME}-g2")
    assert driver.status["applicationId"] == f"{NAME}-g2"
    assert f"{NAME}-g2-carrier-counts-changelog" in kafka.topics
    driver.reconcile(spec, generation=3)  # a later generation with the same topology stays on that id
    assert _running(cluster)[1] == f"{NAME}-g2"


def test_running_application_id_follows_a_changed_spec_application_id() -> None:
    assert running_application_id("orders", {"applicationId": "orders-g4"}) == "orders-g4"
    assert running_application_id("orders-v2", {"applicationId": "orders-g4"}) == "orders-v2"
    assert running_application_id("orders", {}) == "orders"


# -- declarative reset -----------------------------------------------------------------------------------


def test_reset_stops_the_app_resets_offsets_deletes_internal_topics_and_state_then_scales_back(
    cluster: TestingCluster, kafka: TestingKafka
) -> None:
    driver = Driver(cluster, kafka)
    driver.reconcile(flights_spec())
    driver.running(2)
    spec = flights_spec(reset={"nonce": "r1", "to": "earliest"})
    cluster.journal.clear()
    driver.reconcile(spec)
    assert driver.replicas() == 0
    assert cluster.journal.index("status") < cluster.journal.index("apply StatefulSet")  # intent first
    assert driver.status["reset"]["step"] == "scaleToZero"
    driver.reconcile(spec)  # pods still there, members still in the group
    assert driver.status["reset"]["step"] == "awaitStopped" and not kafka.resets
    driver.running(0)
    internal = sorted(t for t in kafka.topics if t != "flights")
    driver.reconcile(spec)
    assert kafka.resets and kafka.resets[0][:2] == (NAME, ["flights"])
    assert driver.status["reset"]["step"] == "deleteInternalTopics"
    driver.reconcile(spec)
    assert set(internal).isdisjoint(kafka.topics)  # deleted, and not re-created while the app is stopped
    cluster.add(_claim(0))
    cluster.add(_claim(1))
    driver.reconcile(spec)
    assert [k for k in cluster.objects if k[0] == "PersistentVolumeClaim"] == []
    driver.reconcile(spec)
    assert driver.replicas() == 2 and driver.status["reset"]["step"] == "scaleBack"
    assert set(internal) <= set(kafka.topics)  # the app is back: its internal topics are created again
    driver.reconcile(spec)
    assert driver.status["reset"]["step"] == "done"
    driver.reconcile(spec)
    assert len(kafka.resets) == 1 and driver.replicas() == 2  # a nonce runs once


def test_a_reset_step_that_failed_after_its_status_was_written_runs_again(
    cluster: TestingCluster, kafka: TestingKafka, monkeypatch: pytest.MonkeyPatch
) -> None:
    driver = Driver(cluster, kafka)
    driver.reconcile(flights_spec())
    spec = flights_spec(reset={"nonce": "r1"})
    driver.reconcile(spec)
    reset_offsets = kafka.reset_offsets

    def broker_gone(*args: Any) -> int:
        raise KafkaUnavailable("the broker went away")

    monkeypatch.setattr(kafka, "reset_offsets", broker_gone)
    result = driver.reconcile(spec)
    assert driver.status["reset"]["step"] == "resetOffsets"  # written before the action
    assert any(e.reason == "KafkaUnavailable" for e in result.events)
    monkeypatch.setattr(kafka, "reset_offsets", reset_offsets)
    driver.reconcile(spec)
    assert len(kafka.resets) == 1 and driver.status["reset"]["step"] == "deleteInternalTopics"


def test_upgrade_policy_reset_resets_the_application_then_runs_the_new_topology(
    cluster: TestingCluster, kafka: TestingKafka
) -> None:
    driver = Driver(cluster, kafka)
    driver.reconcile(flights_spec())
    driver.running(2)
    spec = _renamed_store(flights_spec(upgradePolicy="reset"))
    driver.reconcile(spec, generation=2)
    assert driver.status["reset"]["nonce"] == "upgrade-2" and driver.replicas() == 0
    assert _running(cluster)[0] == ["departures-per-carrier-store"]  # the old pods never see the new topology
    driver.running(0)
    for _ in range(5):
        driver.reconcile(spec, generation=2)
    assert driver.status["reset"]["step"] == "done" and driver.replicas() == 2
    assert len(kafka.resets) == 1
    assert _running(cluster) == (["carrier-counts"], NAME)
    assert f"{NAME}-departures-per-carrier-store-changelog" not in kafka.topics


# -- autoscaling -----------------------------------------------------------------------------------------


def _autoscaled(**autoscaling: Any) -> dict[str, Any]:
    spec = {"minReplicas": 1, "maxReplicas": 8, "target": {"lagPerTask": 100}, "scaleDownStabilizationSeconds": 0,
            "scaleDownCooldownSeconds": 0, **autoscaling}  # fmt: skip
    return flights_spec(autoscaling=spec)


def test_autoscaling_scales_out_on_lag_but_never_past_the_task_count_and_leaves_spec_alone(
    cluster: TestingCluster, kafka: TestingKafka
) -> None:
    driver = Driver(cluster, kafka)
    spec = _autoscaled()
    kafka.lag = 300
    result = driver.reconcile(spec)
    assert driver.replicas() == 2  # 3 threads asked, 2 per pod
    assert spec["replicas"] == 2 and driver.status["autoscaling"]["replicas"] == 2
    kafka.lag = 1_000_000
    result = driver.reconcile(spec)
    assert driver.replicas() == 4  # 8 tasks / 2 threads: a fifth pod would idle
    assert [e.reason for e in result.events if e.reason.startswith("Scaled")] == ["ScaledUp"]
    assert "2 -> 4" in next(e.message for e in result.events if e.reason == "ScaledUp")
    assert driver.status["ready"].endswith("/4")
    kafka.lag = 0
    driver.reconcile(spec)
    assert driver.replicas() == 1 and driver.status["autoscaling"]["lastScaleDownAt"] is not None
    driver.reconcile(flights_spec())  # autoscaling off: spec.replicas again, its status gone
    assert driver.replicas() == 2 and "autoscaling" not in driver.status


def test_autoscaling_is_paused_while_a_reset_runs(cluster: TestingCluster, kafka: TestingKafka) -> None:
    driver = Driver(cluster, kafka)
    driver.reconcile(flights_spec())
    driver.running(2)
    kafka.lag = 1_000_000
    spec = _autoscaled()
    spec["reset"] = {"nonce": "r1"}
    driver.reconcile(spec)
    assert driver.replicas() == 0


def test_the_processing_rate_comes_from_the_pods_counters() -> None:
    instances = TestingInstances()
    worker = {"metrics": {"records_processed_total": 500}}
    instances.documents["10.0.0.1"] = {"workers": [worker, worker]}
    pods = [{"metadata": {"name": f"{NAME}-0"}, "status": READY}]
    total = observe_instances(pods, instances)[3]  # the processed-records total of the one /status read
    assert total == 1000
    assert processing_rate(400, 100.0, total, 110.0) == pytest.approx(60.0)
    assert processing_rate(2000, 100.0, total, 110.0) is None  # a pod restarted: its counter began again
    assert processing_rate(None, None, total, 110.0) is None


def test_the_app_scales_back_only_once_its_old_state_volumes_are_gone(
    cluster: TestingCluster, kafka: TestingKafka
) -> None:
    driver = Driver(cluster, kafka)
    driver.reconcile(flights_spec(replicas=0))  # stopped by the reset so far
    held = _claim(0)
    held["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"  # a finalizer keeps it a while
    cluster.add(held)
    driver.status["reset"] = {"nonce": "r1", "step": "deleteLocalState", "replicasBefore": 2}
    cluster.journal.clear()
    driver.reconcile(flights_spec(reset={"nonce": "r1"}))
    driver.reconcile(flights_spec(reset={"nonce": "r1"}))
    assert driver.status["reset"]["step"] == "deleteLocalState" and driver.replicas() == 0
    assert "delete PersistentVolumeClaim" not in cluster.journal  # asked once already: not deleted again
    del cluster.objects[("PersistentVolumeClaim", NAMESPACE, held["metadata"]["name"])]
    driver.reconcile(flights_spec(reset={"nonce": "r1"}))
    assert driver.replicas() == 2


def test_a_streamapp_created_with_a_reset_in_its_spec_does_not_run_it(
    cluster: TestingCluster, kafka: TestingKafka
) -> None:
    driver = Driver(cluster, kafka)
    spec = flights_spec(reset={"nonce": "from-git"})
    driver.reconcile(spec)
    driver.reconcile(spec)
    assert driver.status["reset"]["step"] == "done" and "not run" in driver.status["reset"]["message"]
    assert driver.replicas() == 2 and not kafka.resets
    driver.reconcile(flights_spec(reset={"nonce": "next"}))
    assert driver.status["reset"]["step"] == "scaleToZero"  # a new nonce runs


def test_a_reset_deletes_only_this_apps_internal_topics_not_those_of_an_app_with_a_longer_id(
    cluster: TestingCluster, kafka: TestingKafka
) -> None:
    driver = Driver(cluster, kafka)
    driver.reconcile(flights_spec(replicas=0))
    neighbour = f"{NAME}-eu-departures-per-carrier-store-changelog"  # application.id "flights-per-carrier-eu"
    kafka.topics[neighbour] = 4
    spec = flights_spec(replicas=0, reset={"nonce": "r1"})
    driver.reconcile(spec)  # resetOffsets
    driver.reconcile(spec)  # deleteInternalTopics
    assert driver.status["reset"]["step"] == "deleteLocalState"
    assert f"{NAME}-departures-per-carrier-store-changelog" not in kafka.topics
    assert neighbour in kafka.topics


def test_a_changed_application_id_is_a_new_application_and_not_compared(
    cluster: TestingCluster, kafka: TestingKafka
) -> None:
    driver = Driver(cluster, kafka)
    driver.reconcile(flights_spec())
    driver.reconcile(_renamed_store(flights_spec(applicationId="carriers-v2")), generation=2)
    assert _running(cluster) == (["carrier-counts"], "carriers-v2")
    assert driver.condition("UpgradeCompatible") is None


def test_a_reset_removes_the_static_members_of_its_stopped_pods_instead_of_waiting_out_their_session(
    cluster: TestingCluster, kafka: TestingKafka
) -> None:
    driver = Driver(cluster, kafka)
    driver.reconcile(flights_spec())
    driver.running(2)
    spec = flights_spec(reset={"nonce": "r1"})
    driver.reconcile(spec)
    members = list(kafka.members)
    driver.running(0)
    kafka.members = members  # the pods are gone, their static members stay until session.timeout.ms
    driver.reconcile(spec)
    assert sorted(kafka.removed_members) == [f"{NAME}-0-1", f"{NAME}-1-1"]
    driver.reconcile(spec)
    assert len(kafka.resets) == 1


def test_a_rate_target_scales_on_the_processing_rate_read_from_the_pods(
    cluster: TestingCluster, kafka: TestingKafka, monkeypatch: pytest.MonkeyPatch
) -> None:
    instances = TestingInstances()
    driver = Driver(cluster, kafka, instances)
    spec = _autoscaled(target={"recordsPerSecondPerThread": 100})
    for i in range(2):
        status = {**READY, "podIP": f"10.0.0.{i + 1}"}
        cluster.add_pod(NAMESPACE, f"{NAME}-{i}", dict(LABELS), status)
    clock = iter([1000.0, 1010.0])
    monkeypatch.setattr("streamapp_operator.streamapps.reconcile.epoch", lambda: next(clock))
    for processed in (0, 3000):  # per pod: 2 pods x 3000 records in 10 s = 600 records/s
        worker = {"metrics": {"records_processed_total": processed}}
        instances.documents.update({"10.0.0.1": {"workers": [worker]}, "10.0.0.2": {"workers": [worker]}})
        driver.reconcile(spec)
        if processed == 0:
            assert driver.replicas() == 2  # one sample is no rate: held, not scaled to minReplicas
    assert driver.status["autoscaling"]["recordsPerSecond"] == pytest.approx(600.0)
    assert driver.replicas() == 3  # 600 / 100 = 6 threads, 2 per pod


def test_each_pods_status_is_read_once_per_reconcile_when_autoscaling_on_a_rate(
    cluster: TestingCluster, kafka: TestingKafka
) -> None:
    """The autoscaler's processed-records sample comes from the same ``/status`` read as restoration and
    failing threads: one request per started pod and reconcile, not two."""
    instances = TestingInstances()
    driver = Driver(cluster, kafka, instances)
    for i in range(2):
        cluster.add_pod(NAMESPACE, f"{NAME}-{i}", dict(LABELS), {**READY, "podIP": f"10.0.0.{i + 1}"})
    worker = {"metrics": {"records_processed_total": 10}}
    instances.documents.update({"10.0.0.1": {"workers": [worker]}, "10.0.0.2": {"workers": [worker]}})
    driver.reconcile(_autoscaled(target={"recordsPerSecondPerThread": 100}))
    assert sorted(instances.asked) == ["10.0.0.1", "10.0.0.2"]
    assert driver.status["autoscaling"]["processedTotal"] == 20


def test_upgrade_compatible_keeps_its_transition_time_while_its_status_stays() -> None:
    first = with_upgrade_condition([], [], ("False", "IncompatibleTopologyChange", "a"), 2, "2026-01-01T00:00:00Z")
    again = with_upgrade_condition([], first, ("False", "IncompatibleTopologyChange", "b"), 2, "2026-01-01T00:05:00Z")
    assert again[0]["lastTransitionTime"] == "2026-01-01T00:00:00Z" and again[0]["message"] == "b"
    fixed = with_upgrade_condition([], again, ("True", "Compatible", "c"), 3, "2026-01-01T00:09:00Z")
    assert fixed[0]["lastTransitionTime"] == "2026-01-01T00:09:00Z"
    assert with_upgrade_condition([], fixed, None, 3, "2026-01-01T00:10:00Z") == fixed  # nothing compared: kept
