"""Scaling 1 -> 3 -> 1 under load with exactly_once_v2: no loss, no duplicate, state volumes kept then deleted
(issue 11).

On the real stack: a counting app under a steady load is scaled with ``kubectl scale streamapp`` (the ``/scale``
subresource) to 3 pods and back to 1:

- the StatefulSet follows ``/scale`` both ways, and ``ScalingLimited`` says the stream threads fit the task count;
- on the scale-down the removed pods leave the consumer group at once: the operator removes their static
  members (``MembersRemoved``), so pod 0 owns every partition before the broker's 45 s session timeout would
  have released them;
- the removed pods' claims are kept, marked with the time (``status.retainedVolumes``), then deleted after the
  short ``spec.state.retainAfterScaleDown``; pod 0's claim stays;
- the output is exact: the latest count per key equals the records produced per key;
- interactive queries (docs/interactive-queries.md) through the pods' HTTP servers: with 3 pods every pod lists
  the 3 instances at the endpoints the operator made them advertise (``$(POD_IP):8080``), and a key query sent
  to any pod is answered by the same instance, the key's owner (forwarded); back at 1 pod, a range query over
  the store answers exactly the records produced per key, from the running task (not stale).
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from e2e import cluster, operations

pytestmark = pytest.mark.e2e
SESSION_TIMEOUT_S = 45  # the broker's group.consumer.session.timeout.ms default
MARK = "streamapp.io/scaled-down-at"


@pytest.fixture
def namespace(operator_installed: None) -> Iterator[str]:
    name = cluster.create_namespace("scale")
    yield name
    cluster.delete_namespace(name)


def _members(name: str) -> set[str]:
    admin = AdminClient({"bootstrap.servers": cluster.stack_env()["KAFKA_BOOTSTRAP"]})
    group = admin.describe_consumer_groups([name])[name].result(10)
    return {m.group_instance_id or m.member_id for m in group.members}


def _claims(namespace: str, name: str) -> dict[str, dict[str, Any]]:
    out = cluster.kubectl("get", "pvc", "-n", namespace, "-l", f"app.kubernetes.io/instance={name}", "-o", "json")
    return {c["metadata"]["name"]: c for c in json.loads(out)["items"]}


def _marked(namespace: str, name: str) -> set[str]:
    """The claims marked with the time their pod was scaled away."""
    return {n for n, c in _claims(namespace, name).items() if MARK in (c["metadata"].get("annotations") or {})}


def _queries_answer_for_the_whole_app(namespace: str, name: str) -> bool:
    """Every pod lists the app's 3 instances at the pods' ``IP:8080`` (``GET /metadata``), and a key query sent to
    each pod is answered (``POST /query``) by one instance, the same for every pod: the key's owner."""
    pods = operations.pods(namespace, name)
    endpoints = {f"{p['status'].get('podIP')}:8080" for p in pods}
    owners = set()
    try:
        for pod in pods:
            if {m["endpoint"] for m in operations.pod_http(pod, "/metadata")} != endpoints or len(endpoints) != 3:
                return False
            [part] = operations.pod_http(pod, "/query", {"store": "counts", "type": "key", "key": "k1"})["partitions"]
            if part["failure"] is not None:
                return False
            owners.add(part["instance"])
    except OSError:
        return False
    return len(owners) == 1


def _scale(namespace: str, name: str, replicas: int) -> None:
    cluster.kubectl("scale", "streamapp", name, "-n", namespace, f"--replicas={replicas}")


def test_scaling_out_and_in_under_load_loses_nothing_and_cleans_up_state_volumes(namespace: str) -> None:
    name = f"scale-{uuid.uuid4().hex[:6]}"
    cluster.create_topics({f"{name}-in": operations.PARTITIONS, f"{name}-out": operations.PARTITIONS})
    try:
        load = operations.Load(f"{name}-in")
        load.produce(2000)
        app = operations.counting_app(name, 1, processingGuarantee="exactly_once_v2",
                                      state={"size": "1Gi", "retainAfterScaleDown": "30s"})  # fmt: skip
        cluster.apply(app, namespace)
        operations.wait_settled(namespace, name, 1)
        with load:
            _scale(namespace, name, 3)
            ready3 = functools.partial(operations.ready_replicas_are, namespace, name, 3)
            cluster.wait_until(ready3, 180, "3 ready pods", 1, operations.describe(namespace, name))
            assert cluster.get_json("statefulset", name, namespace)["spec"]["replicas"] == 3
            limited = cluster.condition(name, namespace, "ScalingLimited")
            assert (limited["status"], limited["reason"]) == ("False", "WithinTaskCount"), limited
            cluster.wait_until(lambda: _members(name) == {f"{name}-{i}-0" for i in range(3)}, 60, "3 members")
            cluster.wait_until(functools.partial(_queries_answer_for_the_whole_app, namespace, name), 60,
                               "every pod to list the 3 instances and forward a key query to its owner", 1)  # fmt: skip
            _scale(namespace, name, 1)
            removed = {f"state-{name}-1", f"state-{name}-2"}
            cluster.wait_until(lambda: _marked(namespace, name) == removed, 30, "the scaled-away claims marked", 1)
            assert set(_claims(namespace, name)) == removed | {f"state-{name}-0"}  # kept, not deleted yet
            gone = lambda: {p["metadata"]["name"] for p in operations.pods(namespace, name)} == {f"{name}-0"}  # noqa: E731
            cluster.wait_until(gone, 120, "pods 1 and 2 gone", 1, operations.describe(namespace, name))
            # The broker would keep the departed static members' partitions for the session timeout; the
            # operator removes them at its next reconcile (every 10 s) instead.
            cluster.wait_until(lambda: _members(name) == {f"{name}-0-0"}, SESSION_TIMEOUT_S - 15,
                               "the scaled-away members to leave the group", 1)  # fmt: skip
            assert "MembersRemoved" in [e["reason"] for e in cluster.events(name, namespace)]
        cluster.wait_until(lambda: set(_claims(namespace, name)) == {f"state-{name}-0"}, 90,
                           "the scaled-away claims deleted after retainAfterScaleDown", 2)  # fmt: skip
        assert "StateVolumeDeleted" in [e["reason"] for e in cluster.events(name, namespace)]
        assert operations.latest_counts(f"{name}-out", load.sent) == dict(load.sent)
        [pod] = operations.pods(namespace, name)
        answer = operations.pod_http(pod, "/query", {"store": "counts", "type": "range"})
        assert not answer["stale"], answer
        rows = [row for part in answer["partitions"] for row in part["result"]]
        assert dict(rows) == dict(load.sent), answer
    finally:
        cluster.delete_topics(name)
