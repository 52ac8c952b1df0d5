"""A replay Job that never starts is never "spark job running": a pod that cannot be created, scheduled or pull
its image is Degraded with Kubernetes' reason and message at once, and Failed (its Job deleted) once
``spec.spark.startTimeoutSeconds`` passed (at once for an invalid image name); a replay whose StreamApp is
deleted under it fails with a clear reason once its Job ends (at once for a handover); finished replays run no
timer.

The pure decisions (``replay.job_start``) on plain dicts, and the real ``reconcile_replay`` over the fakes of
``replay_fakes``.
"""

from __future__ import annotations

from typing import Any

import kopf
import pytest
from replay_fakes import HANDOVER, NS, REPLAY, SECOND_TOPOLOGY, ReplayCluster, add_job_pod, finish_job, replay_world
from streamapp_operator.streamreplays import handlers, job_start
from streamapp_operator.streamreplays.reconcile import ReplayWorld, reconcile_replay

JOB = "flights-v2-replay"
POD = "flights-v2-replay-abc"
CREATED = "2026-01-01T00:00:10Z"
BACKFILL = {"appRef": {"name": "flights"}, "topology": SECOND_TOPOLOGY}


def _waiting(container: str, reason: str, message: str) -> dict[str, Any]:
    waiting = {"reason": reason, "message": message}
    return {"phase": "Pending", "containerStatuses": [{"name": container, "state": {"waiting": waiting}}]}


UNSCHEDULABLE = {
    "phase": "Pending",
    "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                    "message": "0/1 nodes are available: 1 Insufficient memory."}],
}  # fmt: skip
FAILED_CREATE = {
    "kind": "Event",
    "metadata": {"name": "job.1", "namespace": NS},
    "involvedObject": {"kind": "Job", "name": JOB},
    "reason": "FailedCreate",
    "lastTimestamp": "2026-01-01T00:00:12Z",
    "message": 'Error creating: pods "flights-v2-replay-x" is forbidden: error looking up service account '
    'replays/no-such-sa: serviceaccount "no-such-sa" not found',
}


# -- the pure decisions --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pods", "events", "reason", "message"),
    [
        pytest.param([{"status": _waiting("replay", "ImagePullBackOff", 'Back-off pulling image "nosuch:1"')}], [],
                     "ImagePullBackOff", 'pod p: container replay: ImagePullBackOff: Back-off pulling image "nosuch:1"',
                     id="image"),
        pytest.param([{"status": _waiting("replay", "CreateContainerConfigError", 'secret "kafka-user" not found')}],
                     [], "CreateContainerConfigError",
                     'pod p: container replay: CreateContainerConfigError: secret "kafka-user" not found', id="config"),
        pytest.param([{"status": UNSCHEDULABLE}], [], "Unschedulable",
                     "pod p cannot be scheduled: 0/1 nodes are available: 1 Insufficient memory.", id="unschedulable"),
        pytest.param([], [FAILED_CREATE], "FailedCreate",
                     "the Job cannot create its pod: " + FAILED_CREATE["message"], id="failed-create"),
    ],
)  # fmt: skip
def test_why_the_jobs_pod_does_not_start_is_kubernetes_reason_and_message(
    pods: list[dict[str, Any]], events: list[dict[str, Any]], reason: str, message: str
) -> None:
    for pod in pods:
        pod["metadata"] = {"name": "p"}
    problem = job_start.start_problem(pods, events)
    assert problem == job_start.StartProblem(reason, message)
    assert not job_start.started(pods)


def test_a_pod_being_scheduled_or_pulled_is_no_problem_and_a_started_container_is_started() -> None:
    pending = [{"metadata": {"name": "p"}, "status": _waiting("replay", "ContainerCreating", "")}]
    assert job_start.start_problem(pending, []) is None and not job_start.started(pending)
    restarted = [
        {"status": {"phase": "Pending", "containerStatuses": [{"lastState": {"terminated": {"exitCode": 1}}}]}}
    ]
    assert job_start.started(restarted) and job_start.started([{"status": {"phase": "Running"}}])


def test_the_start_verdict_waits_until_the_timeout_and_fails_an_invalid_image_name_at_once() -> None:
    pulling = job_start.StartProblem("ImagePullBackOff", "pod p: ...")
    assert job_start.start_verdict(pulling, 299, 300, JOB) == job_start.StartVerdict(None, pulling)
    failed = job_start.start_verdict(pulling, 300, 300, JOB).failed
    assert failed == ("ImagePullBackOff", f"the Spark job did not start within 300s (spec.spark.startTimeoutSeconds): "
                                          f"pod p: ...; Job {JOB} deleted")  # fmt: skip
    pending = [{"metadata": {"name": "p"}, "status": _waiting("replay", "ContainerCreating", "pulling nosuch:1")}]
    silent = job_start.start_verdict(None, 301, 300, JOB, job_start.pending_detail(pending)).failed
    timed_out = "the Spark job did not start within 300s (spec.spark.startTimeoutSeconds)"
    waiting = "pod p: container replay: ContainerCreating: pulling nosuch:1"
    assert silent == ("JobNotStarted", f"{timed_out}: no pod of the Job started ({waiting}); Job {JOB} deleted")
    bare = job_start.start_verdict(None, 301, 300, JOB).failed
    assert bare == ("JobNotStarted", f"{timed_out}: the Job has no pod; Job {JOB} deleted")
    invalid = job_start.StartProblem("InvalidImageName", "pod p: container replay: InvalidImageName: bad")
    assert job_start.start_verdict(invalid, 0, 300, JOB).failed == (
        "InvalidImageName",
        f"the Spark job cannot start: pod p: container replay: InvalidImageName: bad; Job {JOB} deleted",
    )


# -- the controller ------------------------------------------------------------------------------------------


def _at(world: ReplayWorld, spec: dict[str, Any], status: dict[str, Any], now: str) -> tuple[dict[str, Any], list[Any]]:
    result = reconcile_replay(REPLAY, spec, status, world, now)
    return {**status, **result.status}, result.events


def _conditions(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status["conditions"]}


def test_an_image_that_cannot_be_pulled_is_degraded_at_once_and_fails_after_the_start_timeout() -> None:
    world, cluster, _ = replay_world()
    spec = {**BACKFILL, "spark": {"image": "localhost/nosuch:1", "startTimeoutSeconds": 120}}
    status, _ = _at(world, spec, {}, CREATED)
    add_job_pod(cluster, POD, _waiting("replay", "ImagePullBackOff", 'Back-off pulling image "localhost/nosuch:1"'))
    status, events = _at(world, spec, status, "2026-01-01T00:00:50Z")
    degraded = _conditions(status)["Degraded"]
    why = f'pod {POD}: container replay: ImagePullBackOff: Back-off pulling image "localhost/nosuch:1"'
    assert (degraded["status"], degraded["reason"]) == ("True", "ImagePullBackOff")
    assert degraded["message"] == (f"the Spark job has not started: {why}; the replay fails if it has not started "
                                   "120s after its Job was created (spec.spark.startTimeoutSeconds)")  # fmt: skip
    assert status["phase"] == "Running" and status["progress"] == "spark job not started after 40s: ImagePullBackOff"
    assert [(e.type, e.reason) for e in events] == [("Warning", "ImagePullBackOff")]
    status, events = _at(world, spec, status, "2026-01-01T00:01:00Z")
    assert events == []  # the same cause: one event

    status, events = _at(world, spec, status, "2026-01-01T00:02:10Z")
    failed = _conditions(status)["Failed"]
    assert status["phase"] == "Failed" and (failed["status"], failed["reason"]) == ("True", "ImagePullBackOff")
    assert failed["message"] == (f"the Spark job did not start within 120s (spec.spark.startTimeoutSeconds): {why}; "
                                 f"Job {JOB} deleted")  # fmt: skip
    assert cluster.get("Job", NS, JOB) is None and "delete Job" in cluster.journal
    assert cluster.get("StreamApp", NS, "flights") is not None


def test_a_job_that_cannot_create_its_pod_names_the_job_controllers_reason() -> None:
    world, cluster, _ = replay_world()
    status, _ = _at(world, BACKFILL, {}, CREATED)
    cluster.add(FAILED_CREATE)
    status, _ = _at(world, BACKFILL, status, "2026-01-01T00:00:20Z")
    degraded = _conditions(status)["Degraded"]
    assert degraded["reason"] == "FailedCreate" and 'serviceaccount "no-such-sa" not found' in degraded["message"]
    assert "running" not in status["progress"]
    status, _ = _at(world, BACKFILL, status, "2026-01-01T00:05:10Z")  # the default timeout: 300 s
    assert status["phase"] == "Failed" and _conditions(status)["Failed"]["reason"] == "FailedCreate"


def test_an_unschedulable_pod_is_degraded_and_a_pod_that_starts_clears_it() -> None:
    world, cluster, _ = replay_world()
    status, _ = _at(world, BACKFILL, {}, CREATED)
    add_job_pod(cluster, POD, UNSCHEDULABLE)
    status, _ = _at(world, BACKFILL, status, "2026-01-01T00:00:30Z")
    assert _conditions(status)["Degraded"]["reason"] == "Unschedulable"
    add_job_pod(cluster, POD)  # scheduled after all, and running
    status, _ = _at(world, BACKFILL, status, "2026-01-01T00:01:00Z")
    assert _conditions(status)["Degraded"]["status"] == "False"
    assert status["phase"] == "Running" and status["progress"] == "spark job running 50s"


def test_an_invalid_image_name_fails_at_once() -> None:
    world, cluster, _ = replay_world()
    status, _ = _at(world, BACKFILL, {}, CREATED)
    add_job_pod(cluster, POD, _waiting("replay", "InvalidImageName", 'couldn\'t parse image name "Bad:Name"'))
    status, _ = _at(world, BACKFILL, status, "2026-01-01T00:00:15Z")
    assert status["phase"] == "Failed" and _conditions(status)["Failed"]["reason"] == "InvalidImageName"
    assert cluster.get("Job", NS, JOB) is None


def test_a_pod_still_starting_without_a_problem_is_waiting_not_running() -> None:
    world, _, _ = replay_world()
    status, _ = _at(world, BACKFILL, {}, CREATED)
    status, _ = _at(world, BACKFILL, status, "2026-01-01T00:00:20Z")
    assert status["progress"] == "spark job not started after 10s"
    assert _conditions(status)["Progressing"]["message"] == "waiting for the Job's pod to start"
    assert _conditions(status)["Degraded"]["status"] == "False"


# -- the replayed app deleted mid-job ------------------------------------------------------------------------


def _delete_app(cluster: ReplayCluster) -> None:
    del cluster.objects[("StreamApp", NS, "flights")]


def test_a_backfill_whose_app_is_deleted_waits_for_its_job_then_fails_saying_so() -> None:
    world, cluster, _ = replay_world()
    status, _ = _at(world, BACKFILL, {}, CREATED)
    add_job_pod(cluster, POD)
    _delete_app(cluster)
    status, events = _at(world, BACKFILL, status, "2026-01-01T00:00:30Z")
    degraded = _conditions(status)["Degraded"]
    gone = "StreamApp flights was deleted while the replay's Spark job ran"
    assert status["phase"] == "Running" and (degraded["status"], degraded["reason"]) == ("True", "AppMissing")
    assert degraded["message"].startswith(f"{gone}: the replay fails when Job {JOB} ends")
    assert [e.reason for e in events] == ["AppMissing"] and cluster.get("Job", NS, JOB) is not None
    finish_job(cluster)
    status, _ = _at(world, BACKFILL, status, "2026-01-01T00:01:00Z")
    failed = _conditions(status)["Failed"]
    assert status["phase"] == "Failed" and (failed["reason"], failed["status"]) == ("AppMissing", "True")
    assert failed["message"] == (f"{gone}; Job {JOB} completed: its output topics hold what it wrote, which the "
                                 "replay did not count or check without the app")  # fmt: skip


def test_a_handover_whose_app_is_deleted_mid_job_fails_at_once_and_deletes_its_job() -> None:
    world, cluster, _ = replay_world()
    status, _ = _at(world, HANDOVER, {}, CREATED)
    add_job_pod(cluster, POD)
    _delete_app(cluster)
    status, _ = _at(world, HANDOVER, status, "2026-01-01T00:00:30Z")
    failed = _conditions(status)["Failed"]
    assert status["phase"] == "Failed" and failed["reason"] == "AppMissing"
    assert failed["message"] == (f"StreamApp flights was deleted while the replay's Spark job ran: there is no app "
                                 f"to hand over from; Job {JOB} deleted")  # fmt: skip
    assert cluster.get("Job", NS, JOB) is None and cluster.get("StreamApp", NS, "flights-v2") is None


def test_a_job_that_never_started_fails_at_once_when_its_app_is_deleted() -> None:
    world, cluster, _ = replay_world()
    status, _ = _at(world, BACKFILL, {}, CREATED)
    add_job_pod(cluster, POD, UNSCHEDULABLE)
    _delete_app(cluster)
    status, _ = _at(world, BACKFILL, status, "2026-01-01T00:00:30Z")
    assert status["phase"] == "Failed" and _conditions(status)["Failed"]["message"].endswith(
        f"its pod had not started; Job {JOB} deleted"
    )


# -- timers ----------------------------------------------------------------------------------------------------


def test_only_an_unfinished_replay_has_a_timer() -> None:
    assert handlers.unfinished(status={}) and handlers.unfinished(status={"phase": "Running"})
    assert handlers.unfinished(status={"phase": "HandingOver"}) and handlers.unfinished(status={"phase": "Pending"})
    assert not handlers.unfinished(status={"phase": "Succeeded"}) and not handlers.unfinished(
        status={"phase": "Failed"}
    )


def test_the_replays_only_timer_is_filtered_by_unfinished() -> None:
    """The wiring: kopf's registry holds one timer for StreamReplays, with the filter (kopf offers no public
    listing of its handlers)."""
    timers = [h for h in kopf.get_default_registry()._spawning.get_all_handlers() if h.id == "advance_streamreplay"]
    assert [(h.when, h.interval) for h in timers] == [(handlers.unfinished, handlers.REPLAY_INTERVAL)]
    assert not [h for h in kopf.get_default_registry()._changing.get_all_handlers() if h.id == "advance_streamreplay"]
