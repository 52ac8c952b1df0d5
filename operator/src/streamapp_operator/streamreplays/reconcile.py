"""The StreamReplay controller: a level-based reconcile as named steps (``streamapp_operator.steps``).

The same :func:`reconcile_replay` runs on create, resume and every timer tick. It parses the spec and the
StreamApp it names, then runs :data:`STEPS` in order; each step reads what the status already records and
does only what is missing, so a restarted operator resumes where the status says:

0. ``check_identity``: before the Job, the replay's ``application.id`` is no StreamApp's (the ``peers``
   index) and its consumer group has neither members nor committed offsets;
   ``check_children``: until the Job has finished, its Job, ConfigMap and ServiceAccount are its own or
   absent (someone else's: ``Degraded`` names it, the replay waits, nothing is applied over it);
1. ``resolve_offsets``: explicit ``[from, to)`` offsets per input partition (Kafka admin: earliest, latest,
   offsets for a timestamp), written to ``status.resolvedOffsets`` before anything runs;
2. ``create_sink_topics``: the topics the replay's topology writes, when missing (as many partitions as the
   input topics);
3. ``launch_job``: the ServiceAccount (no API rights, no token), the ConfigMap with the replay plan and the
   Job running ``streamapp replay run`` in the replay image (``spark.mode: local``);
4. ``track_job``: the Job's phase and progress: the last ``replay-progress`` report in its pod's log gives the
   input records processed (``status.recordsProcessed``, ``percentProcessed``; an unreadable log only leaves
   them out), the done markers the records written so far, its pod's last line the result. A failed Job
   fails the replay with the pod's error in the ``Failed`` condition; the running app is untouched;
5. ``hand_over`` (``mode: handover``): :data:`handover.HANDOVER_STEPS`, each recorded ``Started`` in
   ``status.handover`` (written at once, before it acts) and ``Done`` after: the new version's consumer group
   offsets set to the replay's end offsets, the new version's StreamApp created (its stores restore from the
   changelogs the replay wrote), awaited until Ready and caught up, then the old version removed by policy.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import ValidationError
from streamapp.replay import UnsupportedTopologyError, check_topology
from streamapp.replay.progress import ReplayProgress
from streamapp.topology import TopologyDescription, TopologyError

from streamapp_operator.connection import KafkaConnection, kafka_connection, security_config
from streamapp_operator.identity import CONSUMER_GROUP_IN_USE, Peer, foreign_members, identity_conflicts
from streamapp_operator.k8s import Cluster, KubernetesUnavailable
from streamapp_operator.kafka import KafkaAdmin, KafkaUnavailable, TopicSpec
from streamapp_operator.kinds import Owner, owned_by
from streamapp_operator.outcomes import Condition, Event, Problem, transition
from streamapp_operator.steps import KAFKA_UNAVAILABLE, Blocked, Failed, StepOutcome, Waiting, run_steps
from streamapp_operator.streamapps.resources import StreamAppSpec
from streamapp_operator.streamreplays import (
    app_code,
    claims,
    dead_letters,
    handover,
    job_manifests,
    job_reports,
    job_start,
    offset_range,
    overlap,
    replay_plan,
    takeover,
)
from streamapp_operator.streamreplays.resources import (
    KIND,
    OldVersionPolicy,
    OutputsPolicy,
    Phase,
    ReplayMode,
    ReplayTo,
    SparkMode,
    StepState,
    StreamReplaySpec,
)
from streamapp_operator.times import seconds_between

DEFAULT_IMAGE = "localhost/streamapp-replay:dev"
#: Lines of the Job pod's log read for its last progress report (Spark's own warnings share the log).
PROGRESS_LOG_LINES = 200
#: The replay's creation time in the identity check when it is not known: sorts after every RFC 3339 instant, so
#: that every StreamApp claiming the replay's ``application.id`` holds it. Known, a StreamApp created before the
#: replay holds it, and one created after is refused on its side while the replay runs (``identity.replay_peer``).
AFTER_EVERY_APP = "~"
#: The replay's reason when the StreamApp it replays is gone before the replay could finish.
APP_MISSING = "AppMissing"


class ReplayCluster(Cluster, Protocol):
    """What the replay controller needs of the API beyond the StreamApp controller's seam."""

    def patch_replay_status(self, namespace: str, name: str, status: dict[str, Any]) -> None: ...

    def read_pod_log(self, namespace: str, name: str, tail_lines: int = 50) -> str: ...

    def scale_streamapp(self, namespace: str, name: str, replicas: int) -> None: ...


class ReplayKafka(KafkaAdmin, Protocol):
    """Offsets: what the replay controller needs of Kafka beyond topics."""

    def list_offsets(self, partitions: Mapping[str, int], at: str | int) -> dict[str, dict[int, int]]: ...

    def set_group_offsets(self, group_id: str, offsets: Mapping[str, Mapping[int, int]]) -> None: ...

    def committed_offsets(self, group_id: str, partitions: Mapping[str, int]) -> dict[str, dict[int, int]]: ...

    def read_committed_values(self, topic: str, timeout: float = 20.0) -> list[bytes]: ...


@dataclass(frozen=True)
class Replay:
    """Identity of the StreamReplay (from its metadata)."""

    name: str
    namespace: str
    uid: str
    generation: int
    created: str = ""
    """``metadata.creationTimestamp`` (RFC 3339): of two replays in each other's way, the older goes on."""

    @property
    def owner(self) -> Owner:
        return Owner(KIND, self.name, self.namespace, self.uid)


@dataclass(frozen=True)
class ReplayWorld:
    """The seams: the API, a Kafka admin per connection, and the cluster's StreamApps with the
    ``application.id`` each claims (``peers``: kopf's ``application_ids`` index, ``main.py``)."""

    cluster: ReplayCluster
    kafka_for: Callable[[KafkaConnection], ReplayKafka]
    image: str = DEFAULT_IMAGE
    peers: Callable[[], Iterable[Peer]] = lambda: ()
    replays: Callable[[], Iterable[claims.ReplayClaim]] = lambda: ()
    """The cluster's unfinished StreamReplays (kopf's ``replay_claims`` index, ``handlers.py``)."""


@dataclass
class ReplayResult:
    status: dict[str, Any]
    events: list[Event] = field(default_factory=list)


@dataclass
class ReplayContext:
    replay: Replay
    spec: StreamReplaySpec
    app: dict[str, Any] | None
    app_spec: StreamAppSpec | None
    world: ReplayWorld
    kafka: ReplayKafka | None
    description: TopologyDescription
    status: dict[str, Any]
    now: str
    events: list[Event] = field(default_factory=list)

    def record(self, **fields: Any) -> StepOutcome:
        """Set status fields (in ``self.status`` for later steps) and return them as a step's outcome."""
        self.status.update(fields)
        return StepOutcome(status=dict(fields))


# -- steps -------------------------------------------------------------------------------------------------------


def check_identity(ctx: ReplayContext) -> StepOutcome:
    """Before anything runs: the replay's ``application.id`` (its changelog and repartition topics' prefix, the
    new version's consumer group) is no StreamApp's, and its consumer group has no member and no committed
    offset (only the handover sets them, after the Spark job): the replay never writes into another app's
    changelogs nor moves its offsets. Checked until the Job exists, or until an empty range's handover began
    (it has no Job and sets the group's offsets itself)."""
    if ctx.status.get("job") or ctx.status.get("phase") != Phase.PENDING.value:
        return StepOutcome()
    assert ctx.kafka is not None
    _check_no_app_claims(ctx)
    _check_no_replay_in_progress(ctx)
    _check_no_strangers(ctx)
    group = ctx.status["applicationId"]
    inputs = ctx.kafka.partition_counts(ctx.description.external_source_topics())
    committed = ctx.kafka.committed_offsets(group, inputs)
    if committed:
        where = ", ".join(f"{topic}[{p}]" for topic, parts in sorted(committed.items()) for p in sorted(parts))
        raise Failed(
            CONSUMER_GROUP_IN_USE,
            f"consumer group {group!r} has committed offsets ({where}) that this replay did not set: another "
            "application uses that application.id; set spec.applicationId to an unused one",
        )
    return StepOutcome()


def check_children(ctx: ReplayContext) -> StepOutcome:
    """Until the Job has finished: the Job and ConfigMap of the replay's names are its own (owner reference)
    and the ServiceAccount ``streamapp-replay`` (local mode) the operator's; someone else's is named in
    ``Degraded`` and never applied over, used or tracked."""
    if ctx.status.get("phase") not in (Phase.PENDING.value, Phase.RUNNING.value):
        return StepOutcome()
    cluster, replay = ctx.world.cluster, ctx.replay
    name = job_manifests.job_name(replay.name)
    children = {kind: cluster.get(kind, replay.namespace, name) for kind in ("ConfigMap", "Job")}
    local = ctx.spec.spark.mode == SparkMode.LOCAL
    account = cluster.get("ServiceAccount", replay.namespace, job_manifests.SERVICE_ACCOUNT) if local else None
    problems = job_manifests.foreign_children(replay.owner, children, account)
    if problems:
        raise Blocked(Problem(problems[0].reason, "; ".join(p.message for p in problems)))
    return StepOutcome()


def _check_no_app_claims(ctx: ReplayContext) -> None:
    replay, application_id = ctx.replay, ctx.status["applicationId"]
    # a StreamApp created after the replay is refused on its side while the replay runs (identity.replay_peer)
    me = Peer(replay.namespace, replay.name, replay.uid, replay.created or AFTER_EVERY_APP, application_id)
    conflicts = identity_conflicts(me, ctx.world.peers())
    if conflicts:
        raise Failed(
            conflicts[0].reason,
            f"the replay's {conflicts[0].message}; a StreamReplay's default is <the app's application.id>-<its name>",
        )


def _check_no_strangers(ctx: ReplayContext) -> None:
    """The replay's consumer group has no member but the new version's pods (``ConsumerGroupInUse``)."""
    assert ctx.kafka is not None
    group = ctx.status["applicationId"]
    members = [m.client_id for m in ctx.kafka.group_lag(group, []).members]
    strangers = foreign_members(group, members, _new_name(ctx))
    if strangers:
        raise Failed(strangers[0].reason, strangers[0].message)


def _check_no_replay_in_progress(ctx: ReplayContext) -> None:
    replay = ctx.replay
    me = claims.ReplayClaim(
        replay.namespace,
        replay.name,
        replay.uid,
        replay.created,
        f"{replay.namespace}/{ctx.spec.app_ref.name}",
        frozenset(ctx.description.sink_topics()),
        ctx.status.get("phase", ""),
    )
    conflicts = claims.replay_conflicts(me, ctx.world.replays())
    if conflicts:
        raise Failed(conflicts[0].reason, conflicts[0].message)


def stop_old_version(ctx: ReplayContext) -> StepOutcome:
    """``handover.outputs: TakeOver``, before the range is resolved: scale the old version to 0 replicas (its
    replicas recorded first, to be restored on failure) and wait until it has no pod and its group no member
    (``streamapp_operator.streamreplays.takeover``)."""
    if not _taking_over(ctx.spec) or ctx.status.get("resolvedOffsets"):
        return StepOutcome()
    assert ctx.kafka is not None and ctx.app is not None and ctx.app_spec is not None
    recorded = ctx.status.get("takeOver")
    if recorded is None:
        why = takeover.refusal(ctx.app.get("spec") or {})
        if why is not None:
            raise Failed(takeover.TAKE_OVER_UNSUPPORTED, why)
        app_id = (ctx.app.get("status") or {}).get("applicationId") or ctx.app_spec.effective_application_id(
            ctx.spec.app_ref.name
        )
        taken = claims.shared_outputs(ctx.description.sink_topics(), (ctx.app.get("spec") or {}).get("topology") or {})
        recorded = {"replicas": ctx.app_spec.replicas, "applicationId": app_id, "outputs": taken, "state": "Stopping"}
        ctx.record(takeOver=recorded, progress="stopping the old version (outputs: TakeOver)")
        # the intent first: a restarted operator (or a failure) scales it back to these replicas
        ctx.world.cluster.patch_replay_status(ctx.replay.namespace, ctx.replay.name, {"takeOver": recorded})
        ctx.events.append(
            Event("Normal", "OldVersionStopping", f"Scaling StreamApp {ctx.spec.app_ref.name} to 0 (outputs: TakeOver)")
        )
    if ctx.app_spec.replicas != 0:
        ctx.world.cluster.scale_streamapp(ctx.replay.namespace, ctx.spec.app_ref.name, 0)
    members = [m.client_id for m in ctx.kafka.group_lag(recorded["applicationId"], []).members]
    done, message = takeover.stopped(ctx.app, members)
    if not done:
        ctx.record(progress=message)
        raise Waiting(message)
    return ctx.record(takeOver={**recorded, "state": "Stopped"})


def _taking_over(spec: StreamReplaySpec) -> bool:
    return spec.mode == ReplayMode.HANDOVER and spec.handover.outputs == OutputsPolicy.TAKE_OVER


def _restore_old_version(ctx: ReplayContext) -> None:
    """A TakeOver handover failed before its new version existed: the old version goes on from where it stopped
    (its replicas as recorded)."""
    replicas = takeover.replicas_to_restore(ctx.status)
    if replicas is None or ctx.app is None:
        return
    ctx.world.cluster.scale_streamapp(ctx.replay.namespace, ctx.spec.app_ref.name, replicas)
    ctx.status["takeOver"] = {**ctx.status["takeOver"], "state": "Restored"}
    ctx.events.append(
        Event(
            "Normal",
            "OldVersionRestored",
            f"Scaled StreamApp {ctx.spec.app_ref.name} back to {replicas}: the handover failed before its new "
            "version existed",
        )
    )


def resolve_offsets(ctx: ReplayContext) -> StepOutcome:
    if ctx.status.get("resolvedOffsets"):
        return StepOutcome()
    assert ctx.kafka is not None and ctx.app_spec is not None
    topics = ctx.description.external_source_topics()
    counts = ctx.kafka.partition_counts(topics)
    missing = [t for t in topics if t not in counts]
    if missing:
        raise Failed("TopicMissing", f"input topic(s) {', '.join(missing)} do not exist")
    spec = ctx.spec
    positions = offset_range.KafkaPositions(
        earliest=ctx.kafka.list_offsets(counts, "earliest"),
        latest=ctx.kafka.list_offsets(counts, "latest"),
        from_time=ctx.kafka.list_offsets(counts, offset_range.timestamp_ms(spec.from_.timestamp))
        if spec.from_.timestamp
        else None,
        to_time=ctx.kafka.list_offsets(counts, offset_range.timestamp_ms(spec.to.timestamp))
        if spec.to.timestamp
        else None,
    )
    end_at = spec.to
    if _taking_over(spec):  # the range ends where the old version stopped: its committed offsets
        stopped_at = ctx.kafka.committed_offsets(ctx.status["takeOver"]["applicationId"], counts)
        switch = takeover.switch_offsets(stopped_at, positions.earliest)
        end_at = ReplayTo(offsets=offset_range.to_wire(switch))
    try:
        start, end = offset_range.resolve_range(spec.from_, end_at, positions)
    except offset_range.RangeError as exc:
        raise Failed("InvalidRange", str(exc)) from exc
    if spec.mode == ReplayMode.BACKFILL:
        _check_overlap(ctx, start, end)
    read = sum(end[t][p] - o for t, parts in start.items() for p, o in parts.items())
    ctx.events.append(Event("Normal", "OffsetsResolved", f"Replaying {read} records of {', '.join(sorted(start))}"))
    resolved = {"from": offset_range.to_wire(start), "to": offset_range.to_wire(end)}
    return ctx.record(resolvedOffsets=resolved, recordsRead=read, progress="offsets resolved")


def _check_overlap(ctx: ReplayContext, start: offset_range.Offsets, end: offset_range.Offsets) -> None:
    """A backfill writing a topic the app writes, over input the app's consumer group has committed, fails with
    ``RangeOverlapsApp`` unless ``spec.allowOverlap`` (then a Warning event ``OverlapAllowed``):
    ``streamapp_operator.streamreplays.overlap``."""
    assert ctx.kafka is not None and ctx.app is not None and ctx.app_spec is not None
    app = ctx.spec.app_ref.name
    group = ctx.app_spec.effective_application_id(app)
    committed = ctx.kafka.committed_offsets(group, {topic: len(parts) for topic, parts in start.items()})
    shared = claims.shared_outputs(ctx.description.sink_topics(), (ctx.app.get("spec") or {}).get("topology") or {})
    found = overlap.overlaps(start, end, committed)
    verdict = overlap.verdict(app, group, found, shared, bool(ctx.spec.allow_overlap))
    if verdict.refused:
        raise Failed(overlap.RANGE_OVERLAPS_APP, verdict.message)
    if verdict.message:
        ctx.events.append(Event("Warning", overlap.OVERLAP_ALLOWED, verdict.message))


def create_sink_topics(ctx: ReplayContext) -> StepOutcome:
    if ctx.status.get("job") or ctx.status.get("phase") != Phase.PENDING.value:
        return StepOutcome()
    if _empty_range(ctx) and ctx.spec.mode == ReplayMode.BACKFILL:  # nothing to write: no topic either
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
    if missing:
        created = ctx.kafka.create_topics(missing, int(ctx.app_spec.config.get("replication.factor", "-1")))
        if created:
            ctx.events.append(Event("Normal", "TopicsCreated", f"Created output topics {', '.join(created)}"))
    return ctx.record(deadLetterTopic=dlq) if dlq is not None else StepOutcome()


def launch_job(ctx: ReplayContext) -> StepOutcome:
    cluster, replay = ctx.world.cluster, ctx.replay
    name = job_manifests.job_name(replay.name)
    if ctx.status.get("job") and cluster.get("Job", replay.namespace, name) is not None:
        return StepOutcome()
    if _empty_range(ctx):
        return _without_job(ctx)
    assert ctx.kafka is not None and ctx.app_spec is not None
    if ctx.status.get("job"):  # recorded but gone: deleted by someone; the replay cannot say what ran
        raise Failed("JobMissing", f"the replay's Job {name} was deleted before it finished")
    resolved = ctx.status["resolvedOffsets"]
    outputs = _output_topics(ctx)
    sink_partitions = ctx.kafka.partition_counts(outputs)
    unseen = [topic for topic in outputs if topic not in sink_partitions]
    if unseen:  # created a moment ago: the broker's metadata lags the controller's (KRaft), seen at the next pass
        raise Waiting(f"waiting for the broker's metadata of the output topics {', '.join(unseen)}")
    plan = replay_plan.plan_document(
        replay_plan.PlanInputs(
            replay_id=ctx.status["replayId"],
            topology=_plan_topology(ctx),
            config=replay_plan.replay_config(ctx.app_spec.config, ctx.status["applicationId"]),
            bootstrap_servers=ctx.app_spec.kafka.bootstrap_servers,
            start=offset_range.from_wire(resolved["from"]),
            end=offset_range.from_wire(resolved["to"]),
            sink_partitions=sink_partitions,
            kafka_settings=security_config(ctx.app_spec.kafka),
            emit=ctx.spec.emit,
        )
    )
    image = ctx.spec.spark.image or ctx.world.image
    # the intent first: the range the Job will replay is in status before the Job exists, so that a restarted
    # operator never resolves another range for a Job already running (its end offsets are the handover point)
    keys = ("resolvedOffsets", "recordsRead", "applicationId", "replayId", "appUid", "deadLetterTopic")
    recorded = {key: ctx.status[key] for key in keys if key in ctx.status}
    cluster.patch_replay_status(replay.namespace, replay.name, {**recorded, "progress": "launching the Spark job"})
    code = app_code.of(ctx.spec, ctx.app_spec)
    for manifest in job_manifests.job_manifests(
        replay.owner, ctx.spec, plan, job_manifests.JobImages(image, code), ctx.app_spec
    ):
        if cluster.get(manifest["kind"], replay.namespace, manifest["metadata"]["name"]) is None:
            cluster.apply(manifest)
    ctx.events.append(Event("Normal", "JobCreated", f"Created Job {name} (image {image}, code of {code.image})"))
    return ctx.record(job=name, startTime=ctx.now, phase=Phase.RUNNING.value, progress="spark job starting")


def _empty_range(ctx: ReplayContext) -> bool:
    """The resolved range holds no record (``recordsRead`` 0, e.g. ``from.timestamp`` after the last record) and no
    Job was launched for it: a Spark run would read nothing and write nothing (the audit's R5f ran 51 s for it)."""
    return not ctx.status.get("job") and ctx.status.get("recordsRead") == 0


def _without_job(ctx: ReplayContext) -> StepOutcome:
    """An empty range ends without a Job: a backfill succeeds with nothing written; a handover goes straight to its
    steps, whose new version starts at the range's end offsets (the same as its start)."""
    if ctx.status.get("phase") != Phase.PENDING.value:
        return StepOutcome()
    ctx.events.append(Event("Normal", "EmptyRange", "The offset range holds no record: no Spark job runs"))
    if ctx.spec.mode == ReplayMode.HANDOVER:
        progress = "empty range: no Spark job; the new version starts at the end offsets"
        return ctx.record(phase=Phase.HANDING_OVER.value, recordsWritten=0, progress=progress)
    progress = "Succeeded: empty range, nothing to write (no Spark job ran)"
    return ctx.record(phase=Phase.SUCCEEDED.value, recordsWritten=0, completionTime=ctx.now, progress=progress)


def track_job(ctx: ReplayContext) -> StepOutcome:
    if ctx.status.get("phase") != Phase.RUNNING.value:
        return StepOutcome()
    cluster, replay = ctx.world.cluster, ctx.replay
    job = cluster.get("Job", replay.namespace, ctx.status["job"])
    state = job_reports.job_state(job)
    seconds = _seconds_since(ctx.status.get("startTime"), ctx.now)
    if state.phase == "Running" or state.phase == "Pending":
        try:
            pods: list[dict[str, Any]] | None = _job_pods(ctx, job)
        except KubernetesUnavailable:  # unknown: the Job's own conditions still end the replay
            pods = None
        if pods is not None and not job_start.started(pods):  # active counts pending pods too: not "running"
            _await_start(ctx, job, pods, seconds)
        assert ctx.kafka is not None
        # the done markers appear once Spark writes: how much of the output is committed so far
        so_far = job_reports.records_in_markers(ctx.kafka.read_committed_values(_markers(ctx)))
        report = _progress_report(ctx, job)
        progress = job_reports.progress_text("Running", seconds=seconds, written=so_far or None, report=report)
        ctx.record(
            durationSeconds=seconds, progress=progress, **(job_reports.progress_fields(report) if report else {})
        )
        raise Waiting(state.message)
    log = _pod_log(ctx, job)
    if state.phase == "Failed":
        # no log (the API cannot serve it): the container's termination message (the app-code check writes one)
        detail = job_reports.failure_detail(log) if log else job_reports.termination_message(_job_pods(ctx, job))
        reason = app_code.failure_reason(state.reason, state.message, detail)
        raise Failed(reason, f"the Spark job failed: {state.message}" + (f": {detail}" if detail else ""))
    result = job_reports.replay_result(log)
    if result is not None:
        written: int | None = sum((result.get("records_written") or {}).values())
    else:  # no pod log (a node without the kubelet's log endpoint): the done markers count what was written
        assert ctx.kafka is not None
        written = job_reports.records_in_markers(ctx.kafka.read_committed_values(_markers(ctx)))
    next_phase = Phase.HANDING_OVER if ctx.spec.mode == ReplayMode.HANDOVER else Phase.SUCCEEDED
    ctx.events.append(Event("Normal", "JobSucceeded", f"The Spark job wrote {written} records in {seconds}s"))
    fields: dict[str, Any] = {"phase": next_phase.value, "durationSeconds": seconds, "recordsWritten": written}
    dropped = job_reports.dropped_records(result)
    if dropped is not None:
        fields["droppedRecords"] = dropped
    report = job_reports.latest_progress(log)
    if report is not None:
        fields.update(job_reports.progress_fields(report))
    if next_phase == Phase.SUCCEEDED:
        fields.update(completionTime=ctx.now, progress=job_reports.progress_text("Succeeded", written=written))
    outcome = ctx.record(**fields)
    assert ctx.kafka is not None
    with contextlib.suppress(KafkaUnavailable):  # the done markers serve reruns only; a leftover topic is harmless
        ctx.kafka.delete_topics([_markers(ctx)])
    return outcome


def _await_start(
    ctx: ReplayContext, job: Mapping[str, Any] | None, pods: list[dict[str, Any]], seconds: int | None
) -> None:
    """The Job's pod has not started: wait (``Degraded`` naming Kubernetes' reason when there is one), or fail the
    replay and delete its Job once ``spec.spark.startTimeoutSeconds`` passed (``job_start.start_verdict``)."""
    name, timeout = ctx.status["job"], ctx.spec.spark.start_timeout_seconds
    problem = job_start.start_problem(pods, [] if pods else _job_events(ctx, name))
    verdict = job_start.start_verdict(problem, seconds, timeout, name, job_start.pending_detail(pods))
    if verdict.failed is not None:
        _delete_job(ctx.world.cluster, ctx.replay, job)
        raise Failed(*verdict.failed)
    progress = job_reports.progress_text("Starting", seconds=seconds, step=problem.reason if problem else None)
    ctx.record(durationSeconds=seconds, progress=progress)
    if verdict.problem is not None:
        raise Blocked(Problem(verdict.problem.reason, job_start.waiting_text(verdict.problem, timeout)))
    raise Waiting("waiting for the Job's pod to start")


def _job_events(ctx: ReplayContext, job: str) -> list[dict[str, Any]]:
    """The Job controller's ``FailedCreate`` events of the replay's Job ([] when they cannot be listed: the
    timeout still ends the wait)."""
    try:
        return ctx.world.cluster.list_events(ctx.replay.namespace, "Job", job, job_start.FAILED_CREATE)
    except KubernetesUnavailable:
        return []


def _delete_job(cluster: ReplayCluster, replay: Replay, job: Mapping[str, Any] | None) -> None:
    """Delete the replay's own Job (its pods with it): one that will never run is not left pending for ever."""
    if job is not None and owned_by(job, replay.uid):
        cluster.delete("Job", replay.namespace, job["metadata"]["name"], job["metadata"]["uid"])


def hand_over(ctx: ReplayContext) -> StepOutcome:
    if ctx.status.get("phase") != Phase.HANDING_OVER.value:
        return StepOutcome()
    while (step := handover.next_step(ctx.status.get("handover"))) is not None:
        ctx.record(progress=job_reports.progress_text("HandingOver", step=step))
        recorded = ctx.status.get("handover") or []
        if not any(s.get("name") == step and s.get("state") == StepState.STARTED for s in recorded):
            # the intent, written before the step acts: a restarted operator resumes this step
            steps = handover.record_step(recorded, step, StepState.STARTED, ctx.now)
            ctx.world.cluster.patch_replay_status(
                ctx.replay.namespace, ctx.replay.name, {"handover": steps, "progress": ctx.status["progress"]}
            )
            ctx.record(handover=steps)
        message = _HANDOVER[step](ctx)  # raises Waiting while it waits
        ctx.record(handover=handover.record_step(ctx.status.get("handover"), step, StepState.DONE, ctx.now, message))
        ctx.events.append(Event("Normal", "HandoverStep", f"{step}: {message}"))
    return ctx.record(
        phase=Phase.SUCCEEDED.value,
        completionTime=ctx.now,
        progress=f"done: {ctx.status.get('newVersion')} is active",
    )


def _set_group_offsets(ctx: ReplayContext) -> str:
    if ctx.kafka is None:  # the app (and with it the Kafka connection) is gone before the new version exists
        raise Failed(APP_MISSING, f"StreamApp {ctx.spec.app_ref.name} was deleted before the handover")
    group = ctx.status["applicationId"]
    end = offset_range.from_wire(ctx.status["resolvedOffsets"]["to"])
    if _our_new_version(ctx) is not None:
        return f"group {group} kept: the new version exists already"  # never rewind a running version
    # a StreamApp older than the replay that took the id during the Spark run keeps its offsets; a newer one is
    # refused on its side (identity.replay_peer), but one that ran before the replay's id was claimed has members
    _check_no_app_claims(ctx)
    _check_no_strangers(ctx)
    counts = {t: len(parts) for t, parts in end.items()}
    if ctx.kafka.committed_offsets(group, counts) != end:
        ctx.kafka.set_group_offsets(group, end)
    return f"group {group} starts at the replay's end offsets"


def _new_version_replicas(ctx: ReplayContext) -> int | None:
    """``handover.replicas``; else, under TakeOver, the old version's replicas recorded before its stop (its spec
    says 0 by then); else None (the app's own ``spec.replicas``)."""
    if ctx.spec.handover.replicas is not None:
        return ctx.spec.handover.replicas
    recorded = (ctx.status.get("takeOver") or {}).get("replicas")
    return int(recorded) if recorded is not None else None


def _create_new_version(ctx: ReplayContext) -> str:
    name = _new_name(ctx)
    cluster = ctx.world.cluster
    existing = _our_new_version(ctx)
    ctx.record(newVersion=name)
    if existing is not None:  # created before a restart: its uid annotation is this replay's
        ctx.record(newVersionUid=existing["metadata"].get("uid"))
        return f"StreamApp {name} exists"
    if ctx.app is None:
        raise Failed(APP_MISSING, f"StreamApp {ctx.spec.app_ref.name} was deleted before the handover")
    manifest = handover.new_version(
        ctx.app,
        handover.NewVersion(
            name,
            ctx.status["applicationId"],
            _topology_document(ctx),
            image=ctx.spec.handover.image or ctx.spec.image,
            replicas=_new_version_replicas(ctx),
        ),
        ctx.replay.name,
        ctx.replay.uid,
    )
    created = cluster.apply(manifest)
    # the uid it was created with: a StreamApp made again under its name later is not this replay's
    ctx.record(newVersionUid=(created.get("metadata") or {}).get("uid"))
    return f"created StreamApp {name} (application.id {ctx.status['applicationId']})"


def _await_caught_up(ctx: ReplayContext) -> str:
    done, message = handover.caught_up(_our_new_version(ctx), ctx.spec.handover.max_lag)
    if not done:
        raise Waiting(message)
    return message


def _remove_old_version(ctx: ReplayContext) -> str:
    old = ctx.spec.app_ref.name
    new = _our_new_version(ctx)  # the old version is never deleted for a StreamApp this replay did not create
    if ctx.spec.handover.old_version == OldVersionPolicy.KEEP:
        if _taking_over(ctx.spec):
            return f"StreamApp {old} kept at 0 replicas (oldVersion: Keep; its outputs are the new version's now)"
        return f"StreamApp {old} kept (oldVersion: Keep)"
    if new is None:  # deleted since it caught up: never leave no version running
        raise Failed("NewVersionMissing", f"the new version {_new_name(ctx)} is gone: StreamApp {old} is kept running")
    done, message = handover.caught_up(new, ctx.spec.handover.max_lag)
    if not done:  # checked again as it acts (a restart may resume this step long after awaitCaughtUp)
        raise Waiting(f"StreamApp {old} stays until the new version is caught up: {message}")
    if ctx.app is None:
        return f"StreamApp {old} is gone already"
    uid, replayed = ctx.app["metadata"].get("uid"), ctx.status.get("appUid")
    if replayed and uid != replayed:  # deleted and made again by someone since the replay started: not ours
        return f"StreamApp {old} is not the app replayed (made again since, uid {uid}): left untouched"
    ctx.world.cluster.delete("StreamApp", ctx.replay.namespace, old, uid)
    return f"StreamApp {old} deleted (oldVersion: Delete)"


_HANDOVER: dict[str, Callable[[ReplayContext], str]] = {
    "setGroupOffsets": _set_group_offsets,
    "createNewVersion": _create_new_version,
    "awaitCaughtUp": _await_caught_up,
    "removeOldVersion": _remove_old_version,
}
assert tuple(_HANDOVER) == handover.HANDOVER_STEPS


def delete_leftover_topics(ctx: ReplayContext) -> StepOutcome:
    """Once the replay succeeded: delete what it made in Kafka that nothing reads any more, so replays do not pile
    up topics (the audit counted 21 from 13 replays): its done-markers topic and, for a backfill, the changelog and
    repartition topics of its ``application.id`` (no app ever runs under it). A handover's new version runs under
    that ``application.id`` and keeps them (its warm state). Recorded in ``status.topicsDeleted``."""
    if ctx.status.get("phase") != Phase.SUCCEEDED.value or "topicsDeleted" in ctx.status:
        return StepOutcome()
    assert ctx.kafka is not None
    return ctx.record(topicsDeleted=_delete_leftovers(ctx.kafka, ctx.spec.mode, ctx.status, ctx.events))


def _delete_leftovers(kafka: ReplayKafka, mode: ReplayMode, status: dict[str, Any], events: list[Event]) -> list[str]:
    """Delete the markers, a backfill's internal topics and the replay's dead-letter topic when it is empty; a
    dead-letter topic with records stays, named in ``status.deadLetters`` and a Warning event (never deleted
    silently)."""
    doomed = [f"streamapp-replay-{status['replayId']}-markers"] if status.get("replayId") else []
    if mode == ReplayMode.BACKFILL and status.get("applicationId"):
        doomed += kafka.internal_topics(status["applicationId"])
    dlq = status.get("deadLetterTopic")
    if dlq:
        counts = kafka.partition_counts([dlq])
        offsets = 0
        if counts:
            start, end = kafka.list_offsets(counts, "earliest"), kafka.list_offsets(counts, "latest")
            offsets = sum(end[dlq][p] - start[dlq][p] for p in end.get(dlq, {}))
        records = len(kafka.read_committed_values(dlq)) if offsets else None
        kept = dead_letters.verdict(dlq, offsets, records)
        if kept.delete:
            doomed.append(dlq)
        else:
            status["deadLetters"] = kept.records
            events.append(Event("Warning", "DeadLetters", kept.message))
    return kafka.delete_topics(doomed) if doomed else []


STEPS = (
    check_identity,
    check_children,
    stop_old_version,
    resolve_offsets,
    create_sink_topics,
    launch_job,
    track_job,
    hand_over,
    delete_leftover_topics,
)


# -- the reconcile ------------------------------------------------------------------------------------------------


def reconcile_replay(
    replay: Replay, spec: dict[str, Any], status: dict[str, Any], world: ReplayWorld, now: str
) -> ReplayResult:
    """Reconcile one StreamReplay; never raises for an invalid one (the status says why)."""
    previous = dict(status)
    given = Given(replay, previous, now)
    current = dict(status)
    current.setdefault("phase", Phase.PENDING.value)
    if current["phase"] in (Phase.SUCCEEDED.value, Phase.FAILED.value):
        return ReplayResult(status={})
    try:
        ctx = _context(replay, spec, current, world, now)
    except Failed as exc:
        return _failed(given, current, exc, [])
    except Blocked as exc:
        return _blocked(given, current, exc, [])
    if ctx is None:  # waiting for the app
        return ReplayResult(status=_finish(given, current))
    run = run_steps(STEPS, ctx)
    halt = run.halt
    if isinstance(halt, Waiting):
        ctx.status["waiting"] = str(halt)
        return ReplayResult(status=_finish(given, ctx.status), events=ctx.events)
    if isinstance(halt, Blocked):
        return _blocked(given, ctx.status, halt, ctx.events)
    if isinstance(halt, Failed):
        with contextlib.suppress(KubernetesUnavailable):  # best effort, as the clean-up: the failure is what counts
            _restore_old_version(ctx)
        if ctx.kafka is not None and ctx.status.get("job") and not _new_version_created(ctx.status):
            with contextlib.suppress(KafkaUnavailable):  # best effort: the failure is what the status must say
                ctx.status["topicsDeleted"] = _delete_leftovers(ctx.kafka, ReplayMode.BACKFILL, ctx.status, ctx.events)
        return _failed(given, ctx.status, halt, ctx.events)
    ctx.status.update(run.status)
    ctx.status.pop("waiting", None)
    problem = run.problem
    return ReplayResult(status=_finish(given, ctx.status, problem), events=ctx.events)


def _context(
    replay: Replay, spec: dict[str, Any], status: dict[str, Any], world: ReplayWorld, now: str
) -> ReplayContext | None:
    try:
        parsed = StreamReplaySpec.parse(spec)
    except ValidationError as exc:
        raise Failed("InvalidSpec", str(exc)) from exc
    app = world.cluster.get("StreamApp", replay.namespace, parsed.app_ref.name)
    if app is None and status.get("phase") == Phase.RUNNING.value:
        _app_deleted_mid_job(world.cluster, replay, parsed, status)
    if app is None and status.get("phase") != Phase.HANDING_OVER.value:
        status["waiting"] = f"StreamApp {parsed.app_ref.name} does not exist"
        return None
    app_spec = StreamAppSpec.parse(app["spec"]) if app is not None else None
    topology = parsed.topology.to_description_dict() if parsed.topology else (app or {}).get("spec", {}).get("topology")
    try:
        description = TopologyDescription.from_dict(topology or {})
        description.check_exportable()
    except (TopologyError, ValueError, KeyError) as exc:
        raise Failed("InvalidTopology", f"topology: {exc}") from exc
    try:  # before any Job: a node type or sink the replay cannot run is named here, not in a failed Spark run
        check_topology(description)
    except UnsupportedTopologyError as exc:
        raise Failed("UnsupportedTopology", f"topology: {exc}") from exc
    if app is not None and parsed.mode == ReplayMode.HANDOVER and not status.get("job"):
        shared = claims.shared_outputs(description.sink_topics(), (app.get("spec") or {}).get("topology") or {})
        if shared and not _taking_over(parsed):
            raise Failed(
                "OutputInUse",
                f"the replay's topology writes {', '.join(shared)}, which StreamApp {parsed.app_ref.name} writes too: "
                "the replayed history would duplicate what it wrote there; write the replay's output to a new topic, "
                "or take the app's over (handover.outputs: TakeOver)",
            )
    if parsed.mode == ReplayMode.HANDOVER and not status.get("job"):  # before any Job: the name is free or ours
        _new_version_of(world.cluster, replay, parsed)
    if app_spec is not None and not status.get("applicationId"):
        app_id = app_spec.effective_application_id(parsed.app_ref.name)
        status["applicationId"] = replay_plan.application_id(parsed, replay.name, app_id)
        status["replayId"] = replay_plan.replay_id(replay.name, replay.uid)
        status["appUid"] = (app or {}).get("metadata", {}).get("uid")
    kafka = None
    if app_spec is not None:
        connection, problems = kafka_connection(world.cluster, replay.namespace, app_spec.kafka)
        if problems:  # before any Kafka client: the replay waits (Degraded) until the Secret is there
            messages = "; ".join(p.message for p in problems)
            raise Blocked(Problem(problems[0].reason, f"StreamApp {parsed.app_ref.name}: {messages}"))
        try:
            kafka = world.kafka_for(connection)
        except KafkaUnavailable as exc:  # librdkafka refused the settings: said, retried at every reconcile
            raise Blocked(Problem(KAFKA_UNAVAILABLE, f"StreamApp {parsed.app_ref.name}: {exc}")) from exc
    return ReplayContext(replay, parsed, app, app_spec, world, kafka, description, status, now)


def _app_deleted_mid_job(
    cluster: ReplayCluster, replay: Replay, spec: StreamReplaySpec, status: dict[str, Any]
) -> None:
    """The replayed StreamApp is gone while the replay's Job exists (``phase: Running``). A handover has nothing
    left to hand over from, and a Job whose pod never started has done nothing: either fails at once, its Job
    deleted. A running backfill's job is left to end (its output keeps what it commits), then fails: without the
    app there is no Kafka connection to count or check what it wrote. Raises Failed, or Blocked while it
    waits (``Degraded``, reason ``AppMissing``)."""
    app, name = spec.app_ref.name, status.get("job") or job_manifests.job_name(replay.name)
    job = cluster.get("Job", replay.namespace, name)
    state = job_reports.job_state(job)
    gone = f"StreamApp {app} was deleted while the replay's Spark job ran"
    if state.phase == "Succeeded":
        unchecked = "its output topics hold what it wrote, which the replay did not count or check without the app"
        raise Failed(APP_MISSING, f"{gone}; Job {name} completed: {unchecked}")
    if state.phase == "Failed":
        raise Failed(APP_MISSING, f"{gone}; Job {name} failed: {state.message}")
    if spec.mode == ReplayMode.HANDOVER or not job_start.started(_owned_pods(cluster, replay.namespace, name, job)):
        _delete_job(cluster, replay, job)
        why = "there is no app to hand over from" if spec.mode == ReplayMode.HANDOVER else "its pod had not started"
        raise Failed(APP_MISSING, f"{gone}: {why}; Job {name} deleted")
    status["progress"] = "app deleted: waiting for the Spark job to end"
    then = "its output keeps what it commits; delete the StreamReplay to stop it now"
    raise Blocked(Problem(APP_MISSING, f"{gone}: the replay fails when Job {name} ends ({then})"))


def _our_new_version(ctx: ReplayContext) -> dict[str, Any] | None:
    steps = {s.get("name"): s.get("state") for s in ctx.status.get("handover") or []}
    created_unannotated = steps.get("createNewVersion") == StepState.DONE and not ctx.status.get("newVersionUid")
    return _new_version_of(
        ctx.world.cluster, ctx.replay, ctx.spec, ctx.status.get("newVersionUid"), created_unannotated
    )


def _new_version_of(
    cluster: ReplayCluster,
    replay: Replay,
    spec: StreamReplaySpec,
    recorded_uid: str | None = None,
    created_unannotated: bool = False,
) -> dict[str, Any] | None:
    """The new version's StreamApp if this replay created it (its uid annotation; the uid recorded in status
    once created), None while there is none; a StreamApp of that name that is not this replay's (an earlier
    StreamReplay's of the same name, or the app itself) fails the replay and is never adopted or touched."""
    name = spec.handover.name or replay.name
    existing = cluster.get("StreamApp", replay.namespace, name)
    conflict = handover.new_version_conflict(
        name,
        spec.app_ref.name,
        existing,
        handover.Claimant(replay.name, replay.uid, recorded_uid, created_unannotated),
    )
    if conflict is not None:
        raise Failed(*conflict)
    return existing


def _output_topics(ctx: ReplayContext) -> list[str]:
    """The topics the replay writes besides its internal ones: the topology's sinks and its dead-letter topic."""
    dlq, taken = ctx.status.get("deadLetterTopic"), (ctx.status.get("takeOver") or {}).get("outputs") or []
    return [*(t for t in ctx.description.sink_topics() if t not in taken), *([dlq] if dlq else [])]


def _plan_topology(ctx: ReplayContext) -> dict[str, Any]:
    """The topology the Job runs: the new version's, without the sinks into taken-over topics (TakeOver: the old
    version's records up to the switch are there already)."""
    document = _topology_document(ctx)
    taken = (ctx.status.get("takeOver") or {}).get("outputs") or []
    return takeover.without_sinks(document, taken) if taken else document


def _topology_document(ctx: ReplayContext) -> dict[str, Any]:
    if ctx.spec.topology is not None:
        return ctx.spec.topology.to_description_dict()
    return dict((ctx.app or {}).get("spec", {}).get("topology") or {})


def _new_name(ctx: ReplayContext) -> str:
    return ctx.spec.handover.name or ctx.replay.name  # as _new_version_of


def _progress_report(ctx: ReplayContext, job: Mapping[str, Any] | None) -> ReplayProgress | None:
    """The Spark job's last progress report; None when there is none yet or the API cannot say (progress is
    shown, never a reason to fail or hold up the replay)."""
    try:
        return job_reports.latest_progress(_pod_log(ctx, job, PROGRESS_LOG_LINES))
    except KubernetesUnavailable:
        return None


def _job_pods(ctx: ReplayContext, job: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    return _owned_pods(ctx.world.cluster, ctx.replay.namespace, ctx.status["job"], job)


def _owned_pods(
    cluster: ReplayCluster, namespace: str, job_name: str, job: Mapping[str, Any] | None
) -> list[dict[str, Any]]:
    """The replay Job's pods, oldest first (pods the Job owns: a pod merely labelled like it says nothing of
    the replay)."""
    uid = str(((job or {}).get("metadata") or {}).get("uid") or "")
    pods = [pod for pod in cluster.list_pods(namespace, f"job-name={job_name}") if uid and owned_by(pod, uid)]
    return sorted(pods, key=lambda pod: str(pod.get("metadata", {}).get("creationTimestamp", "")))


def _pod_log(ctx: ReplayContext, job: Mapping[str, Any] | None, tail_lines: int = 30) -> str:
    """The end of the log of the replay Job's last pod; "" when there is none or the API cannot serve it (best
    effort)."""
    pods = _job_pods(ctx, job)
    if not pods:
        return ""
    try:
        return ctx.world.cluster.read_pod_log(ctx.replay.namespace, pods[-1]["metadata"]["name"], tail_lines)
    except KubernetesUnavailable:
        return ""


def _new_version_created(status: Mapping[str, Any]) -> bool:
    """Whether a handover got as far as creating the new version (which runs on the replay's internal topics)."""
    steps = {step.get("name"): step.get("state") for step in status.get("handover") or []}
    return steps.get("createNewVersion") in (StepState.STARTED.value, StepState.DONE.value) or bool(
        status.get("newVersionUid")
    )


def _markers(ctx: ReplayContext) -> str:
    return f"streamapp-replay-{ctx.status['replayId']}-markers"


@dataclass(frozen=True)
class Given:
    """What one reconcile reports against: the replay, its status before the reconcile and the instant (RFC 3339)
    that stamps condition transitions."""

    replay: Replay
    previous: dict[str, Any]
    now: str


def _failed(given: Given, status: dict[str, Any], exc: Failed, events: list[Event]) -> ReplayResult:
    now = given.now
    status = {**status, "phase": Phase.FAILED.value, "completionTime": now, "progress": f"failed: {exc.reason}"}
    status.pop("waiting", None)
    events = [*events, Event("Warning", exc.reason, str(exc))]
    return ReplayResult(status=_finish(given, status, Problem(exc.reason, str(exc))), events=events)


def _blocked(given: Given, status: dict[str, Any], exc: Blocked, events: list[Event]) -> ReplayResult:
    """The replay waits, ``Degraded`` naming what is in the way; a Warning event when that changes, not every tick."""
    status["waiting"] = f"blocked: {exc}"
    before: dict[str, Any] = next(
        (c for c in given.previous.get("conditions") or [] if c.get("type") == "Degraded"), {}
    )
    said = before.get("status") == "True" and before.get("message") == str(exc)
    events = events if said else [*events, Event("Warning", exc.problem.reason, str(exc))]
    return ReplayResult(status=_finish(given, status, exc.problem), events=events)


def _finish(given: Given, status: dict[str, Any], problem: Problem | None = None) -> dict[str, Any]:
    """The status to write: conditions from the phase (Failed, Complete, Progressing), observedGeneration."""
    replay, previous, now = given.replay, given.previous, given.now
    phase = status.get("phase", Phase.PENDING.value)
    waiting = status.pop("waiting", None)
    failed = ("True", problem.reason, problem.message) if phase == Phase.FAILED.value and problem else ("False", "", "")
    if phase != Phase.FAILED.value and problem is not None:  # a retried problem (Kafka down, API refusal)
        degraded = ("True", problem.reason, problem.message)
    else:
        degraded = ("False", "", "")
    complete = phase == Phase.SUCCEEDED.value
    progressing = phase in (Phase.PENDING.value, Phase.RUNNING.value, Phase.HANDING_OVER.value)
    wanted = {
        "Complete": ("True", "Succeeded", status.get("progress") or "") if complete else ("False", phase, ""),
        "Progressing": ("True", phase, waiting or status.get("progress") or "")
        if progressing
        else ("False", phase, ""),
        "Failed": failed,
        "Degraded": degraded,
    }
    old = {c.get("type"): c for c in previous.get("conditions") or []}
    conditions = []
    for kind, (value, reason, message) in wanted.items():
        decided = Condition(kind, value, reason or ("None" if value == "False" else kind), message, replay.generation)
        conditions.append(transition(old.get(kind), decided, now))
    if status.get("progress") is None:
        status["progress"] = waiting or phase.lower()
    return {**status, "conditions": conditions, "observedGeneration": replay.generation}


def _seconds_since(start: str | None, now: str) -> int | None:
    if not start:
        return None
    return max(0, int(seconds_between(start, now)))
