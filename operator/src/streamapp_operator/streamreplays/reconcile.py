"""The StreamReplay controller: a level-based reconcile as observe -> decide (pure) -> run steps -> report.

The same :func:`reconcile_replay` runs on create, resume and every timer tick. It reads the StreamApp it replays
(``observe``), decides the topology and the identities it runs under (``decide``), connects to the app's Kafka,
then runs :data:`STEPS` over ``steps.run_steps``; each step reads what the status already records and does only
what is missing, so a restarted operator resumes where the status says; it returns what it recorded, and the next
step reads the context with it (``ReplayContext.recorded``). Waiting, blocked and failed are the steps' outcomes
(``steps.Halt``), as for the StreamApp Kind; ``report`` turns the run into status and events:

0. ``check_identity``: before the Job, the replay's ``application.id`` is no StreamApp's (the ``peers``
   index) and its consumer group has neither members nor committed offsets;
   ``check_children``: until the Job has finished, its Job, ConfigMap and ServiceAccount are its own or
   absent (someone else's: ``Degraded`` names it, the replay waits, nothing is applied over it);
1. ``stop_old_version`` (``handover.outputs: TakeOver``), then ``resolve_offsets``: explicit ``[from, to)``
   offsets per input partition (Kafka admin: earliest, latest, offsets for a timestamp), written to
   ``status.resolvedOffsets`` before anything runs;
2. ``create_sink_topics``: the topics the replay's topology writes, when missing (as many partitions as the
   input topics);
3. ``launch_job``: the ServiceAccount (no API rights, no token), the ConfigMap with the replay plan and the
   Job running ``streamapp replay run`` in the replay image (``spark.mode: local``);
4. ``track_job``: the Job's phase and progress: the last ``replay-progress`` report in its pod's log gives the
   input records processed (``status.recordsProcessed``, ``percentProcessed``; an unreadable log only leaves
   them out), the done markers the records written so far, its pod's last line the result. A failed Job
   fails the replay with the pod's error in the ``Failed`` condition; the running app is untouched;
5. ``hand_over`` (``mode: handover``): ``handover_steps``, each recorded ``Started`` then ``Done`` in
   ``status.handover``;
6. ``delete_leftover_topics``: what nothing reads any more, once the replay succeeded.

A failed replay is undone where it can be (``cleanup.undo_failed``): the old version it stopped goes on, the
topics its Job made are deleted.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from streamapp_operator.steps import Blocked, Failed, StepOutcome, StepsRun, run_steps
from streamapp_operator.streamreplays.checks import check_children, check_identity
from streamapp_operator.streamreplays.cleanup import delete_leftover_topics, undo_failed
from streamapp_operator.streamreplays.context import ReplayContext, ReplayWorld
from streamapp_operator.streamreplays.decide import decide, parse_spec
from streamapp_operator.streamreplays.handover_steps import hand_over
from streamapp_operator.streamreplays.job_steps import create_sink_topics, launch_job, track_job
from streamapp_operator.streamreplays.jobs import app_deleted_mid_job
from streamapp_operator.streamreplays.observe import connect, observe
from streamapp_operator.streamreplays.range_steps import resolve_offsets, stop_old_version
from streamapp_operator.streamreplays.report import Given, ReplayResult, report
from streamapp_operator.streamreplays.resources import Phase, Replay

#: The StreamReplay's reconcile, in order (``steps.run_steps``).
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


def reconcile_replay(
    replay: Replay, spec: dict[str, Any], status: dict[str, Any], world: ReplayWorld, now: str
) -> ReplayResult:
    """Reconcile one StreamReplay; never raises for an invalid one (the status says why). A finished one
    (``Succeeded``, ``Failed``) is left as it is (an empty status)."""
    given, current = Given(replay, dict(status), now), {"phase": Phase.PENDING.value, **status}
    if current["phase"] in (Phase.SUCCEEDED.value, Phase.FAILED.value):
        return ReplayResult(status={})
    parsed = parse_spec(spec)
    if isinstance(parsed, Failed):
        return report(given, current, _halted(StepOutcome(halt=parsed)))
    seen = observe(world, replay, parsed, current)
    if seen.app is None and current["phase"] == Phase.RUNNING.value:  # its Job settles the replay
        return report(given, current, _halted(app_deleted_mid_job(world.cluster, replay, parsed, current)))
    decided = decide(replay, parsed, seen.app, seen.name_holder, current)
    current.update(decided.outcome.status)
    if decided.outcome.halt is not None or decided.description is None:
        return report(given, current, _halted(decided.outcome))
    kafka = connect(world, replay, parsed, decided.app_spec) if decided.app_spec is not None else None
    if isinstance(kafka, Blocked):  # no client without its Secret, nor with settings librdkafka refuses
        return report(given, current, _halted(StepOutcome(halt=kafka)))
    ctx = ReplayContext(replay, parsed, seen.app, decided.app_spec, world, kafka, decided.description, current, now)
    run = run_steps(STEPS, ctx, advance=ReplayContext.recorded)
    undone = undo_failed(replace(ctx, status={**current, **run.status})) if isinstance(run.halt, Failed) else None
    return report(given, current, run, undone)


def _halted(outcome: StepOutcome) -> StepsRun:
    """A run that stopped before the steps, as ``outcome`` (the decisions' or the missing app's) ended it."""
    return StepsRun(outcomes=[("decide", outcome)], halt=outcome.halt)
