"""The replay's Job as the API server shows it: its pods, the end of its pod's log, the Job controller's events,
and the two actions on it: deleting a Job that will never run, and settling a replay whose app was deleted while
its Job ran. Reads that only show progress are best effort (an unreadable log leaves progress out).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from streamapp.replay.progress import ReplayProgress

from streamapp_operator.k8s import KubernetesUnavailable
from streamapp_operator.kinds import owned_by
from streamapp_operator.outcomes import Problem
from streamapp_operator.steps import Blocked, Failed, StepOutcome
from streamapp_operator.streamreplays import job_manifests, job_reports, job_start
from streamapp_operator.streamreplays.context import (
    APP_MISSING,
    PROGRESS_LOG_LINES,
    Replay,
    ReplayCluster,
    ReplayContext,
)
from streamapp_operator.streamreplays.resources import ReplayMode, StreamReplaySpec


def app_deleted_mid_job(
    cluster: ReplayCluster, replay: Replay, spec: StreamReplaySpec, status: Mapping[str, Any]
) -> StepOutcome:
    """The replayed StreamApp is gone while the replay's Job exists (``phase: Running``). A handover has nothing
    left to hand over from, and a Job whose pod never started has done nothing: either fails at once, its Job
    deleted. A running backfill's job is left to end (its output keeps what it commits), then fails: without the
    app there is no Kafka connection to count or check what it wrote. Halts Failed, or Blocked while it
    waits (``Degraded``, reason ``AppMissing``)."""
    app, name = spec.app_ref.name, status.get("job") or job_manifests.job_name(replay.name)
    job = cluster.get("Job", replay.namespace, name)
    state = job_reports.job_state(job)
    gone = f"StreamApp {app} was deleted while the replay's Spark job ran"
    if state.phase == "Succeeded":
        unchecked = "its output topics hold what it wrote, which the replay did not count or check without the app"
        return StepOutcome(halt=Failed(APP_MISSING, f"{gone}; Job {name} completed: {unchecked}"))
    if state.phase == "Failed":
        return StepOutcome(halt=Failed(APP_MISSING, f"{gone}; Job {name} failed: {state.message}"))
    if spec.mode == ReplayMode.HANDOVER or not job_start.started(owned_pods(cluster, replay.namespace, name, job)):
        delete_job(cluster, replay, job)
        why = "there is no app to hand over from" if spec.mode == ReplayMode.HANDOVER else "its pod had not started"
        return StepOutcome(halt=Failed(APP_MISSING, f"{gone}: {why}; Job {name} deleted"))
    then = "its output keeps what it commits; delete the StreamReplay to stop it now"
    return StepOutcome(
        status={"progress": "app deleted: waiting for the Spark job to end"},
        halt=Blocked(Problem(APP_MISSING, f"{gone}: the replay fails when Job {name} ends ({then})")),
    )


def progress_report(ctx: ReplayContext, job: Mapping[str, Any] | None) -> ReplayProgress | None:
    """The Spark job's last progress report; None when there is none yet or the API cannot say (progress is
    shown, never a reason to fail or hold up the replay)."""
    try:
        return job_reports.latest_progress(pod_log(ctx, job, PROGRESS_LOG_LINES))
    except KubernetesUnavailable:
        return None


def job_pods(ctx: ReplayContext, job: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The pods of the Job ``status.job`` names, oldest first (:func:`owned_pods`)."""
    return owned_pods(ctx.world.cluster, ctx.replay.namespace, ctx.status["job"], job)


def owned_pods(
    cluster: ReplayCluster, namespace: str, job_name: str, job: Mapping[str, Any] | None
) -> list[dict[str, Any]]:
    """The replay Job's pods, oldest first (pods the Job owns: a pod merely labelled like it says nothing of
    the replay)."""
    uid = str(((job or {}).get("metadata") or {}).get("uid") or "")
    pods = [pod for pod in cluster.list_pods(namespace, f"job-name={job_name}") if uid and owned_by(pod, uid)]
    return sorted(pods, key=lambda pod: str(pod.get("metadata", {}).get("creationTimestamp", "")))


def pod_log(ctx: ReplayContext, job: Mapping[str, Any] | None, tail_lines: int = 30) -> str:
    """The end of the log of the replay Job's last pod; "" when there is none or the API cannot serve it (best
    effort)."""
    pods = job_pods(ctx, job)
    if not pods:
        return ""
    try:
        return ctx.world.cluster.read_pod_log(ctx.replay.namespace, pods[-1]["metadata"]["name"], tail_lines)
    except KubernetesUnavailable:
        return ""


def job_events(ctx: ReplayContext, job: str) -> list[dict[str, Any]]:
    """The Job controller's ``FailedCreate`` events of the replay's Job ([] when they cannot be listed: the
    timeout still ends the wait)."""
    try:
        return ctx.world.cluster.list_events(ctx.replay.namespace, "Job", job, job_start.FAILED_CREATE)
    except KubernetesUnavailable:
        return []


def delete_job(cluster: ReplayCluster, replay: Replay, job: Mapping[str, Any] | None) -> None:
    """Delete the replay's own Job (its pods with it): one that will never run is not left pending for ever."""
    if job is not None and owned_by(job, replay.uid):
        cluster.delete("Job", replay.namespace, job["metadata"]["name"], job["metadata"]["uid"])
