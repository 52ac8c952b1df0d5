"""The handover (``mode: handover``): :data:`handover.HANDOVER_STEPS` in order, each recorded ``Started`` in
``status.handover`` (written at once, before it acts) and ``Done`` after: the new version's consumer group offsets
set to the replay's end offsets, the new version's StreamApp created (its stores restore from the changelogs the
replay wrote), awaited until Ready and caught up, then the old version removed by policy. A StreamApp this replay
did not create (by uid) is never taken as its new version.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from streamapp_operator.outcomes import Event
from streamapp_operator.steps import SEAM_FAILURES, Failed, Halt, StepOutcome, Waiting, seam_problem
from streamapp_operator.streamreplays import handover, job_reports, offset_range
from streamapp_operator.streamreplays.checks import app_claim, stranger_in_group
from streamapp_operator.streamreplays.context import APP_MISSING, ReplayContext, topology_document
from streamapp_operator.streamreplays.resources import OldVersionPolicy, Phase, StepState


@dataclass(frozen=True)
class Acted:
    """What one handover step did: its ``message`` (in ``status.handover``), the ``status`` fields it recorded, and
    the halt that stops the handover there (None: the step is done)."""

    message: str = ""
    status: Mapping[str, Any] = field(default_factory=dict)
    halt: Halt | None = None


@dataclass(frozen=True)
class NameHolder:
    """The StreamApp under the new version's name: ``app`` when this replay created it (None: there is none yet),
    or ``conflict`` naming why it is not this replay's (``handover.new_version_conflict``)."""

    app: dict[str, Any] | None = None
    conflict: Failed | None = None


def hand_over(ctx: ReplayContext) -> StepOutcome:
    """The handover's next steps, each recorded ``Started`` (written at once) before it acts and ``Done`` after,
    until one waits or fails; after the last the replay has succeeded."""
    if ctx.status.get("phase") != Phase.HANDING_OVER.value:
        return StepOutcome()
    outcome = StepOutcome()
    try:
        while (step := handover.next_step(ctx.status.get("handover"))) is not None:
            ctx = _record(ctx, outcome, {"progress": job_reports.progress_text("HandingOver", step=step)})
            recorded = ctx.status.get("handover") or []
            if not any(s.get("name") == step and s.get("state") == StepState.STARTED for s in recorded):
                # the intent, written before the step acts: a restarted operator resumes this step
                steps = handover.record_step(recorded, step, StepState.STARTED, ctx.now)
                intent = {"handover": steps, "progress": ctx.status["progress"]}
                ctx.world.cluster.patch_replay_status(ctx.replay.namespace, ctx.replay.name, intent)
                ctx = _record(ctx, outcome, {"handover": steps})
            acted = _HANDOVER[step](ctx)
            ctx = _record(ctx, outcome, acted.status)
            if acted.halt is not None:
                outcome.halt = acted.halt
                return outcome
            done = handover.record_step(ctx.status.get("handover"), step, StepState.DONE, ctx.now, acted.message)
            ctx = _record(ctx, outcome, {"handover": done})
            outcome.events.append(Event("Normal", "HandoverStep", f"{step}: {acted.message}"))
    except SEAM_FAILURES as exc:  # the intent recorded before the seam failed is kept (the status says Started)
        outcome.problem = seam_problem(exc)
        return outcome
    active = f"done: {ctx.status.get('newVersion')} is active"
    _record(ctx, outcome, {"phase": Phase.SUCCEEDED.value, "completionTime": ctx.now, "progress": active})
    return outcome


def _record(ctx: ReplayContext, outcome: StepOutcome, fields: Mapping[str, Any]) -> ReplayContext:
    """``fields`` recorded in ``outcome`` and in the context the next handover step reads."""
    outcome.status.update(fields)
    return ctx.recorded(StepOutcome(status=dict(fields)))


def our_new_version(ctx: ReplayContext) -> NameHolder:
    """The new version's StreamApp if this replay created it (its uid annotation; the uid recorded in status once
    created); a StreamApp of that name that is not this replay's (an earlier StreamReplay's of the same name, or
    the app itself) is a conflict, never adopted or touched."""
    steps = {s.get("name"): s.get("state") for s in ctx.status.get("handover") or []}
    created_unannotated = steps.get("createNewVersion") == StepState.DONE and not ctx.status.get("newVersionUid")
    name = handover.new_version_name(ctx.spec, ctx.replay.name)
    existing = ctx.world.cluster.get("StreamApp", ctx.replay.namespace, name)
    claimant = handover.Claimant(ctx.replay.name, ctx.replay.uid, ctx.status.get("newVersionUid"), created_unannotated)
    conflict = handover.new_version_conflict(name, ctx.spec.app_ref.name, existing, claimant)
    return NameHolder(conflict=Failed(*conflict)) if conflict is not None else NameHolder(existing)


def _set_group_offsets(ctx: ReplayContext) -> Acted:
    if ctx.kafka is None:  # the app (and with it the Kafka connection) is gone before the new version exists
        return Acted(halt=Failed(APP_MISSING, f"StreamApp {ctx.spec.app_ref.name} was deleted before the handover"))
    group = ctx.status["applicationId"]
    end = offset_range.from_wire(ctx.status["resolvedOffsets"]["to"])
    held = our_new_version(ctx)
    if held.conflict is not None:
        return Acted(halt=held.conflict)
    if held.app is not None:
        return Acted(f"group {group} kept: the new version exists already")  # never rewind a running version
    # a StreamApp older than the replay that took the id during the Spark run keeps its offsets; a newer one is
    # refused on its side (identity.replay_peer), but one that ran before the replay's id was claimed has members
    refused = app_claim(ctx) or stranger_in_group(ctx)
    if refused is not None:
        return Acted(halt=refused)
    counts = {t: len(parts) for t, parts in end.items()}
    if ctx.kafka.committed_offsets(group, counts) != end:
        ctx.kafka.set_group_offsets(group, end)
    return Acted(f"group {group} starts at the replay's end offsets")


def _new_version_replicas(ctx: ReplayContext) -> int | None:
    """``handover.replicas``; else, under TakeOver, the old version's replicas recorded before its stop (its spec
    says 0 by then); else None (the app's own ``spec.replicas``)."""
    if ctx.spec.handover.replicas is not None:
        return ctx.spec.handover.replicas
    recorded = (ctx.status.get("takeOver") or {}).get("replicas")
    return int(recorded) if recorded is not None else None


def _create_new_version(ctx: ReplayContext) -> Acted:
    name = handover.new_version_name(ctx.spec, ctx.replay.name)
    held = our_new_version(ctx)
    if held.conflict is not None:
        return Acted(halt=held.conflict)
    if held.app is not None:  # created before a restart: its uid annotation is this replay's
        return Acted(f"StreamApp {name} exists", {"newVersion": name, "newVersionUid": held.app["metadata"].get("uid")})
    if ctx.app is None:
        gone = Failed(APP_MISSING, f"StreamApp {ctx.spec.app_ref.name} was deleted before the handover")
        return Acted(status={"newVersion": name}, halt=gone)
    version = handover.NewVersion(
        name,
        ctx.status["applicationId"],
        topology_document(ctx),
        image=ctx.spec.handover.image or ctx.spec.image,
        replicas=_new_version_replicas(ctx),
    )
    created = ctx.world.cluster.apply(handover.new_version(ctx.app, version, ctx.replay.name, ctx.replay.uid))
    # the uid it was created with: a StreamApp made again under its name later is not this replay's
    uid = (created.get("metadata") or {}).get("uid")
    message = f"created StreamApp {name} (application.id {ctx.status['applicationId']})"
    return Acted(message, {"newVersion": name, "newVersionUid": uid})


def _await_caught_up(ctx: ReplayContext) -> Acted:
    held = our_new_version(ctx)
    if held.conflict is not None:
        return Acted(halt=held.conflict)
    done, message = handover.caught_up(held.app, ctx.spec.handover.max_lag)
    return Acted(message) if done else Acted(halt=Waiting(message))


def _remove_old_version(ctx: ReplayContext) -> Acted:
    old = ctx.spec.app_ref.name
    held = our_new_version(ctx)  # the old version is never deleted for a StreamApp this replay did not create
    if held.conflict is not None:
        return Acted(halt=held.conflict)
    if ctx.spec.handover.old_version == OldVersionPolicy.KEEP:
        if handover.taking_over(ctx.spec):
            return Acted(
                f"StreamApp {old} kept at 0 replicas (oldVersion: Keep; its outputs are the new version's now)"
            )
        return Acted(f"StreamApp {old} kept (oldVersion: Keep)")
    if held.app is None:  # deleted since it caught up: never leave no version running
        name = handover.new_version_name(ctx.spec, ctx.replay.name)
        return Acted(
            halt=Failed("NewVersionMissing", f"the new version {name} is gone: StreamApp {old} is kept running")
        )
    done, message = handover.caught_up(held.app, ctx.spec.handover.max_lag)
    if not done:  # checked again as it acts (a restart may resume this step long after awaitCaughtUp)
        return Acted(halt=Waiting(f"StreamApp {old} stays until the new version is caught up: {message}"))
    if ctx.app is None:
        return Acted(f"StreamApp {old} is gone already")
    uid, replayed = ctx.app["metadata"].get("uid"), ctx.status.get("appUid")
    if replayed and uid != replayed:  # deleted and made again by someone since the replay started: not ours
        return Acted(f"StreamApp {old} is not the app replayed (made again since, uid {uid}): left untouched")
    ctx.world.cluster.delete("StreamApp", ctx.replay.namespace, old, uid)
    return Acted(f"StreamApp {old} deleted (oldVersion: Delete)")


_HANDOVER: dict[str, Callable[[ReplayContext], Acted]] = {
    "setGroupOffsets": _set_group_offsets,
    "createNewVersion": _create_new_version,
    "awaitCaughtUp": _await_caught_up,
    "removeOldVersion": _remove_old_version,
}
assert tuple(_HANDOVER) == handover.HANDOVER_STEPS
