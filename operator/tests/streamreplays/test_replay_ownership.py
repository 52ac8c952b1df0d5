"""A StreamReplay never takes over, rewinds or deletes what it did not create (issue 9's rules, for replays).

Over the hand-written fakes (``replay_fakes``): the new version's name (never the app it replaces; an existing
StreamApp of that name only when this replay created it), the replay's ``application.id`` (no other StreamApp's,
no consumer group in use), the Job, its ConfigMap and ServiceAccount (someone else's is named, never applied
over), and what a deletion in the middle of a handover leaves running.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import kopf
import pytest
from operator_fakes import flights_spec
from replay_fakes import HANDOVER, LATEST, NS, REPLAY, finish_job, new_version_ready, reconcile_step, replay_world
from streamapp_operator import kinds
from streamapp_operator.identity import Peer
from streamapp_operator.kafka import GroupMember
from streamapp_operator.kinds import owned_by
from streamapp_operator.streamreplays import handlers, handover, resources
from streamapp_operator.streamreplays.reconcile import Replay, reconcile_replay


def _conditions(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status["conditions"]}


def _ready(cluster: Any, name: str) -> None:
    new_version_ready(cluster, name)


# -- the new version's name -------------------------------------------------------------------------------------


def test_a_handover_replay_named_like_its_app_is_refused_before_any_job_and_the_app_survives() -> None:
    """The new version's default name is the replay's: a replay named like its app would have waited on the
    app itself, then deleted the only app and reported Succeeded."""
    world, cluster, kafka = replay_world()
    same = Replay("flights", NS, "fedcba987654", 1)
    result = reconcile_replay(same, HANDOVER, {}, world, "2026-01-01T00:00:10Z")
    failed = _conditions(result.status)["Failed"]
    assert result.status["phase"] == "Failed" and failed["reason"] == "NewVersionIsTheApp"
    assert "handover.name" in failed["message"] and "flights" in failed["message"]
    assert not cluster.applied and not kafka.group_offsets
    explicit = reconcile_step(world, {**HANDOVER, "handover": {"name": "flights"}}, {})
    assert _conditions(explicit)["Failed"]["reason"] == "NewVersionIsTheApp" and not cluster.applied
    assert cluster.get("StreamApp", NS, "flights") is not None


def _someone_elses(name: str) -> dict[str, Any]:
    return {"kind": "StreamApp", "metadata": {"name": name, "namespace": NS, "uid": "theirs"}, "spec": flights_spec()}


def test_a_streamapp_named_like_the_new_version_that_this_replay_did_not_create_fails_it_before_any_job() -> None:
    world, cluster, kafka = replay_world()
    cluster.add(_someone_elses("flights-v2"))
    status = reconcile_step(world, HANDOVER, {})
    failed = _conditions(status)["Failed"]
    assert status["phase"] == "Failed" and failed["reason"] == "NewVersionNameInUse"
    assert "StreamApp flights-v2" in failed["message"] and not cluster.applied and not kafka.group_offsets


def test_a_streamapp_taking_the_new_versions_name_during_the_spark_run_is_never_adopted_rewound_or_deleted() -> None:
    world, cluster, kafka = replay_world()
    status = reconcile_step(world, HANDOVER, {})
    assert status["phase"] == "Running"
    theirs = _someone_elses("flights-v2")
    cluster.add(theirs)
    _ready(cluster, "flights-v2")
    finish_job(cluster)
    status = reconcile_step(world, HANDOVER, status)
    assert status["phase"] == "Failed" and _conditions(status)["Failed"]["reason"] == "NewVersionNameInUse"
    assert not kafka.group_offsets  # its consumer group was not set to the replay's end offsets
    assert cluster.get("StreamApp", NS, "flights") is not None  # the old version still runs
    stored = cluster.get("StreamApp", NS, "flights-v2")
    assert stored is not None and stored["spec"] == theirs["spec"] and "StreamApp" not in str(cluster.applied)


def test_a_restarted_handover_takes_the_new_version_it_created_itself() -> None:
    world, cluster, kafka = replay_world()
    status = reconcile_step(world, HANDOVER, {})
    finish_job(cluster)
    status = reconcile_step(world, HANDOVER, status)
    assert kafka.group_offsets["flights-flights-v2"] == LATEST
    # the operator restarts before it recorded createNewVersion Done: the StreamApp it made is labelled as its own
    restarted = {**status, "handover": copy.deepcopy(status["handover"][:1])}
    status = reconcile_step(world, HANDOVER, restarted)
    assert status["phase"] == "HandingOver" and status["newVersion"] == "flights-v2"
    _ready(cluster, "flights-v2")
    status = reconcile_step(world, HANDOVER, status)
    assert status["phase"] == "Succeeded" and cluster.get("StreamApp", NS, "flights") is None


# -- the replay's application.id ---------------------------------------------------------------------------------


def _peer(namespace: str, name: str, application_id: str) -> Peer:
    return Peer(namespace, name, f"uid-{name}", "2020-01-01T00:00:00Z", application_id)


def _nothing_ran(status: dict[str, Any], cluster: Any, kafka: Any) -> bool:
    return not cluster.applied and "resolvedOffsets" not in status and "per-key" not in kafka.topics


def test_a_replay_never_takes_an_application_id_another_streamapp_claims() -> None:
    """Its changelog topics and consumer group are that app's: the replay would write into its state."""
    world, cluster, kafka = replay_world()
    other = _peer("team-b", "counts", "flights-flights-v2")
    world = replace(world, peers=lambda: [_peer(NS, "flights", "flights"), other])
    status = reconcile_step(world, HANDOVER, {})
    failed = _conditions(status)["Failed"]
    assert status["phase"] == "Failed" and failed["reason"] == "ApplicationIdInUse"
    assert "StreamApp team-b/counts" in failed["message"] and _nothing_ran(status, cluster, kafka)
    # an explicit applicationId that is the replayed app's own: refused the same way, naming the app
    status = reconcile_step(world, {**HANDOVER, "applicationId": "flights"}, {})
    failed = _conditions(status)["Failed"]
    assert failed["reason"] == "ApplicationIdInUse" and f"StreamApp {NS}/flights" in failed["message"]
    assert _nothing_ran(status, cluster, kafka)


def test_a_replay_never_uses_a_consumer_group_with_members_or_committed_offsets() -> None:
    world, cluster, kafka = replay_world()
    kafka.members = [GroupMember("legacy-streams-app-StreamThread-1-consumer", None, "10.0.0.9")]
    status = reconcile_step(world, HANDOVER, {})
    failed = _conditions(status)["Failed"]
    assert status["phase"] == "Failed" and failed["reason"] == "ConsumerGroupInUse"
    assert "legacy-streams-app-StreamThread-1-consumer" in failed["message"] and _nothing_ran(status, cluster, kafka)
    kafka.members = []
    kafka.group_offsets["flights-flights-v2"] = {"flights": {0: 40, 1: 12}}  # a Kafka Streams app outside Kubernetes
    status = reconcile_step(world, HANDOVER, {})
    failed = _conditions(status)["Failed"]
    assert failed["reason"] == "ConsumerGroupInUse" and "flights[0], flights[1]" in failed["message"]
    assert _nothing_ran(status, cluster, kafka) and kafka.group_offsets["flights-flights-v2"]["flights"][0] == 40


def test_a_streamapp_claiming_the_id_during_the_spark_run_keeps_its_offsets() -> None:
    world, cluster, kafka = replay_world()
    status = reconcile_step(world, HANDOVER, {})
    finish_job(cluster)
    world = replace(world, peers=lambda: [_peer("team-b", "late", "flights-flights-v2")])
    status = reconcile_step(world, HANDOVER, status)
    assert status["phase"] == "Failed" and _conditions(status)["Failed"]["reason"] == "ApplicationIdInUse"
    assert not kafka.group_offsets and cluster.get("StreamApp", NS, "flights-v2") is None


def test_the_index_of_streamapps_is_copied_or_the_reconcile_retried_never_read_as_empty() -> None:
    assert handlers.snapshot({"u1": [_peer(NS, "a", "a")], "u2": []}) == [_peer(NS, "a", "a")]

    class Changing(dict[str, list[Peer]]):
        def values(self) -> Any:
            raise RuntimeError("dictionary changed size during iteration")

    with pytest.raises(kopf.TemporaryError):
        handlers.snapshot(Changing())


# -- the Job, its ConfigMap and ServiceAccount ---------------------------------------------------------------------

SPEC = {"appRef": {"name": "flights"}, "topology": HANDOVER["topology"]}


def _foreign(kind: str, name: str, **extra: Any) -> dict[str, Any]:
    return {"kind": kind, "metadata": {"name": name, "namespace": NS, "uid": f"their-{kind}"}, **extra}


def test_a_configmap_of_the_replays_name_made_by_someone_else_is_named_and_never_applied_over() -> None:
    world, cluster, _ = replay_world()
    theirs = _foreign("ConfigMap", "flights-v2-replay", data={"plan.yaml": "theirs"})
    cluster.add(theirs)
    result = reconcile_replay(REPLAY, SPEC, {}, world, "2026-01-01T00:00:10Z")
    degraded = _conditions(result.status)["Degraded"]
    assert result.status["phase"] == "Pending" and degraded["status"] == "True"
    assert degraded["reason"] == "ForeignObject" and "ConfigMap flights-v2-replay" in degraded["message"]
    assert "not owned by this StreamReplay" in degraded["message"]
    assert not cluster.applied and cluster.get("ConfigMap", NS, "flights-v2-replay") == theirs
    assert [e.reason for e in result.events] == ["ForeignObject"]
    again = reconcile_replay(REPLAY, SPEC, result.status, world, "2026-01-01T00:00:15Z")
    assert not again.events and not cluster.applied  # said once, still waiting
    del cluster.objects[("ConfigMap", NS, "flights-v2-replay")]  # its owner removes it: the replay goes on
    status = reconcile_step(world, SPEC, again.status)
    assert status["phase"] == "Running" and _conditions(status)["Degraded"]["status"] == "False"


def test_a_job_of_the_replays_name_made_by_someone_else_is_never_tracked_as_the_replay() -> None:
    """Its success would have been taken for the Spark job's, and a handover started on it."""
    world, cluster, kafka = replay_world()
    status = reconcile_step(world, HANDOVER, {})
    del cluster.objects[("Job", NS, "flights-v2-replay")]
    done = {"conditions": [{"type": "Complete", "status": "True"}]}
    cluster.add(_foreign("Job", "flights-v2-replay", status=done))
    status = reconcile_step(world, HANDOVER, status)
    assert status["phase"] == "Running" and "Job flights-v2-replay" in _conditions(status)["Degraded"]["message"]
    assert not kafka.group_offsets and cluster.get("StreamApp", NS, "flights-v2") is None


def test_a_service_account_named_like_the_replays_that_the_operator_did_not_make_is_never_used() -> None:
    world, cluster, _ = replay_world()
    cluster.add(_foreign("ServiceAccount", "streamapp-replay"))
    status = reconcile_step(world, SPEC, {})
    degraded = _conditions(status)["Degraded"]
    assert degraded["reason"] == "ForeignObject" and "ServiceAccount streamapp-replay" in degraded["message"]
    assert not cluster.applied
    # spark.mode kubernetes runs as the ServiceAccount the spec names: the shared one is not used
    spark = {"mode": "kubernetes", "serviceAccountName": "spark"}
    status = reconcile_step(world, {**SPEC, "spark": spark}, {})
    assert status["phase"] == "Running" and [m["kind"] for m in cluster.applied] == ["ConfigMap", "Job"]


def test_only_a_pod_the_replays_job_owns_says_what_the_replay_wrote() -> None:
    world, cluster, _ = replay_world()
    status = reconcile_step(world, SPEC, {})
    cluster.add_pod(NS, "impostor", {"job-name": "flights-v2-replay"}, {})
    cluster.logs["impostor"] = '{"records_read": {"flights": 1}, "records_written": {"per-key": 999}, "seconds": {}}'
    cluster.set_status("Job", NS, "flights-v2-replay", {"conditions": [{"type": "Complete", "status": "True"}]})
    status = reconcile_step(world, SPEC, status)
    assert status["phase"] == "Succeeded" and status["recordsWritten"] == 0  # the done markers: none


# -- deleting a StreamReplay -------------------------------------------------------------------------------------


def _handing_over() -> tuple[Any, Any, dict[str, Any]]:
    world, cluster, _ = replay_world()
    status = reconcile_step(world, HANDOVER, {})
    finish_job(cluster)
    status = reconcile_step(world, HANDOVER, status)
    assert handover.next_step(status["handover"]) == "awaitCaughtUp"
    return world, cluster, status


def _collect_garbage(cluster: Any, owner_uid: str) -> None:
    """What the garbage collector does once the StreamReplay is gone: its dependents go."""
    for key, obj in list(cluster.objects.items()):
        if owned_by(obj, owner_uid):
            del cluster.objects[key]


def test_deleting_a_replay_in_the_middle_of_the_handover_leaves_both_versions_running_and_says_so() -> None:
    _, cluster, status = _handing_over()
    _collect_garbage(cluster, REPLAY.uid)
    assert cluster.get("Job", NS, "flights-v2-replay") is None
    assert cluster.get("StreamApp", NS, "flights") is not None and cluster.get("StreamApp", NS, "flights-v2")
    kind, reason, message = handover.deletion_event("flights", status)
    assert (kind, reason) == ("Warning", "HandoverAbandoned")
    assert "StreamApp flights (old version) and flights-v2 both keep running" in message


def test_deleting_a_replay_before_the_new_version_exists_leaves_the_old_one_running_and_names_what_is_left() -> None:
    started = {"phase": "HandingOver", "applicationId": "flights-flights-v2",
               "handover": [{"name": "setGroupOffsets", "state": "Done"}]}  # fmt: skip
    kind, reason, message = handover.deletion_event("flights", started)
    assert (kind, reason) == ("Warning", "HandoverAbandoned") and "StreamApp flights keeps running" in message
    assert "flights-flights-v2-*-changelog" in message
    assert "StreamApp flights is untouched" in handover.deletion_event("flights", {"phase": "Running"})[2]


def test_the_old_version_is_deleted_only_while_the_new_one_exists_and_is_caught_up() -> None:
    """A restart may resume removeOldVersion long after awaitCaughtUp: it checks again, so that a deletion or a
    failure of the new version in between never leaves both versions stopped."""
    world, cluster, status = _handing_over()
    _ready(cluster, "flights-v2")
    steps = [{"name": n, "state": "Done"} for n in ("setGroupOffsets", "createNewVersion", "awaitCaughtUp")]
    resumed = {**status, "handover": [*steps, {"name": "removeOldVersion", "state": "Started"}]}
    cluster.set_status("StreamApp", NS, "flights-v2", {"conditions": [{"type": "Ready", "status": "False"}]})
    status = reconcile_step(world, HANDOVER, resumed)
    assert status["phase"] == "HandingOver" and cluster.get("StreamApp", NS, "flights") is not None
    assert "stays until the new version is caught up" in _conditions(status)["Progressing"]["message"]
    new = cluster.get("StreamApp", NS, "flights-v2")
    del cluster.objects[("StreamApp", NS, "flights-v2")]
    gone = reconcile_step(world, HANDOVER, resumed)
    assert gone["phase"] == "Failed" and _conditions(gone)["Failed"]["reason"] == "NewVersionMissing"
    assert cluster.get("StreamApp", NS, "flights") is not None
    cluster.add({**new, "kind": "StreamApp"})
    _ready(cluster, "flights-v2")
    status = reconcile_step(world, HANDOVER, resumed)
    assert status["phase"] == "Succeeded" and cluster.get("StreamApp", NS, "flights") is None


def test_a_handover_removes_only_the_streamapp_it_replayed_not_one_made_again_under_its_name() -> None:
    world, cluster, status = _handing_over()
    assert status["appUid"] == "app-uid"
    del cluster.objects[("StreamApp", NS, "flights")]
    cluster.add(_someone_elses("flights"))  # a new app under the old name, while the new version caught up
    _ready(cluster, "flights-v2")
    status = reconcile_step(world, HANDOVER, status)
    assert status["phase"] == "Succeeded" and "left untouched" in status["handover"][-1]["message"]
    stored = cluster.get("StreamApp", NS, "flights")
    assert stored is not None and stored["metadata"]["uid"] == "theirs"


# -- a reused StreamReplay name (issue 19, D-H1) -----------------------------------------------------------------


def _labelled_by(name: str, replay: str, replay_uid: str | None, uid: str = "stale") -> dict[str, Any]:
    annotations = {kinds.REPLAY_UID_ANNOTATION: replay_uid} if replay_uid is not None else {}
    metadata = {"name": name, "namespace": NS, "uid": uid, "labels": {resources.REPLAY_LABEL: replay},
                "annotations": annotations}  # fmt: skip
    return {"kind": "StreamApp", "metadata": metadata, "spec": flights_spec()}


def test_a_streamapp_with_the_replays_name_label_is_its_new_version_only_with_its_uid_too() -> None:
    ours = _labelled_by("flights-v2", "flights-v2", REPLAY.uid, uid="v2-uid")
    assert handover.made_by(ours, "flights-v2", REPLAY.uid)
    assert handover.made_by(ours, "flights-v2", REPLAY.uid, recorded_uid="v2-uid")
    assert not handover.made_by(ours, "flights-v2", REPLAY.uid, recorded_uid="an-earlier-one")  # made again
    assert not handover.made_by(ours, "flights-v2", "a-later-replay-of-that-name")
    assert not handover.made_by(_labelled_by("flights-v2", "flights-v2", None), "flights-v2", REPLAY.uid)
    earlier = _labelled_by("flights-v2", "flights-v2", "earlier-uid")
    reason, message = handover.new_version_conflict(
        "flights-v2", "flights", earlier, handover.Claimant("flights-v2", REPLAY.uid)
    ) or (
        "",
        "",
    )
    assert reason == "NewVersionNameInUse" and "StreamApp flights-v2" in message
    assert "earlier StreamReplay named flights-v2 (uid earlier-uid)" in message and "left untouched" in message
    unannotated = _labelled_by("flights-v2", "flights-v2", None)
    message = (
        handover.new_version_conflict("flights-v2", "flights", unannotated, handover.Claimant("flights-v2", REPLAY.uid))
        or ("", "")
    )[1]
    assert f"no annotation {kinds.REPLAY_UID_ANNOTATION}" in message


def test_the_new_version_a_replay_creates_carries_its_uid_and_is_not_owned_by_it() -> None:
    """Not owned: deleting the StreamReplay must leave the new version running (``deletion_event``)."""
    app = {"metadata": {"name": "flights", "namespace": NS, "uid": "u"}, "spec": flights_spec()}
    new = handover.new_version(
        app, handover.NewVersion("flights-v2", "flights-flights-v2", {}), "flights-v2", REPLAY.uid
    )
    assert new["metadata"]["annotations"][kinds.REPLAY_UID_ANNOTATION] == REPLAY.uid
    assert (
        new["metadata"]["labels"][resources.REPLAY_LABEL] == "flights-v2" and "ownerReferences" not in new["metadata"]
    )


def test_a_reused_replay_name_never_adopts_rewinds_or_deletes_the_earlier_replays_new_version_or_the_app() -> None:
    """Audit R32: a replay deleted in the middle of its handover, then a new one of the same name and
    handover.name with another topology: it must not take the first one's new version for its own, skip
    setting its offsets, pass awaitCaughtUp on it and delete the app it replays."""
    world, cluster, status = _handing_over()
    first = cluster.get("StreamApp", NS, "flights-v2")
    assert first is not None and status["newVersionUid"] == first["metadata"]["uid"]
    _ready(cluster, "flights-v2")
    _collect_garbage(cluster, REPLAY.uid)  # the first replay is deleted in the middle of its handover
    cluster.applied.clear()
    again = Replay(REPLAY.name, NS, "fedcba9876543210", 1)  # same name, a new uid
    spec = {**HANDOVER, "applicationId": "flights-again"}
    result = reconcile_replay(again, spec, {}, world, "2026-01-01T00:01:00Z")
    failed = _conditions(result.status)["Failed"]
    assert result.status["phase"] == "Failed" and failed["reason"] == "NewVersionNameInUse"
    assert "StreamApp flights-v2" in failed["message"] and f"uid {REPLAY.uid}" in failed["message"]
    assert not cluster.applied and cluster.get("StreamApp", NS, "flights") is not None
    stored = cluster.get("StreamApp", NS, "flights-v2")
    assert stored is not None and (stored["metadata"], stored["spec"]) == (first["metadata"], first["spec"])


def test_a_stale_new_version_appearing_during_a_reused_names_spark_run_is_never_adopted_rewound_or_deleted() -> None:
    world, cluster, kafka = replay_world()
    again = Replay(REPLAY.name, NS, "fedcba9876543210", 1)
    status = reconcile_replay(again, HANDOVER, {}, world, "2026-01-01T00:00:10Z").status
    assert status["phase"] == "Running"
    cluster.add(_labelled_by("flights-v2", REPLAY.name, REPLAY.uid))  # the earlier replay's new version
    _ready(cluster, "flights-v2")
    finish_job(cluster)
    status = {**status, **reconcile_replay(again, HANDOVER, status, world, "2026-01-01T00:00:20Z").status}
    assert status["phase"] == "Failed" and _conditions(status)["Failed"]["reason"] == "NewVersionNameInUse"
    assert not kafka.group_offsets and cluster.get("StreamApp", NS, "flights") is not None
    assert "StreamApp" not in str(cluster.applied)


def test_a_new_version_deleted_and_made_again_under_its_name_is_not_the_one_the_replay_created() -> None:
    world, cluster, status = _handing_over()
    made = cluster.get("StreamApp", NS, "flights-v2")
    del cluster.objects[("StreamApp", NS, "flights-v2")]
    cluster.add({**made, "kind": "StreamApp", "metadata": {**made["metadata"], "uid": "made-again"}})
    _ready(cluster, "flights-v2")
    status = reconcile_step(world, HANDOVER, status)
    failed = _conditions(status)["Failed"]
    assert status["phase"] == "Failed" and failed["reason"] == "NewVersionNameInUse"
    assert "made-again" in failed["message"] and cluster.get("StreamApp", NS, "flights") is not None


def test_a_restart_between_creating_the_new_version_and_recording_it_resumes_with_it() -> None:
    """The uid annotation, not the status, says whose it is: a restart that lost ``newVersionUid`` resumes."""
    world, cluster, status = _handing_over()
    made = cluster.get("StreamApp", NS, "flights-v2")
    assert made is not None
    lost = {k: v for k, v in status.items() if k != "newVersionUid"}
    restarted = {**lost, "handover": copy.deepcopy(status["handover"][:1])}
    status = reconcile_step(world, HANDOVER, restarted)
    assert status["phase"] == "HandingOver" and status["newVersionUid"] == made["metadata"]["uid"]
    _ready(cluster, "flights-v2")
    status = reconcile_step(world, HANDOVER, status)
    assert status["phase"] == "Succeeded" and cluster.get("StreamApp", NS, "flights") is None


def test_a_handover_started_by_an_operator_before_the_uid_annotation_resumes_with_its_own_new_version() -> None:
    """An upgrade in the middle of a handover: the new version carries only the name label, and this replay's own
    status says it created it (createNewVersion Done, no newVersionUid); a reused name's replay never has that."""
    world, cluster, status = _handing_over()
    made = cluster.get("StreamApp", NS, "flights-v2")
    assert made is not None
    del made["metadata"]["annotations"]
    cluster.objects[("StreamApp", NS, "flights-v2")] = made
    before = {k: v for k, v in status.items() if k != "newVersionUid"}
    _ready(cluster, "flights-v2")
    resumed = reconcile_step(world, HANDOVER, before)
    assert resumed["phase"] == "Succeeded" and cluster.get("StreamApp", NS, "flights") is None
    assert not handover.made_by(made, "flights-v2", REPLAY.uid)  # without that status: not its own


def test_a_new_version_without_a_ready_pod_is_not_caught_up_though_ready_with_no_lag() -> None:
    """A StreamApp of 0 pods is Ready with lag 0: deleting the old version then would leave nothing running."""
    ready = [{"type": "Ready", "status": "True"}]
    empty = {"status": {"conditions": ready, "lag": 0, "readyReplicas": 0, "ready": "0/0"}}
    running = {"status": {"conditions": ready, "lag": 0, "readyReplicas": 1, "ready": "1/1"}}
    assert handover.caught_up(empty, 0) == (False, "the new version has no ready pod (0/0 pods)")
    assert handover.caught_up(running, 0)[0]
