"""The steps around the Spark Job: the output topics created, the Job launched over the recorded range (none for
an empty range), and the Job tracked to its end: its progress from its pod's log and done markers, a pod that never
starts failed after ``spec.spark.startTimeoutSeconds``, a failed Job failing the replay with its pod's error.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from streamapp_operator.connection import security_config
from streamapp_operator.k8s import KubernetesUnavailable
from streamapp_operator.kafka import KafkaUnavailable, TopicSpec
from streamapp_operator.outcomes import Event, Problem
from streamapp_operator.steps import Blocked, Failed, StepOutcome, Waiting
from streamapp_operator.streamreplays import (
    app_code,
    dead_letters,
    job_manifests,
    job_reports,
    job_start,
    offset_range,
    replay_plan,
)
from streamapp_operator.streamreplays.context import (
    ReplayContext,
    empty_range,
    markers_topic,
    output_topics,
    plan_topology,
    seconds_since,
)
from streamapp_operator.streamreplays.jobs import delete_job, job_events, job_pods, pod_log, progress_report
from streamapp_operator.streamreplays.resources import Phase, ReplayMode

#: What ``status`` records of the range before the Job exists (the intent, written at once).
_INTENT = ("resolvedOffsets", "recordsRead", "applicationId", "replayId", "appUid", "deadLetterTopic")


def create_sink_topics(ctx: ReplayContext) -> StepOutcome:
    """The topics the replay's topology writes, when missing (as many partitions as the input topics; retention
    from the inputs'), and the replay's own dead-letter topic when the app names one."""
    if ctx.status.get("job") or ctx.status.get("phase") != Phase.PENDING.value:
        return StepOutcome()
    if empty_range(ctx) and ctx.spec.mode == ReplayMode.BACKFILL:  # nothing to write: no topic either
        return StepOutcome()
    assert ctx.kafka is not None and ctx.app_spec is not None
    taken = (ctx.status.get("takeOver") or {}).get("outputs") or []
    sinks = [t for t in ctx.description.sink_topics() if t not in taken]  # the old version's exist
    existing = ctx.kafka.partition_counts(sinks)
    resolved = ctx.status["resolvedOffsets"]["to"]
    partitions = max((len(parts) for parts in resolved.values()), default=1)
    retention = replay_plan.sink_retention_ms(ctx.kafka.retention_ms(resolved))
    config = {} if retention is None else {"retention.ms": str(retention)}
    missing = [TopicSpec(t, partitions, config) for t in sinks if t not in existing]
    dlq = dead_letters.topic(ctx.app_spec.config, ctx.status["applicationId"])
    if dlq is not None and not ctx.kafka.partition_counts([dlq]):  # the replay's own, never the live app's
        live = ctx.kafka.partition_counts([dead_letters.live_topic(ctx.app_spec.config) or ""])
        missing.append(TopicSpec(dlq, next(iter(live.values()), partitions), config))
    outcome = StepOutcome(status={"deadLetterTopic": dlq} if dlq is not None else {})
    if missing:
        created = ctx.kafka.create_topics(missing, int(ctx.app_spec.config.get("replication.factor", "-1")))
        if created:
            outcome.events.append(Event("Normal", "TopicsCreated", f"Created output topics {', '.join(created)}"))
    return outcome


def launch_job(ctx: ReplayContext) -> StepOutcome:
    """The ServiceAccount, the ConfigMap with the replay plan and the Job, once the range is in status (the intent
    first); an empty range ends without a Job; a recorded Job that is gone fails the replay (``JobMissing``)."""
    cluster, replay = ctx.world.cluster, ctx.replay
    name = job_manifests.job_name(replay.name)
    if ctx.status.get("job") and cluster.get("Job", replay.namespace, name) is not None:
        return StepOutcome()
    if empty_range(ctx):
        return _without_job(ctx)
    assert ctx.kafka is not None and ctx.app_spec is not None
    if ctx.status.get("job"):  # recorded but gone: deleted by someone; the replay cannot say what ran
        return StepOutcome(halt=Failed("JobMissing", f"the replay's Job {name} was deleted before it finished"))
    outputs = output_topics(ctx)
    sink_partitions = ctx.kafka.partition_counts(outputs)
    unseen = [topic for topic in outputs if topic not in sink_partitions]
    if unseen:  # created a moment ago: the broker's metadata lags the controller's (KRaft), seen at the next pass
        waiting = f"waiting for the broker's metadata of the output topics {', '.join(unseen)}"
        return StepOutcome(halt=Waiting(waiting))
    image = ctx.spec.spark.image or ctx.world.image
    # the intent first: the range the Job will replay is in status before the Job exists, so that a restarted
    # operator never resolves another range for a Job already running (its end offsets are the handover point)
    recorded = {key: ctx.status[key] for key in _INTENT if key in ctx.status}
    cluster.patch_replay_status(replay.namespace, replay.name, {**recorded, "progress": "launching the Spark job"})
    code = app_code.of(ctx.spec, ctx.app_spec)
    images = job_manifests.JobImages(image, code)
    for manifest in job_manifests.job_manifests(
        replay.owner, ctx.spec, _plan(ctx, sink_partitions), images, ctx.app_spec
    ):
        if cluster.get(manifest["kind"], replay.namespace, manifest["metadata"]["name"]) is None:
            cluster.apply(manifest)
    return StepOutcome(
        events=[Event("Normal", "JobCreated", f"Created Job {name} (image {image}, code of {code.image})")],
        status={"job": name, "startTime": ctx.now, "phase": Phase.RUNNING.value, "progress": "spark job starting"},
    )


def _plan(ctx: ReplayContext, sink_partitions: Mapping[str, int]) -> dict[str, Any]:
    """The replay plan of the recorded range (``replay_plan.plan_document``)."""
    assert ctx.app_spec is not None
    resolved = ctx.status["resolvedOffsets"]
    return replay_plan.plan_document(
        replay_plan.PlanInputs(
            replay_id=ctx.status["replayId"],
            topology=plan_topology(ctx),
            config=replay_plan.replay_config(ctx.app_spec.config, ctx.status["applicationId"]),
            bootstrap_servers=ctx.app_spec.kafka.bootstrap_servers,
            start=offset_range.from_wire(resolved["from"]),
            end=offset_range.from_wire(resolved["to"]),
            sink_partitions=sink_partitions,
            kafka_settings=security_config(ctx.app_spec.kafka),
            emit=ctx.spec.emit,
        )
    )


def _without_job(ctx: ReplayContext) -> StepOutcome:
    """An empty range ends without a Job: a backfill succeeds with nothing written; a handover goes straight to its
    steps, whose new version starts at the range's end offsets (the same as its start)."""
    if ctx.status.get("phase") != Phase.PENDING.value:
        return StepOutcome()
    events = [Event("Normal", "EmptyRange", "The offset range holds no record: no Spark job runs")]
    if ctx.spec.mode == ReplayMode.HANDOVER:
        progress = "empty range: no Spark job; the new version starts at the end offsets"
        return StepOutcome(
            events=events, status={"phase": Phase.HANDING_OVER.value, "recordsWritten": 0, "progress": progress}
        )
    progress = "Succeeded: empty range, nothing to write (no Spark job ran)"
    fields = {"phase": Phase.SUCCEEDED.value, "recordsWritten": 0, "completionTime": ctx.now, "progress": progress}
    return StepOutcome(events=events, status=fields)


def track_job(ctx: ReplayContext) -> StepOutcome:
    """The Job's phase as the replay's: waiting while it runs (its progress recorded), failed with its pod's
    error, or done (the records it wrote; a handover goes on to its steps)."""
    if ctx.status.get("phase") != Phase.RUNNING.value:
        return StepOutcome()
    job = ctx.world.cluster.get("Job", ctx.replay.namespace, ctx.status["job"])
    state = job_reports.job_state(job)
    seconds = seconds_since(ctx.status.get("startTime"), ctx.now)
    if state.phase in ("Running", "Pending"):
        return _running(ctx, job, state, seconds)
    log = pod_log(ctx, job)
    if state.phase == "Failed":
        # no log (the API cannot serve it): the container's termination message (the app-code check writes one)
        detail = job_reports.failure_detail(log) if log else job_reports.termination_message(job_pods(ctx, job))
        reason = app_code.failure_reason(state.reason, state.message, detail)
        message = f"the Spark job failed: {state.message}" + (f": {detail}" if detail else "")
        return StepOutcome(halt=Failed(reason, message))
    return _succeeded(ctx, log, seconds)


def _running(
    ctx: ReplayContext, job: Mapping[str, Any] | None, state: job_reports.JobState, seconds: int | None
) -> StepOutcome:
    """The Job runs: its progress (records processed from its last report, written from the done markers);
    a pod that has not started is :func:`_await_start`'s."""
    try:
        pods: list[dict[str, Any]] | None = job_pods(ctx, job)
    except KubernetesUnavailable:  # unknown: the Job's own conditions still end the replay
        pods = None
    if pods is not None and not job_start.started(pods):  # active counts pending pods too: not "running"
        return _await_start(ctx, job, pods, seconds)
    assert ctx.kafka is not None
    # the done markers appear once Spark writes: how much of the output is committed so far
    so_far = job_reports.records_in_markers(ctx.kafka.read_committed_values(markers_topic(ctx)))
    report = progress_report(ctx, job)
    progress = job_reports.progress_text("Running", seconds=seconds, written=so_far or None, report=report)
    fields = {"durationSeconds": seconds, "progress": progress}
    fields.update(job_reports.progress_fields(report) if report else {})
    return StepOutcome(status=fields, halt=Waiting(state.message))


def _succeeded(ctx: ReplayContext, log: str, seconds: int | None) -> StepOutcome:
    """The Job completed: the records it wrote (its result line, else the done markers), its dropped records and
    last progress; a backfill has succeeded, a handover goes on."""
    assert ctx.kafka is not None
    result = job_reports.replay_result(log)
    if result is not None:
        written: int | None = sum((result.get("records_written") or {}).values())
    else:  # no pod log (a node without the kubelet's log endpoint): the done markers count what was written
        written = job_reports.records_in_markers(ctx.kafka.read_committed_values(markers_topic(ctx)))
    next_phase = Phase.HANDING_OVER if ctx.spec.mode == ReplayMode.HANDOVER else Phase.SUCCEEDED
    fields: dict[str, Any] = {"phase": next_phase.value, "durationSeconds": seconds, "recordsWritten": written}
    dropped = job_reports.dropped_records(result)
    if dropped is not None:
        fields["droppedRecords"] = dropped
    report = job_reports.latest_progress(log)
    if report is not None:
        fields.update(job_reports.progress_fields(report))
    if next_phase == Phase.SUCCEEDED:
        fields.update(completionTime=ctx.now, progress=job_reports.progress_text("Succeeded", written=written))
    with contextlib.suppress(KafkaUnavailable):  # the done markers serve reruns only; a leftover topic is harmless
        ctx.kafka.delete_topics([markers_topic(ctx)])
    wrote = Event("Normal", "JobSucceeded", f"The Spark job wrote {written} records in {seconds}s")
    return StepOutcome(events=[wrote], status=fields)


def _await_start(
    ctx: ReplayContext, job: Mapping[str, Any] | None, pods: list[dict[str, Any]], seconds: int | None
) -> StepOutcome:
    """The Job's pod has not started: wait (``Degraded`` naming Kubernetes' reason when there is one), or fail the
    replay and delete its Job once ``spec.spark.startTimeoutSeconds`` passed (``job_start.start_verdict``)."""
    name, timeout = ctx.status["job"], ctx.spec.spark.start_timeout_seconds
    problem = job_start.start_problem(pods, [] if pods else job_events(ctx, name))
    verdict = job_start.start_verdict(problem, seconds, timeout, name, job_start.pending_detail(pods))
    if verdict.failed is not None:
        delete_job(ctx.world.cluster, ctx.replay, job)
        return StepOutcome(halt=Failed(*verdict.failed))
    progress = job_reports.progress_text("Starting", seconds=seconds, step=problem.reason if problem else None)
    outcome = StepOutcome(status={"durationSeconds": seconds, "progress": progress})
    if verdict.problem is not None:
        outcome.halt = Blocked(Problem(verdict.problem.reason, job_start.waiting_text(verdict.problem, timeout)))
    else:
        outcome.halt = Waiting("waiting for the Job's pod to start")
    return outcome
