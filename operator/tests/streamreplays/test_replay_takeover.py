"""``handover.outputs: TakeOver``: the old version is stopped (scaled to 0, its replicas recorded first) before the
range is resolved, the range ends at its committed offsets, the replay's Job writes the new version's state and new
outputs but not the taken-over topics, the new version writes them from the switch on, and a failure before the
new version exists scales the old one back. Over the hand-written fakes; the records across the switch, per key,
on the broker with the real runtime and Spark: ``test_replay_takeover_on_kafka.py``."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from operator_fakes import flights_spec
from replay_fakes import NS, REPLAY, SECOND_TOPOLOGY, finish_job, new_version_ready, reconcile_step, replay_world
from streamapp_operator.kafka import GroupLag, GroupMember
from streamapp_operator.streamreplays import takeover
from streamapp_operator.streamreplays.reconcile import reconcile_replay

SHARED = "departures-per-carrier"  # what the running app writes


def _topology() -> dict[str, Any]:
    topology = copy.deepcopy(SECOND_TOPOLOGY)
    topology["nodes"][-1]["topic"] = SHARED
    topology["nodes"].append(
        {"name": "new-out", "type": "sink", "input": "changes", "topic": "per-key-v2", "keySerde": "string",
         "valueSerde": "long"}
    )  # fmt: skip
    return topology


TAKE_OVER = {"appRef": {"name": "flights"}, "mode": "handover", "topology": _topology(),
             "handover": {"outputs": "TakeOver"}}  # fmt: skip


def _old_group_members(kafka: Any, members: list[GroupMember]) -> None:
    """The old version's group (``flights``) has ``members``; the replay's own has none."""
    kafka.group_lag = lambda group, topics: GroupLag(
        lag=0, state="Stable", members=tuple(members) if group == "flights" else ()
    )


def _stopping() -> tuple[Any, Any, Any, dict[str, Any]]:
    world, cluster, kafka = replay_world()
    kafka.topics[SHARED] = 2
    _old_group_members(kafka, [GroupMember("flights-0-thread-0", "flights-0", "127.0.100.2")])
    cluster.set_status("StreamApp", NS, "flights", {"replicas": 2, "applicationId": "flights"})
    status = reconcile_step(world, TAKE_OVER, {})
    return world, cluster, kafka, status


def _stopped(cluster: Any, kafka: Any) -> None:
    cluster.set_status("StreamApp", NS, "flights", {"replicas": 0, "applicationId": "flights"})
    _old_group_members(kafka, [])
    kafka.group_offsets["flights"] = {"flights": {0: 60}}  # partition 1: nothing committed (its earliest: 5)


def test_the_old_version_is_scaled_to_zero_first_its_replicas_recorded_and_awaited() -> None:
    _, cluster, _, status = _stopping()
    assert cluster.get("StreamApp", NS, "flights")["spec"]["replicas"] == 0
    assert status["takeOver"] == {"replicas": 2, "applicationId": "flights", "outputs": [SHARED], "state": "Stopping"}
    assert cluster.replay_status_writes[0] == {"takeOver": {**status["takeOver"]}}  # the intent, before the scale
    assert cluster.journal.index("replay status") < cluster.journal.index("scale StreamApp flights 0")
    assert "resolvedOffsets" not in status and cluster.get("Job", NS, "flights-v2-replay") is None
    assert status["phase"] == "Pending" and "the old version is stopping: 2 pod(s) left" in status["progress"]


def test_the_range_ends_where_the_old_version_stopped_and_the_job_leaves_its_topics_alone() -> None:
    world, cluster, kafka, status = _stopping()
    _stopped(cluster, kafka)
    status = reconcile_step(world, TAKE_OVER, status)
    assert status["takeOver"]["state"] == "Stopped"
    assert status["resolvedOffsets"]["to"] == {"flights": {"0": 60, "1": 5}}  # not the latest (100, 90)
    plan = yaml.safe_load(cluster.objects[("ConfigMap", NS, "flights-v2-replay")]["data"]["plan.yaml"])
    sinks = [n["topic"] for n in plan["topology"]["nodes"] if n["type"] == "sink"]
    assert sinks == ["per-key-v2"] and set(plan["partitions"]) == {"per-key-v2"}
    assert "per-key-v2" in kafka.topics  # the new output is created; the taken-over one is the old version's

    finish_job(cluster)
    status = reconcile_step(world, TAKE_OVER, status)
    new = cluster.get("StreamApp", NS, "flights-v2")
    assert new is not None and SHARED in [n.get("topic") for n in new["spec"]["topology"]["nodes"]]
    # the old version's replicas as recorded before its stop, not its spec's 0 of now
    assert new["spec"]["replicas"] == 2 == status["takeOver"]["replicas"]
    assert kafka.group_offsets["flights-flights-v2"] == {"flights": {0: 60, 1: 5}}  # it starts at the switch
    new_version_ready(cluster)
    status = reconcile_step(world, TAKE_OVER, status)
    assert status["phase"] == "Succeeded" and cluster.get("StreamApp", NS, "flights") is None


def test_a_failure_before_the_new_version_exists_scales_the_old_version_back() -> None:
    world, cluster, kafka, status = _stopping()
    _stopped(cluster, kafka)
    status = reconcile_step(world, TAKE_OVER, status)
    finish_job(cluster, "Failed")
    result = reconcile_replay(REPLAY, TAKE_OVER, status, world, "2026-01-01T00:00:20Z")
    status = {**status, **result.status}
    assert status["phase"] == "Failed" and status["takeOver"]["state"] == "Restored"
    assert cluster.get("StreamApp", NS, "flights")["spec"]["replicas"] == 2
    assert [e.reason for e in result.events if e.reason == "OldVersionRestored"] == ["OldVersionRestored"]


def test_an_autoscaled_app_is_refused_before_it_is_touched() -> None:
    world, cluster, _ = replay_world()
    cluster.objects[("StreamApp", NS, "flights")]["spec"]["autoscaling"] = {
        "maxReplicas": 4,
        "target": {"lagPerTask": 10},
    }
    status = reconcile_step(world, TAKE_OVER, {})
    failed = {c["type"]: c for c in status["conditions"]}["Failed"]
    assert status["phase"] == "Failed" and failed["reason"] == "TakeOverUnsupported"
    assert cluster.get("StreamApp", NS, "flights")["spec"]["replicas"] == flights_spec()["replicas"]


def test_keep_leaves_the_old_version_stopped() -> None:
    spec = {**TAKE_OVER, "handover": {"outputs": "TakeOver", "oldVersion": "Keep"}}
    world, cluster, kafka = replay_world()
    kafka.topics[SHARED] = 2
    status = reconcile_step(world, spec, {})
    _stopped(cluster, kafka)
    status = reconcile_step(world, spec, status)
    finish_job(cluster)
    status = reconcile_step(world, spec, status)
    new_version_ready(cluster)
    status = reconcile_step(world, spec, status)
    assert status["phase"] == "Succeeded" and cluster.get("StreamApp", NS, "flights")["spec"]["replicas"] == 0
    assert "kept at 0 replicas" in status["handover"][-1]["message"]


def test_the_taken_over_sinks_go_and_nothing_else_changes() -> None:
    pruned = takeover.without_sinks(_topology(), [SHARED])
    assert [n["name"] for n in pruned["nodes"]] == [n["name"] for n in _topology()["nodes"] if n["name"] != "out"]
    assert pruned["stores"] == _topology()["stores"]


@pytest.mark.parametrize(
    ("status", "replicas"),
    [
        ({}, None),
        ({"takeOver": {"replicas": 3, "state": "Stopping"}}, 3),
        ({"takeOver": {"replicas": 3, "state": "Restored"}}, None),
        (
            {
                "takeOver": {"replicas": 3, "state": "Stopped"},
                "handover": [{"name": "createNewVersion", "state": "Started"}],
            },
            None,
        ),
    ],
)
def test_the_old_version_is_scaled_back_only_while_no_new_version_writes_its_topics(
    status: dict[str, Any], replicas: int | None
) -> None:
    assert takeover.replicas_to_restore(status) == replicas


def test_the_switch_is_each_partitions_committed_offset_else_its_earliest() -> None:
    assert takeover.switch_offsets({"t": {0: 7}}, {"t": {0: 0, 1: 3}}) == {"t": {0: 7, 1: 3}}


def test_outputs_has_no_schema_default_so_an_operator_of_the_version_before_keeps_parsing_replays() -> None:
    """A default would be added by the API server to every StreamReplay it serves, also to an operator whose models
    forbid unknown fields (the version before this field): every replay would fail InvalidSpec while the CRD is
    upgraded before the operator (seen on the shared stack when this field had a default)."""
    from streamapp_operator.crdgen import build_replay_crd

    schema = build_replay_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    outputs = schema["properties"]["spec"]["properties"]["handover"]["properties"]["outputs"]
    assert "default" not in outputs and outputs["enum"] == ["New", "TakeOver"]
