"""The StreamReplay's checks before it acts: its identity (``application.id`` and consumer group) is its own, no
other replay is in its way, and the children of its names are its own. Each is a step, or a check a handover step
repeats; a check halts the run (``Failed``, or ``Blocked`` while someone else's child is in the way).
"""

from __future__ import annotations

from streamapp_operator.identity import CONSUMER_GROUP_IN_USE, Peer, foreign_members, identity_conflicts
from streamapp_operator.outcomes import Problem
from streamapp_operator.steps import Blocked, Failed, StepOutcome
from streamapp_operator.streamreplays import claims, job_manifests
from streamapp_operator.streamreplays.context import ReplayContext
from streamapp_operator.streamreplays.handover import new_version_name
from streamapp_operator.streamreplays.resources import Phase, SparkMode

#: The replay's creation time in the identity check when it is not known: sorts after every RFC 3339 instant, so
#: that every StreamApp claiming the replay's ``application.id`` holds it. Known, a StreamApp created before the
#: replay holds it, and one created after is refused on its side while the replay runs (``identity.replay_peer``).
AFTER_EVERY_APP = "~"


def check_identity(ctx: ReplayContext) -> StepOutcome:
    """Before anything runs: the replay's ``application.id`` (its changelog and repartition topics' prefix, the
    new version's consumer group) is no StreamApp's, and its consumer group has no member and no committed
    offset (only the handover sets them, after the Spark job): the replay never writes into another app's
    changelogs nor moves its offsets. Checked until the Job exists, or until an empty range's handover began
    (it has no Job and sets the group's offsets itself)."""
    if ctx.status.get("job") or ctx.status.get("phase") != Phase.PENDING.value:
        return StepOutcome()
    halt = app_claim(ctx) or _replay_in_the_way(ctx) or stranger_in_group(ctx) or _offsets_committed(ctx)
    return StepOutcome(halt=halt)


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
        return StepOutcome(halt=Blocked(Problem(problems[0].reason, "; ".join(p.message for p in problems))))
    return StepOutcome()


def app_claim(ctx: ReplayContext) -> Failed | None:
    """A StreamApp that claims the replay's ``application.id`` (``identity.identity_conflicts``), or None."""
    replay, application_id = ctx.replay, ctx.status["applicationId"]
    # a StreamApp created after the replay is refused on its side while the replay runs (identity.replay_peer)
    me = Peer(replay.namespace, replay.name, replay.uid, replay.created or AFTER_EVERY_APP, application_id)
    conflicts = identity_conflicts(me, ctx.world.peers())
    if not conflicts:
        return None
    default = "a StreamReplay's default is <the app's application.id>-<its name>"
    return Failed(conflicts[0].reason, f"the replay's {conflicts[0].message}; {default}")


def stranger_in_group(ctx: ReplayContext) -> Failed | None:
    """A member of the replay's consumer group that is not one of the new version's pods (``ConsumerGroupInUse``),
    or None."""
    assert ctx.kafka is not None
    group = ctx.status["applicationId"]
    members = [m.client_id for m in ctx.kafka.group_lag(group, []).members]
    strangers = foreign_members(group, members, new_version_name(ctx.spec, ctx.replay.name))
    return Failed(strangers[0].reason, strangers[0].message) if strangers else None


def _replay_in_the_way(ctx: ReplayContext) -> Failed | None:
    """An older unfinished StreamReplay of the same app or into the same topics (``claims.replay_conflicts``)."""
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
    return Failed(conflicts[0].reason, conflicts[0].message) if conflicts else None


def _offsets_committed(ctx: ReplayContext) -> Failed | None:
    """Committed offsets in the replay's consumer group that it did not set (``ConsumerGroupInUse``), or None."""
    assert ctx.kafka is not None
    group = ctx.status["applicationId"]
    inputs = ctx.kafka.partition_counts(ctx.description.external_source_topics())
    committed = ctx.kafka.committed_offsets(group, inputs)
    if not committed:
        return None
    where = ", ".join(f"{topic}[{p}]" for topic, parts in sorted(committed.items()) for p in sorted(parts))
    return Failed(
        CONSUMER_GROUP_IN_USE,
        f"consumer group {group!r} has committed offsets ({where}) that this replay did not set: another "
        "application uses that application.id; set spec.applicationId to an unused one",
    )
