"""An in-flight StreamReplay's ``application.id`` is claimed (issue 19: a new StreamApp could take it, found only
when the handover set its offsets): a StreamApp created after the replay is refused by name, as between two
StreamApps, while the new version the replay's own handover creates runs under it, and a finished replay claims
nothing. The replay, for its part, no longer yields to a StreamApp created after it, unless that one has members
in the group."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from operator_fakes import TestingCluster, TestingInstances, TestingKafka, flights_spec
from replay_fakes import HANDOVER, NS, finish_job, reconcile_step, replay_world
from streamapp_operator.identity import Peer, claims_of_others, identity_conflicts, replay_peer
from streamapp_operator.kafka import GroupMember
from streamapp_operator.kinds import REPLAY_UID_ANNOTATION
from streamapp_operator.streamapps.handlers import replay_application_ids
from streamapp_operator.streamapps.reconcile import App, World, reconcile
from streamapp_operator.streamreplays.reconcile import Replay

REPLAY_META = {
    "namespace": "team-r",
    "name": "flights-v2",
    "uid": "uid-replay",
    "creationTimestamp": "2026-01-01T00:00:00Z",
}
REPLAYING = {"phase": "Running", "applicationId": "flights-flights-v2"}
LATER = "2026-01-02T00:00:00Z"


def _reconcile_app(annotations: dict[str, str], peers: list[Peer]) -> dict[str, Any]:
    app = App("flights-v2", "team-r", "uid-app", 1, LATER, annotations)
    world = World(
        cluster=TestingCluster(), kafka_for=lambda _: TestingKafka(), instances=TestingInstances(), peers=lambda: peers
    )
    status = reconcile(app, flights_spec(applicationId="flights-flights-v2"), {}, world, LATER).status
    return next(c for c in status["conditions"] if c["type"] == "Degraded")


# -- the claim --------------------------------------------------------------------------------------------------


def test_a_replay_in_flight_claims_the_application_id_in_its_status_and_a_finished_one_none() -> None:
    claim = replay_peer(REPLAY_META, REPLAYING)
    assert claim == Peer(
        "team-r", "flights-v2", "uid-replay", "2026-01-01T00:00:00Z", "flights-flights-v2", "StreamReplay"
    )
    for status in [{**REPLAYING, "phase": "Succeeded"}, {**REPLAYING, "phase": "Failed"}, {"phase": "Pending"}]:
        assert replay_peer(REPLAY_META, status) is None
    assert replay_application_ids(meta=REPLAY_META, status={**REPLAYING, "phase": "HandingOver"}) == {
        "uid-replay": claim
    }


def test_a_streamapp_created_after_the_replay_is_refused_naming_it_and_one_created_before_keeps_its_id() -> None:
    claim = replay_peer(REPLAY_META, REPLAYING)
    assert claim is not None
    later = Peer("team-a", "late", "uid-late", LATER, "flights-flights-v2")
    problems = identity_conflicts(later, [claim])
    assert [p.reason for p in problems] == ["ApplicationIdInUse"]
    assert "already used by StreamReplay team-r/flights-v2 (a replay in flight" in problems[0].message
    earlier = Peer("team-a", "early", "uid-early", "2025-12-31T00:00:00Z", "flights-flights-v2")
    assert identity_conflicts(earlier, [claim]) == []


def test_the_reconcile_refuses_a_new_streamapp_but_not_the_handovers_own_new_version() -> None:
    claim = replay_peer(REPLAY_META, REPLAYING)
    assert claim is not None
    stranger = _reconcile_app({}, [claim])
    assert stranger["reason"] == "ApplicationIdInUse" and "StreamReplay team-r/flights-v2" in stranger["message"]
    assert claims_of_others([claim], {REPLAY_UID_ANNOTATION: "uid-replay"}) == []
    assert _reconcile_app({REPLAY_UID_ANNOTATION: "uid-replay"}, [claim])["reason"] != "ApplicationIdInUse"
    # another replay's uid does not exempt it
    assert _reconcile_app({REPLAY_UID_ANNOTATION: "uid-other"}, [claim])["reason"] == "ApplicationIdInUse"


# -- the replay's side -------------------------------------------------------------------------------------------


def test_a_replay_goes_on_past_a_streamapp_created_after_it_but_not_past_its_members() -> None:
    """The newer app is refused on its side; one that ran before the replay's id was claimed shows in the group."""
    world, cluster, kafka = replay_world()
    replay = Replay("flights-v2", NS, "0123456789ab", 1, "2026-01-01T00:00:00Z")
    world = replace(world, peers=lambda: [Peer("team-b", "late", "uid-late", LATER, "flights-flights-v2")])
    status = reconcile_step(world, HANDOVER, {}, replay)
    assert status["phase"] == "Running"
    finish_job(cluster)
    kafka.members = [GroupMember("flights-flights-v2-late-0-StreamThread-1-consumer", None, "10.0.0.9")]
    failed = reconcile_step(world, HANDOVER, status, replay)
    assert failed["phase"] == "Failed" and not kafka.group_offsets
    assert next(c for c in failed["conditions"] if c["type"] == "Failed")["reason"] == "ConsumerGroupInUse"
    kafka.members = []
    status = reconcile_step(world, HANDOVER, status, replay)
    assert status["phase"] == "HandingOver" and kafka.group_offsets["flights-flights-v2"]
