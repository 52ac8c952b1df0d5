"""The steps that settle what the replay reads: under ``handover.outputs: TakeOver`` the old version stopped first
(its committed offsets end the range), then the ``[from, to)`` offsets resolved against Kafka and recorded in
``status.resolvedOffsets`` before anything runs; a backfill over what the app already processed is refused unless
``spec.allowOverlap``.
"""

from __future__ import annotations

from typing import Any

from streamapp_operator.outcomes import Event
from streamapp_operator.steps import SEAM_FAILURES, Failed, StepOutcome, Waiting, seam_problem
from streamapp_operator.streamreplays import claims, offset_range, overlap, takeover
from streamapp_operator.streamreplays.context import ReplayContext
from streamapp_operator.streamreplays.handover import taking_over
from streamapp_operator.streamreplays.resources import ReplayMode, ReplayTo


def stop_old_version(ctx: ReplayContext) -> StepOutcome:
    """``handover.outputs: TakeOver``, before the range is resolved: scale the old version to 0 replicas (its
    replicas recorded first, to be restored on failure) and wait until it has no pod and its group no member
    (``streamapp_operator.streamreplays.takeover``)."""
    if not taking_over(ctx.spec) or ctx.status.get("resolvedOffsets"):
        return StepOutcome()
    assert ctx.kafka is not None and ctx.app is not None and ctx.app_spec is not None
    recorded = ctx.status.get("takeOver")
    why = takeover.refusal(ctx.app.get("spec") or {}) if recorded is None else None
    if why is not None:
        return StepOutcome(halt=Failed(takeover.TAKE_OVER_UNSUPPORTED, why))
    outcome = StepOutcome()
    try:
        if recorded is None:
            recorded = _stopping(ctx)
            outcome.status.update(takeOver=recorded, progress="stopping the old version (outputs: TakeOver)")
            # the intent first: a restarted operator (or a failure) scales it back to these replicas
            ctx.world.cluster.patch_replay_status(ctx.replay.namespace, ctx.replay.name, {"takeOver": recorded})
            message = f"Scaling StreamApp {ctx.spec.app_ref.name} to 0 (outputs: TakeOver)"
            outcome.events.append(Event("Normal", "OldVersionStopping", message))
        if ctx.app_spec.replicas != 0:
            ctx.world.cluster.scale_streamapp(ctx.replay.namespace, ctx.spec.app_ref.name, 0)
        members = [m.client_id for m in ctx.kafka.group_lag(recorded["applicationId"], []).members]
    except SEAM_FAILURES as exc:  # the replicas to restore stay recorded
        outcome.problem = seam_problem(exc)
        return outcome
    done, message = takeover.stopped(ctx.app, members)
    if not done:
        outcome.status["progress"] = message
        outcome.halt = Waiting(message)
        return outcome
    outcome.status["takeOver"] = {**recorded, "state": "Stopped"}
    return outcome


def _stopping(ctx: ReplayContext) -> dict[str, Any]:
    """``status.takeOver`` before the old version is stopped: its replicas, ``application.id`` and the outputs taken."""
    assert ctx.app is not None and ctx.app_spec is not None
    app_spec = ctx.app.get("spec") or {}
    app_id = (ctx.app.get("status") or {}).get("applicationId") or ctx.app_spec.effective_application_id(
        ctx.spec.app_ref.name
    )
    taken = claims.shared_outputs(ctx.description.sink_topics(), app_spec.get("topology") or {})
    return {"replicas": ctx.app_spec.replicas, "applicationId": app_id, "outputs": taken, "state": "Stopping"}


def restore_old_version(ctx: ReplayContext) -> StepOutcome:
    """A TakeOver handover failed before its new version existed: the old version goes on from where it stopped
    (its replicas as recorded)."""
    replicas = takeover.replicas_to_restore(ctx.status)
    if replicas is None or ctx.app is None:
        return StepOutcome()
    ctx.world.cluster.scale_streamapp(ctx.replay.namespace, ctx.spec.app_ref.name, replicas)
    why = "the handover failed before its new version existed"
    message = f"Scaled StreamApp {ctx.spec.app_ref.name} back to {replicas}: {why}"
    return StepOutcome(
        events=[Event("Normal", "OldVersionRestored", message)],
        status={"takeOver": {**ctx.status["takeOver"], "state": "Restored"}},
    )


def resolve_offsets(ctx: ReplayContext) -> StepOutcome:
    """Explicit ``[from, to)`` offsets per input partition (earliest, latest, offsets for a timestamp; under
    TakeOver the range ends at the old version's committed offsets), recorded in ``status.resolvedOffsets``."""
    if ctx.status.get("resolvedOffsets"):
        return StepOutcome()
    assert ctx.kafka is not None and ctx.app_spec is not None
    topics = ctx.description.external_source_topics()
    counts = ctx.kafka.partition_counts(topics)
    missing = [t for t in topics if t not in counts]
    if missing:
        return StepOutcome(halt=Failed("TopicMissing", f"input topic(s) {', '.join(missing)} do not exist"))
    positions = _positions(ctx, counts)
    try:
        start, end = offset_range.resolve_range(ctx.spec.from_, _end_at(ctx, counts, positions.earliest), positions)
    except offset_range.RangeError as exc:
        return StepOutcome(halt=Failed("InvalidRange", str(exc)))
    checked = _overlap(ctx, start, end) if ctx.spec.mode == ReplayMode.BACKFILL else StepOutcome()
    if checked.halt is not None:
        return checked
    read = sum(end[t][p] - o for t, parts in start.items() for p, o in parts.items())
    resolved = {"from": offset_range.to_wire(start), "to": offset_range.to_wire(end)}
    replaying = Event("Normal", "OffsetsResolved", f"Replaying {read} records of {', '.join(sorted(start))}")
    return StepOutcome(
        events=[*checked.events, replaying],
        status={"resolvedOffsets": resolved, "recordsRead": read, "progress": "offsets resolved"},
    )


def _positions(ctx: ReplayContext, counts: dict[str, int]) -> offset_range.KafkaPositions:
    """What Kafka answers for the input partitions: earliest, latest and the offsets of the spec's timestamps."""
    assert ctx.kafka is not None
    spec, kafka = ctx.spec, ctx.kafka
    return offset_range.KafkaPositions(
        earliest=kafka.list_offsets(counts, "earliest"),
        latest=kafka.list_offsets(counts, "latest"),
        from_time=kafka.list_offsets(counts, offset_range.timestamp_ms(spec.from_.timestamp))
        if spec.from_.timestamp
        else None,
        to_time=kafka.list_offsets(counts, offset_range.timestamp_ms(spec.to.timestamp)) if spec.to.timestamp else None,
    )


def _end_at(ctx: ReplayContext, counts: dict[str, int], earliest: offset_range.Offsets) -> ReplayTo:
    """The range's end as asked: ``spec.to``; under TakeOver where the old version stopped (its committed offsets)."""
    if not taking_over(ctx.spec):
        return ctx.spec.to
    assert ctx.kafka is not None
    stopped_at = ctx.kafka.committed_offsets(ctx.status["takeOver"]["applicationId"], counts)
    return ReplayTo(offsets=offset_range.to_wire(takeover.switch_offsets(stopped_at, earliest)))


def _overlap(ctx: ReplayContext, start: offset_range.Offsets, end: offset_range.Offsets) -> StepOutcome:
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
        return StepOutcome(halt=Failed(overlap.RANGE_OVERLAPS_APP, verdict.message))
    return StepOutcome(events=[Event("Warning", overlap.OVERLAP_ALLOWED, verdict.message)] if verdict.message else [])
