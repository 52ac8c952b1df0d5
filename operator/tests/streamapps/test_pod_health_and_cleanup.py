"""A stream thread failing inside a pod is Degraded with its pod, thread, task and error (bounded); deleting a
StreamApp cleans up only what its cleanupPolicy and the operator's own records allow; Kafka admin clients
live only while an app uses them; kopf's record of the last spec stays small whatever the spec's size."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import kopf
import pytest
from operator_fakes import TestingCluster, TestingInstances, TestingKafka, flights_spec
from streamapp_operator import main
from streamapp_operator.connection import KafkaConnection
from streamapp_operator.identity import Peer
from streamapp_operator.kafka import AdminPool
from streamapp_operator.main import DigestDiffBaseStorage
from streamapp_operator.streamapps.desired import selector_labels
from streamapp_operator.streamapps.pod_status import MAX_FAILURE_BYTES_PER_POD, failing_pods, failing_threads
from streamapp_operator.streamapps.reconcile import App, World, cleanup, reconcile

APP = App(name="poisoned", namespace="apps", uid="uid-p", generation=1)
LABELS = {"app.kubernetes.io/name": "streamapp", "app.kubernetes.io/instance": "poisoned"}
NOW = "2026-01-01T00:00:00Z"


def _worker(thread: int, restarts: int, error: str | None, failure: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"thread": thread, "alive": True, "restarts": restarts, "exit_code": 1 if error else None,
            "error": error, "last_failure": failure, "tasks": []}  # fmt: skip


POISON = {"task": "0_1", "topic": "flights", "partition": 1, "offset": 17,
          "error": "SerdeError: cannot decode value as json", "at": 1.0}  # fmt: skip


def test_a_failing_stream_thread_names_pod_thread_task_offset_and_error() -> None:
    documents: dict[str, dict[str, Any] | str] = {
        "app-0": {"phase": "running", "workers": [_worker(0, 3, "SerdeError: x", POISON), _worker(1, 0, None)]},
        "app-1": {"phase": "running", "workers": [_worker(0, 0, None)]},
        "app-2": "connection refused",
    }
    assert failing_threads(documents) == [
        "pod app-0: thread 0, task 0_1, topic flights[1] offset 17: SerdeError: cannot decode value as json"
    ]


def test_a_runtime_that_gave_up_is_failing_and_one_restart_without_error_is_not() -> None:
    documents: dict[str, dict[str, Any] | str] = {
        "app-0": {"phase": "failed", "workers": [_worker(0, 5, "KafkaError: SASL authentication failed")]},
        "app-1": {"phase": "running", "workers": [_worker(0, 1, None)]},
    }
    (line,) = failing_threads(documents)
    assert line.startswith("pod app-0: the runtime gave up after repeated stream thread failures; thread 0: ")
    assert line.endswith("KafkaError: SASL authentication failed")


def test_a_thread_that_recovered_long_ago_is_not_failing_but_a_recent_or_dead_one_is() -> None:
    old = {**POISON, "at": 1000.0}
    documents: dict[str, dict[str, Any] | str] = {"app-0": {"workers": [_worker(0, 1, "SerdeError: x", old)]}}
    assert failing_threads(documents, now=1000.0 + 601) == []
    assert failing_threads(documents, now=1000.0 + 60) != []
    dead = {**_worker(0, 1, "SerdeError: x", old), "alive": False}
    assert failing_threads({"app-0": {"workers": [dead]}}, now=1000.0 + 601) != []


def test_a_crash_looping_pod_says_why_it_gave_up_from_its_termination_message() -> None:
    terminated = {"exitCode": 1, "message": "stream thread 0 failed 5 times\nKafkaAuthenticationError: SASL failed"}
    pod = {"metadata": {"name": "app-0"}, "status": {"containerStatuses": [
        {"name": "streamapp", "state": {"waiting": {"reason": "CrashLoopBackOff"}},
         "lastState": {"terminated": terminated}}]}}  # fmt: skip
    assert failing_pods([pod]) == [
        "pod app-0: CrashLoopBackOff (last exit code 1: KafkaAuthenticationError: SASL failed)"
    ]


def test_failure_text_is_bounded_per_pod_and_in_pods() -> None:
    huge = _worker(0, 2, "ValueError: " + "x" * 100_000)
    documents: dict[str, dict[str, Any] | str] = {f"app-{i}": {"workers": [huge]} for i in range(12)}
    lines = failing_threads(documents)
    assert len(lines) == 6 and lines[-1] == "and 7 more pods"
    assert all(len(line.encode()) <= MAX_FAILURE_BYTES_PER_POD for line in lines)


def test_a_ready_pod_whose_thread_keeps_failing_degrades_the_app(kafka: TestingKafka) -> None:
    cluster, instances = TestingCluster(), TestingInstances()
    ready = {"phase": "Running", "podIP": "127.0.100.9",
             "containerStatuses": [{"name": "streamapp", "started": True, "ready": True}],
             "conditions": [{"type": "Ready", "status": "True"}]}  # fmt: skip
    cluster.add_pod("apps", "poisoned-0", LABELS, ready)
    recent = {**POISON, "at": time.time()}
    instances.documents["127.0.100.9"] = {"phase": "running", "workers": [_worker(0, 4, "SerdeError: x", recent)]}
    world = World(cluster=cluster, kafka_for=lambda _: kafka, instances=instances)
    status = reconcile(APP, flights_spec(), {}, world, NOW).status
    degraded = next(c for c in status["conditions"] if c["type"] == "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "StreamThreadsFailing")
    assert "pod poisoned-0: thread 0, task 0_1, topic flights[1] offset 17: SerdeError" in degraded["message"]


def _deployed(cluster: TestingCluster, kafka: TestingKafka, **spec: Any) -> dict[str, Any]:
    kafka.topics["poisoned-per-carrier-repartition"] = 4  # made by someone else
    world = World(cluster=cluster, kafka_for=lambda _: kafka, instances=TestingInstances())
    status = reconcile(APP, flights_spec(**spec), {}, world, NOW).status
    kafka.groups.add("poisoned")
    return status


def test_cleanup_policy_retain_keeps_topics_and_group(cluster: TestingCluster, kafka: TestingKafka) -> None:
    status = _deployed(cluster, kafka)
    topics = dict(kafka.topics)
    world = World(cluster=cluster, kafka_for=lambda _: kafka)
    assert cleanup(APP, flights_spec(cleanupPolicy="Retain"), status, world).done
    assert kafka.topics == topics and kafka.groups == {"poisoned"}
    assert cluster.get("StatefulSet", "apps", "poisoned") is not None


def test_cleanup_policy_delete_stops_pods_then_deletes_group_and_only_the_topics_it_created(
    cluster: TestingCluster, kafka: TestingKafka
) -> None:
    spec = flights_spec(cleanupPolicy="Delete")
    status = _deployed(cluster, kafka, cleanupPolicy="Delete")
    cluster.add_pod("apps", "poisoned-0", LABELS, {"phase": "Running"})
    world = World(cluster=cluster, kafka_for=lambda _: kafka)
    waiting = cleanup(APP, spec, status, world)
    assert not waiting.done and waiting.waiting.startswith("1 pods to stop")
    assert cluster.get("StatefulSet", "apps", "poisoned") is None
    assert kafka.groups == {"poisoned"}, "the group was deleted while pods were still members"
    del cluster.objects[("Pod", "apps", "poisoned-0")]  # what the StatefulSet controller does
    done = cleanup(APP, spec, status, world)
    assert done.done and kafka.groups == set()
    assert kafka.topics == {"flights": 4, "poisoned-per-carrier-repartition": 4}
    assert [e.reason for e in done.events] == ["ConsumerGroupDeleted", "TopicsDeleted"]


def test_cleanup_never_deletes_the_group_of_an_app_whose_id_this_one_was_refused_for(
    cluster: TestingCluster, kafka: TestingKafka
) -> None:
    older = Peer("team-y", "poisoned", "uid-older", "2025-01-01T00:00:00Z", "poisoned")
    world = World(cluster=cluster, kafka_for=lambda _: kafka, instances=TestingInstances(), peers=lambda: [older])
    spec = flights_spec(cleanupPolicy="Delete")
    newer = App(APP.name, APP.namespace, APP.uid, 1, created="2026-01-01T00:00:00Z")
    status = reconcile(newer, spec, {}, world, NOW).status
    assert "consumerGroups" not in status
    kafka.groups.add("poisoned")  # the older app's group, same application.id
    assert cleanup(newer, spec, status, world).done
    assert kafka.groups == {"poisoned"}


def test_the_consumer_groups_an_app_ran_with_are_recorded_across_application_ids(
    cluster: TestingCluster, kafka: TestingKafka
) -> None:
    status = _deployed(cluster, kafka, cleanupPolicy="Delete")
    assert status["consumerGroups"] == ["poisoned"]
    world = World(cluster=cluster, kafka_for=lambda _: kafka, instances=TestingInstances())
    spec = flights_spec(cleanupPolicy="Delete", applicationId="poisoned-v2")
    later = reconcile(APP, spec, status, world, NOW).status
    assert later["consumerGroups"] == ["poisoned", "poisoned-v2"]


def test_a_stateful_set_someone_else_owns_is_not_deleted_by_cleanup(
    cluster: TestingCluster, kafka: TestingKafka
) -> None:
    cluster.add({"kind": "StatefulSet", "metadata": {"name": "poisoned", "namespace": "apps", "uid": "x"}})
    world = World(cluster=cluster, kafka_for=lambda _: kafka)
    cleanup(APP, flights_spec(cleanupPolicy="Delete"), {}, world)
    assert cluster.get("StatefulSet", "apps", "poisoned") is not None


def test_an_admin_client_no_app_uses_is_dropped() -> None:
    made: list[KafkaConnection] = []
    pool = AdminPool(factory=lambda c: made.append(c) or object())
    bad, good = KafkaConnection("nowhere:9092"), KafkaConnection("127.0.0.1:9092")
    pool.admin_for(bad, "a")
    pool.admin_for(good, "b")
    assert pool.connections() == 2
    pool.admin_for(good, "a")  # app a fixed its bootstrap servers
    assert pool.connections() == 1
    pool.release("b")
    assert pool.connections() == 1  # a still uses it
    pool.release("a")
    assert pool.connections() == 0


def test_kopfs_last_handled_configuration_is_a_digest_whatever_the_spec_size() -> None:
    storage = DigestDiffBaseStorage(prefix="streamapp.io", key="last-handled-configuration")
    raw = {"apiVersion": "streamapp.io/v1alpha1", "kind": "StreamApp",
           "metadata": {"name": "big", "namespace": "apps", "annotations": {}},
           "spec": flights_spec(config={f"consumer.k{i}": "v" * 100 for i in range(3000)})}  # fmt: skip
    body = kopf.Body(raw)
    patch = kopf.Patch()
    storage.store(body=body, patch=patch, essence=storage.build(body=body))
    annotations = dict(patch["metadata"]["annotations"])
    assert max(len(value) for value in annotations.values()) < 200
    raw["metadata"]["annotations"] = annotations
    assert storage.fetch(body=kopf.Body(raw)) == storage.build(body=kopf.Body(raw))  # unchanged: no diff
    raw["spec"] = flights_spec(replicas=3)
    assert storage.fetch(body=kopf.Body(raw)) != storage.build(body=kopf.Body(raw))  # changed: a diff


def test_pods_the_namespace_refuses_are_degraded_not_progressing_for_ever(kafka: TestingKafka) -> None:
    cluster = TestingCluster()
    world = World(cluster=cluster, kafka_for=lambda _: kafka, instances=TestingInstances())
    first = reconcile(APP, flights_spec(replicas=2), {}, world, NOW).status
    refused = ('create Pod poisoned-0 in StatefulSet poisoned failed error: pods "poisoned-0" is forbidden: '
               "exceeded quota: no-pods, requested: pods=1, used: pods=0, limited: pods=0")  # fmt: skip
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    event = {"kind": "Event", "metadata": {"name": "e1", "namespace": "apps"}, "reason": "FailedCreate",
             "involvedObject": {"kind": "StatefulSet", "name": "poisoned"}, "message": refused,
             "lastTimestamp": stamp}  # fmt: skip
    cluster.add(event)
    status = reconcile(APP, flights_spec(replicas=2), first, world, NOW).status
    degraded = next(c for c in status["conditions"] if c["type"] == "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "PodsFailing")
    assert degraded["message"] == f"StatefulSet poisoned cannot create pods: {refused}"
    cluster.set_status("StatefulSet", "apps", "poisoned", {"replicas": 2})  # the quota was lifted
    status = reconcile(APP, flights_spec(replicas=2), status, world, NOW).status
    assert next(c for c in status["conditions"] if c["type"] == "Degraded")["status"] == "False"


def test_a_deleted_app_waits_seconds_not_a_minute_for_a_timer_caught_mid_reconcile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """kopf keeps its finalizer on a deleted StreamApp until the app's timers stopped, re-checking a timer caught
    running (a reconcile waiting out a 10 s Kafka timeout) every ``cancellation_polling`` seconds: 60 by default,
    which held ``kubectl delete --wait`` for a minute."""
    monkeypatch.setattr(main.metrics, "serve", lambda: None)
    settings = kopf.OperatorSettings()
    main.configure(settings=settings)
    assert settings.background.cancellation_polling <= 5


def test_a_pod_no_node_can_take_degrades_the_app_and_a_smaller_spec_replaces_it_at_once(kafka: TestingKafka) -> None:
    """The audit's D-M4: it was ``RolloutComplete`` with ``Degraded=False``; now it fails the app as a crash loop
    does, and a fix is the forced rollback's (it is not waited on to become Ready)."""
    cluster = TestingCluster()
    world = World(cluster=cluster, kafka_for=lambda _: kafka, instances=TestingInstances())
    huge = flights_spec(replicas=1, resources={"requests": {"memory": "1000Gi"}})
    status = reconcile(APP, huge, {}, world, NOW).status
    no_node = "0/1 nodes are available: 1 Insufficient memory. preemption: 0/1 nodes are available"
    scheduled = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": no_node,
                 "lastTransitionTime": "2026-01-01T00:00:00Z"}  # fmt: skip
    cluster.add_pod("apps", "poisoned-0", selector_labels("poisoned"), {"phase": "Pending", "conditions": [scheduled]})
    revision = {"replicas": 1, "updatedReplicas": 1, "currentRevision": "r1", "updateRevision": "r1"}
    cluster.set_status("StatefulSet", "apps", "poisoned", {"observedGeneration": 1, **revision})

    status = reconcile(APP, huge, status, world, NOW).status
    found = {c["type"]: c for c in status["conditions"]}

    assert (found["Degraded"]["status"], found["Degraded"]["reason"]) == ("True", "PodsFailing")
    assert found["Degraded"]["message"] == f"pod poisoned-0: Unschedulable ({no_node})"
    assert (found["Progressing"]["reason"], found["Progressing"]["message"]) == (
        "PodsUnschedulable", "no node can take pod poisoned-0 (Degraded says why)"
    )  # fmt: skip
    fixed, app = flights_spec(replicas=1), App(name="poisoned", namespace="apps", uid="uid-p", generation=2)
    status = reconcile(app, fixed, status, world, NOW).status  # the new template, held at partition 1
    generation = cluster.get("StatefulSet", "apps", "poisoned")["metadata"]["generation"]
    cluster.set_status("StatefulSet", "apps", "poisoned", {"observedGeneration": generation, **revision,
                                                           "updatedReplicas": 0, "updateRevision": "r2"})  # fmt: skip
    status = reconcile(app, fixed, status, world, NOW).status
    assert cluster.get("StatefulSet", "apps", "poisoned")["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == 0
