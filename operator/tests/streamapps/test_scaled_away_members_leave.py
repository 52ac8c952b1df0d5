"""A pod removed by a scale-down leaves the consumer group at once; a pod restarted by a rollout does not.

Against the real local broker: two KIP-848 static members share a topic; one closes (librdkafka sends the
temporary leave, member epoch -2, so the broker keeps its partitions for it); the operator's hand-sent
``LeaveGroup`` removes it and the survivor owns every partition within seconds, not after the 45 s session
timeout. The decision of which members to remove is checked on its own.
"""

from __future__ import annotations

import os
import time
import uuid

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic
from operator_fakes import TestingCluster, TestingInstances, TestingKafka, flights_spec
from streamapp_operator.kafka import ConfluentKafkaAdmin, GroupMember
from streamapp_operator.kafka_wire import leave_group_request, parse_leave_group_response
from streamapp_operator.streamapps.reconcile import App, World, reconcile
from streamapp_operator.streamapps.rollout import PodState, departed_members

BOOTSTRAP = os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:9092")


def _pod(ordinal: int) -> PodState:
    return PodState(f"app-{ordinal}", ordinal, "rev", True, False)


def test_only_members_of_scaled_away_pods_that_are_gone_are_released() -> None:
    members = ["app-0-0", "app-0-1", "app-1-0", "app-2-0", "app-3-0", "other-5-0", None, "app-x-0"]
    # replicas 2: pods 2 and 3 were scaled away; pod 2 still shuts down (present), pod 3 is gone.
    assert departed_members(members, "app", 2, [_pod(0), _pod(2)]) == ["app-3-0"]
    # a rollout or a crash: pod 1 is away but wanted, so it keeps its membership and its partitions.
    assert departed_members(members, "app", 4, [_pod(0)]) == []


def test_the_leave_group_request_and_response_follow_the_wire_format() -> None:
    frame = leave_group_request("g", ["i-1"], correlation_id=7)
    assert frame == (
        b"\x00\x00\x00\x2a"  # size 42
        b"\x00\x0d\x00\x03\x00\x00\x00\x07"  # LeaveGroup v3, correlation id 7
        b"\x00\x12streamapp-operator"  # client id
        b"\x00\x01g\x00\x00\x00\x01"  # group "g", 1 member
        b"\x00\x00\x00\x03i-1"  # member id "", group instance id "i-1"
    )
    response = b"\x00\x00\x00\x07" + b"\x00\x00\x00\x00\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x03i-1\x00\x19"
    assert parse_leave_group_response(response, correlation_id=7) == (0, {"i-1": 25})


def test_the_reconcile_releases_the_members_of_pods_a_scale_down_removed(
    cluster: TestingCluster, kafka: TestingKafka
) -> None:
    kafka.members = [GroupMember(f"flights-per-carrier-flights-per-carrier-{i}-StreamThread-1-consumer",
                                 f"flights-per-carrier-{i}-0", "h") for i in range(3)]  # fmt: skip
    world = World(cluster=cluster, kafka_for=lambda _: kafka, instances=TestingInstances())
    app = App(name="flights-per-carrier", namespace="apps", uid="uid-1", generation=1)
    result = reconcile(app, flights_spec(replicas=1), {}, world, "2026-01-01T00:00:00Z")
    assert kafka.removed_members == ["flights-per-carrier-1-0", "flights-per-carrier-2-0"]
    assert [e.reason for e in result.events if e.reason == "MembersRemoved"] == ["MembersRemoved"]


@pytest.mark.integration
def test_a_removed_static_member_gives_up_its_partitions_at_once_on_the_real_broker() -> None:
    group = topic = f"operator-test-leave-{uuid.uuid4().hex[:8]}"
    client = AdminClient({"bootstrap.servers": BOOTSTRAP})
    client.create_topics([NewTopic(topic, 4, 1)])[topic].result(30)
    consumers = [
        Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": group, "group.protocol": "consumer",
                  "group.instance.id": f"app-{i}-0"})
        for i in range(2)
    ]  # fmt: skip
    try:
        for consumer in consumers:
            consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not all(c.assignment() for c in consumers):
            for consumer in consumers:
                consumer.poll(0.2)
        assert [len(c.assignment()) for c in consumers] == [2, 2]
        consumers.pop().close()  # a static member's close is a temporary leave: it keeps its 2 partitions
        survivor = consumers[0]
        removed = ConfluentKafkaAdmin(BOOTSTRAP).remove_static_members(group, ["app-1-0", "app-7-0"])
        assert removed == ["app-1-0"]
        deadline = time.monotonic() + 20  # far below the broker's 45 s session timeout
        while time.monotonic() < deadline and len(survivor.assignment()) < 4:
            survivor.poll(0.2)
        assert len(survivor.assignment()) == 4
    finally:
        for consumer in consumers:
            consumer.close()
        client.delete_topics([topic])
