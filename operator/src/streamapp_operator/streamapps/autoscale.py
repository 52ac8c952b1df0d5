"""Autoscaling decisions (pure): how many pods a StreamApp should run, from consumer lag and processing rates.

``decide(spec, observed, history, now)`` follows the Kubernetes HorizontalPodAutoscaler's algorithm
(``pkg/controller/podautoscaler``; "Stabilization window" in the HPA docs) with the Kafka Streams ceiling:

1. **Recommendation.** The target (``AutoscalingTarget``, exactly one) gives the stream threads needed:

   - ``lagPerTask`` L: ``ceil(totalLag / L)`` threads, the lag one thread, with one task, may carry (KEDA's Kafka
     scaler ``lagThreshold``);
   - ``recordsPerSecondPerThread`` R: ``ceil(recordsPerSecond / R)`` threads, R the rate a thread should run
     at (below its capacity, as a CPU utilization target is below 100%);
   - ``catchUpSeconds`` C: ``ceil(totalLag / (ratePerThread x C))`` threads, to drain the lag in C seconds at
     the rate one thread processes now (``recordsPerSecond / (replicas x threads)``); without a rate yet
     (no pods, or nothing processed) the current replica count stands.

   Pods = ``ceil(threads / threadsPerPod)``, then bounded: never above ``maxReplicas`` nor above
   ``ceil(tasks / threadsPerPod)`` (a thread without a task idles: Kafka Streams assigns each task to one
   thread), never below ``minReplicas`` (the ceiling wins when ``minReplicas`` exceeds it). ``minReplicas: 0``
   scales to zero only while the lag is 0: the operator reads lag from Kafka, not from the pods, so a
   stopped application wakes up (to at least one pod) at its first unprocessed record, as KEDA's activation.

2. **Scale up at once** to the recommendation, unless the last scale-up is less than
   ``scaleUpCooldownSeconds`` ago.

3. **Scale down to the highest recommendation** of the last ``scaleDownStabilizationSeconds`` (the HPA's
   stabilization window), and only when the last scale event (either way) is at least
   ``scaleDownCooldownSeconds`` ago. So after a scale-up no scale-down follows within the window: noisy
   metrics cannot make a down-up-down flap inside one window.

The bounds of step 1 apply to the result at once (a shrinking task count or ``maxReplicas`` is not
stabilized). Times are seconds since the epoch (floats); ``Decision.history`` is what to keep in status for
the next call (recommendations of the window, last scale times).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

__all__ = ["AutoscalingSpec", "AutoscalingTarget", "Decision", "Observed", "Recommendation", "ScalingHistory", "decide"]


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


class AutoscalingTarget(_Model):
    """What the autoscaler keeps constant; set exactly one field."""

    lag_per_task: int | None = Field(default=None, ge=1, description="Records of lag one stream thread may carry.")
    records_per_second_per_thread: float | None = Field(
        default=None, gt=0, description="Processing rate (records/s) each stream thread should run at."
    )
    catch_up_seconds: float | None = Field(
        default=None, gt=0, description="Seconds in which the current lag should be processed."
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> AutoscalingTarget:
        given = [f for f in ("lag_per_task", "records_per_second_per_thread", "catch_up_seconds") if getattr(self, f)]
        if len(given) != 1:
            raise ValueError(
                "set exactly one of lagPerTask, recordsPerSecondPerThread, catchUpSeconds"
                + (f" (got {', '.join(to_camel(g) for g in given)})" if given else "")
            )
        return self


class AutoscalingSpec(_Model):
    """``spec.autoscaling``: bounds, target, cooldowns and the scale-down stabilization window."""

    min_replicas: int = Field(default=1, ge=0, description="Fewest pods; 0 scales to zero while nothing lags.")
    max_replicas: int = Field(ge=1, description="Most pods (also never more than the task count allows).")
    target: AutoscalingTarget = Field(description="The metric to hold: lag per task, rate per thread or catch-up.")
    scale_up_cooldown_seconds: float = Field(default=0, ge=0, description="Least time between two scale-ups.")
    scale_down_cooldown_seconds: float = Field(
        default=60, ge=0, description="Least time from any scale event to a scale-down."
    )
    scale_down_stabilization_seconds: float = Field(
        default=300, ge=0, description="A scale-down goes to the highest recommendation of this many seconds."
    )

    @model_validator(mode="after")
    def _bounds(self) -> AutoscalingSpec:
        if self.min_replicas > self.max_replicas:
            raise ValueError(f"minReplicas ({self.min_replicas}) must not exceed maxReplicas ({self.max_replicas})")
        return self


@dataclass(frozen=True)
class Observed:
    """What the operator read: pods now (the ``/scale`` replicas), stream threads per pod, tasks (0: unknown),
    the group's total lag in records and the pods' summed processing rate in records per second."""

    replicas: int
    threads_per_pod: int
    tasks: int
    total_lag: int
    records_per_second: float


class Recommendation(_Model):
    """One recommendation (pods) and when it was made (seconds since the epoch)."""

    at: float
    replicas: int = Field(ge=0)


class ScalingHistory(_Model):
    """What the autoscaler keeps between calls (in status): the recommendations of the stabilization window
    and when it last scaled up and down."""

    recommendations: tuple[Recommendation, ...] = ()
    last_scale_up_at: float | None = None
    last_scale_down_at: float | None = None


@dataclass(frozen=True)
class Decision:
    """The replicas to set on ``/scale`` (``== observed.replicas``: no change), why (one line for status and an
    event), this call's recommendation, and the history to keep."""

    replicas: int
    reason: str
    recommendation: int
    history: ScalingHistory = field(default_factory=ScalingHistory)


def decide(spec: AutoscalingSpec, observed: Observed, history: ScalingHistory, now: float) -> Decision:
    """The replicas for ``observed`` at ``now`` (see the module docstring for the rules)."""
    current = observed.replicas
    threads = max(1, observed.threads_per_pod)
    ceiling = spec.max_replicas if observed.tasks <= 0 else min(spec.max_replicas, math.ceil(observed.tasks / threads))
    floor = min(spec.min_replicas, ceiling)
    if observed.total_lag > 0:
        floor = max(floor, 1)
    wanted, why = _wanted_threads(spec.target, observed)
    raw = current if wanted is None else math.ceil(wanted / threads)
    recommendation = min(max(raw, floor), ceiling)
    window = [r for r in history.recommendations if now - r.at < spec.scale_down_stabilization_seconds]
    recommendations = (*window, Recommendation(at=now, replicas=recommendation))
    last_event = max((t for t in (history.last_scale_up_at, history.last_scale_down_at) if t is not None), default=None)

    target, reason = current, f"{why}: {recommendation} pod(s) recommended, {current} running"
    if recommendation > current:
        if _since(history.last_scale_up_at, now) >= spec.scale_up_cooldown_seconds:
            target, reason = recommendation, f"{why}: scale up {current} -> {recommendation}"
        else:
            reason += f"; scale-up cooldown ({spec.scale_up_cooldown_seconds:g} s) not over"
    elif recommendation < current:
        stabilized = max(r.replicas for r in recommendations)
        if stabilized >= current:
            reason += f"; held by the stabilization window ({spec.scale_down_stabilization_seconds:g} s: {stabilized})"
        elif _since(last_event, now) < spec.scale_down_cooldown_seconds:
            reason += f"; scale-down cooldown ({spec.scale_down_cooldown_seconds:g} s) not over"
        else:
            target, reason = stabilized, f"{why}: scale down {current} -> {stabilized} (highest of the window)"
    bounded = min(max(target, floor), ceiling)
    if bounded != target:
        reason = f"{why}: {current} -> {bounded} to stay within [{floor}, {ceiling}] (min/max replicas, tasks)"
    return Decision(bounded, reason, recommendation, _history(history, recommendations, current, bounded, now))


def _wanted_threads(target: AutoscalingTarget, observed: Observed) -> tuple[int | None, str]:
    """Stream threads the target asks for (``None``: cannot tell yet) and the metric as text."""
    lag = max(0, observed.total_lag)
    rate = observed.records_per_second if math.isfinite(observed.records_per_second) else 0.0
    rate = max(0.0, rate)
    if target.lag_per_task is not None:
        return math.ceil(lag / target.lag_per_task), f"lag {lag} (target {target.lag_per_task} per task)"
    if target.records_per_second_per_thread is not None:
        per_thread = target.records_per_second_per_thread
        text = f"{rate:.1f} records/s (target {per_thread:g} per thread)"
        return math.ceil(min(rate / per_thread, _MOST_THREADS)), text
    assert target.catch_up_seconds is not None
    text = f"lag {lag} at {rate:.1f} records/s (target catch-up {target.catch_up_seconds:g} s)"
    if lag == 0:
        return 0, text
    running_threads = observed.replicas * max(1, observed.threads_per_pod)
    if rate <= 0 or running_threads == 0:
        return None, text + ", no processing rate yet"
    drained_per_thread = rate * target.catch_up_seconds / running_threads  # records one thread does in C s
    needed = lag / drained_per_thread if drained_per_thread > 0 else _MOST_THREADS  # a rate near 0: the ceiling
    return math.ceil(min(needed, _MOST_THREADS)), text


_MOST_THREADS = 1_000_000
"""More stream threads than any ceiling allows (keeps a near-zero rate's estimate finite)."""


def _since(at: float | None, now: float) -> float:
    return math.inf if at is None else now - at


def _history(
    before: ScalingHistory, recommendations: tuple[Recommendation, ...], current: int, replicas: int, now: float
) -> ScalingHistory:
    return ScalingHistory(
        recommendations=recommendations,
        last_scale_up_at=now if replicas > current else before.last_scale_up_at,
        last_scale_down_at=now if replicas < current else before.last_scale_down_at,
    )
