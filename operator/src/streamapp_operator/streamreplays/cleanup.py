"""What a StreamReplay leaves when it ends: once it succeeded, the topics nothing reads any more are deleted (a
step); when it failed, the old version it stopped goes on and the topics its Job made are deleted, unless a new
version runs on them (best effort: the failure is what its status must say).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from streamapp_operator.k8s import KubernetesUnavailable
from streamapp_operator.kafka import KafkaUnavailable
from streamapp_operator.outcomes import Event
from streamapp_operator.steps import StepOutcome, seam_problem
from streamapp_operator.streamreplays import dead_letters
from streamapp_operator.streamreplays.context import ReplayContext, ReplayKafka, new_version_created
from streamapp_operator.streamreplays.range_steps import restore_old_version
from streamapp_operator.streamreplays.resources import Phase, ReplayMode


def delete_leftover_topics(ctx: ReplayContext) -> StepOutcome:
    """Once the replay succeeded: delete what it made in Kafka that nothing reads any more, so replays do not pile
    up topics (the audit counted 21 from 13 replays): its done-markers topic and, for a backfill, the changelog and
    repartition topics of its ``application.id`` (no app ever runs under it). A handover's new version runs under
    that ``application.id`` and keeps them (its warm state). Recorded in ``status.topicsDeleted``."""
    if ctx.status.get("phase") != Phase.SUCCEEDED.value or "topicsDeleted" in ctx.status:
        return StepOutcome()
    assert ctx.kafka is not None
    return delete_leftovers(ctx.kafka, ctx.spec.mode, ctx.status)


def undo_failed(ctx: ReplayContext) -> StepOutcome:
    """A failed replay (``ctx.status`` as recorded when it failed): the old version a TakeOver stopped is scaled back,
    and, once its Job existed and no new version runs on them, the topics it made are deleted; best effort."""
    undone = StepOutcome()
    with contextlib.suppress(KubernetesUnavailable):  # best effort, as the clean-up: the failure is what counts
        undone = restore_old_version(ctx)
    if ctx.kafka is not None and ctx.status.get("job") and not new_version_created(ctx.status):
        with contextlib.suppress(KafkaUnavailable):  # best effort: the failure is what the status must say
            deleted = delete_leftovers(ctx.kafka, ReplayMode.BACKFILL, {**ctx.status, **undone.status})
            undone = StepOutcome(events=[*undone.events, *deleted.events], status={**undone.status, **deleted.status})
    return undone


def delete_leftovers(kafka: ReplayKafka, mode: ReplayMode, status: Mapping[str, Any]) -> StepOutcome:
    """Delete the markers, a backfill's internal topics and the replay's dead-letter topic when it is empty, recorded
    in ``status.topicsDeleted``; a dead-letter topic with records stays, named in ``status.deadLetters`` and a Warning
    event (never deleted silently)."""
    doomed = [f"streamapp-replay-{status['replayId']}-markers"] if status.get("replayId") else []
    if mode == ReplayMode.BACKFILL and status.get("applicationId"):
        doomed += kafka.internal_topics(status["applicationId"])
    outcome = StepOutcome()
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
            outcome.status["deadLetters"] = kept.records
            outcome.events.append(Event("Warning", "DeadLetters", kept.message))
    try:
        outcome.status["topicsDeleted"] = kafka.delete_topics(doomed) if doomed else []
    except KafkaUnavailable as exc:  # the dead letters kept are said all the same
        outcome.problem = seam_problem(exc)
    return outcome
