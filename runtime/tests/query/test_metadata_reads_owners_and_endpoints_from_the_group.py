"""``assignment_of`` (``streamapp.query.metadata``) reads the group description as the stream threads do: owners from
the assignments, endpoints from the client ids, standbys placed exactly where ``plan_standbys`` puts them for the
threads (so a query finds the standby that really exists), foreign members ignored."""

from __future__ import annotations

from streamapp.kafka.types import GroupDescription, GroupMember, TopicPartition
from streamapp.processing.standby import MemberRef, plan_standbys
from streamapp.processing.task_id import TaskId
from streamapp.query.metadata import assignment_of

TOPICS = {"events": 0, "app-by-color-repartition": 1}
"""Sub-topology 0 is stateless (reads events), 1 holds the store (reads the repartition topic)."""


def member(instance: str, thread: int, *partitions: tuple[str, int], endpoint: str | None = None) -> GroupMember:
    client = f"app-{instance}-StreamThread-{thread + 1}-consumer" + (f"@{endpoint}" if endpoint else "")
    return GroupMember(client, None, tuple(TopicPartition(t, p) for t, p in partitions))


def test_owners_standbys_and_endpoints_follow_the_group_and_the_standby_plan() -> None:
    members = (
        member("a", 0, ("events", 0), ("app-by-color-repartition", 0), endpoint="10.0.0.1:8080"),
        member("a", 1, ("events", 1), ("app-by-color-repartition", 1), endpoint="10.0.0.1:8080"),
        member("b", 0, ("events", 2), ("app-by-color-repartition", 2)),
        GroupMember("rdkafka", None, (TopicPartition("events", 3),)),
    )
    assignment = assignment_of("app", GroupDescription("stable", members), TOPICS, [1], replicas=1)
    assert assignment.endpoints == {"a": "10.0.0.1:8080", "b": None}
    assert assignment.owners[TaskId(1, 2)] == MemberRef("b", 0)
    assert TaskId(0, 3) not in assignment.owners, "a member that is no stream thread owns nothing"
    stateful = {t: o for t, o in assignment.owners.items() if t.subtopology == 1}
    refs = [MemberRef("a", 0), MemberRef("a", 1), MemberRef("b", 0)]
    assert assignment.standbys == plan_standbys(stateful, refs, stateful, 1)
    assert set(assignment.standbys) == {TaskId(1, 0), TaskId(1, 1), TaskId(1, 2)}, "stateless tasks get none"
    metadata = assignment.key_metadata(TaskId(1, 2))
    assert (metadata.partition, metadata.active, metadata.standbys) == (2, ("b", None), (("a", "10.0.0.1:8080"),))
    (a, b) = assignment.instances_metadata({0: [], 1: ["counts"]})
    assert (a.instance, a.stores, a.standby_stores) == ("a", {"counts": [0, 1]}, {"counts": [2]})
    assert (b.instance, b.stores, b.standby_stores) == ("b", {"counts": [2]}, {"counts": [0, 1]})


def test_without_standby_replicas_no_standby_is_named() -> None:
    members = (member("a", 0, ("app-by-color-repartition", 0)), member("b", 0, ("app-by-color-repartition", 1)))
    assignment = assignment_of("app", GroupDescription("stable", members), TOPICS, [1], replicas=0)
    assert assignment.standbys == {}
    assert assignment.key_metadata(TaskId(1, 5)).active is None, "a task nobody owns (between assignments)"
