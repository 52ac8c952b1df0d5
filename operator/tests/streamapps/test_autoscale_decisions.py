"""Autoscaling decisions: the replicas follow the target, never pass the task count or the bounds, scale up at
once, scale down only to the highest recommendation of the stabilization window, and never flap."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from streamapp_operator.streamapps.autoscale import (
    AutoscalingSpec,
    AutoscalingTarget,
    Decision,
    Observed,
    Recommendation,
    ScalingHistory,
    decide,
)

WINDOW = 300.0


def spec(**target: float | int) -> AutoscalingSpec:
    return AutoscalingSpec(
        min_replicas=1,
        max_replicas=8,
        target=AutoscalingTarget.model_validate(target or {"lag_per_task": 1000}),
        scale_down_cooldown_seconds=0,
        scale_down_stabilization_seconds=WINDOW,
    )


def observed(replicas: int = 2, lag: int = 0, rate: float = 0.0, tasks: int = 12, threads: int = 2) -> Observed:
    return Observed(replicas=replicas, threads_per_pod=threads, tasks=tasks, total_lag=lag, records_per_second=rate)


EMPTY = ScalingHistory()


def test_lag_per_task_scales_up_at_once_to_the_threads_the_lag_needs() -> None:
    decision = decide(spec(lag_per_task=1000), observed(replicas=1, lag=7_500), EMPTY, now=1000.0)
    assert decision.replicas == 4  # 8 threads for 7,500 records of lag, 2 threads per pod
    assert "scale up 1 -> 4" in decision.reason
    assert decision.history.last_scale_up_at == 1000.0


def test_the_task_count_caps_the_replicas_even_below_max_replicas() -> None:
    decision = decide(spec(lag_per_task=10), observed(replicas=1, lag=1_000_000, tasks=5), EMPTY, now=0.0)
    assert decision.replicas == 3  # ceil(5 tasks / 2 threads): a fourth pod would idle


def test_max_replicas_caps_the_replicas() -> None:
    decision = decide(spec(lag_per_task=10), observed(replicas=1, lag=1_000_000, tasks=100), EMPTY, now=0.0)
    assert decision.replicas == 8


def test_records_per_second_per_thread_target() -> None:
    decision = decide(spec(records_per_second_per_thread=500), observed(replicas=1, rate=2_600.0), EMPTY, now=0.0)
    assert decision.replicas == 3  # 6 threads of 500 records/s


def test_catch_up_target_uses_the_current_rate_per_thread() -> None:
    # 2 pods x 2 threads process 400 records/s: 100 per thread; 60,000 records in 60 s need 10 threads
    decision = decide(spec(catch_up_seconds=60), observed(replicas=2, lag=60_000, rate=400.0), EMPTY, now=0.0)
    assert decision.replicas == 5


def test_catch_up_without_a_rate_keeps_the_current_replicas() -> None:
    decision = decide(spec(catch_up_seconds=60), observed(replicas=2, lag=60_000, rate=0.0), EMPTY, now=0.0)
    assert decision.replicas == 2
    assert "no processing rate yet" in decision.reason


def test_scale_down_waits_for_the_highest_recommendation_of_the_window() -> None:
    history = ScalingHistory(recommendations=(Recommendation(at=900.0, replicas=4),))
    held = decide(spec(), observed(replicas=4, lag=0), history, now=1000.0)
    assert held.replicas == 4
    assert "stabilization window" in held.reason
    later = decide(spec(), observed(replicas=4, lag=0), held.history, now=900.0 + WINDOW)
    assert later.replicas == 1
    assert later.history.last_scale_down_at == 900.0 + WINDOW


def test_scale_down_goes_to_the_window_maximum_not_to_the_newest_recommendation() -> None:
    history = ScalingHistory(
        recommendations=(Recommendation(at=700.0, replicas=6), Recommendation(at=950.0, replicas=3))
    )
    decision = decide(spec(), observed(replicas=6, lag=0), history, now=1100.0)
    assert decision.replicas == 3  # 6 left the window at 1000; the highest left is 3


def test_scale_up_cooldown_delays_a_second_scale_up() -> None:
    cooled = spec().model_copy(update={"scale_up_cooldown_seconds": 60})
    history = ScalingHistory(last_scale_up_at=990.0)
    decision = decide(cooled, observed(replicas=2, lag=7_500), history, now=1000.0)
    assert decision.replicas == 2
    assert "scale-up cooldown" in decision.reason
    assert decide(cooled, observed(replicas=2, lag=7_500), history, now=1050.0).replicas == 4


def test_scale_down_cooldown_counts_from_the_last_scale_event() -> None:
    cooled = spec().model_copy(update={"scale_down_cooldown_seconds": 120, "scale_down_stabilization_seconds": 0})
    history = ScalingHistory(last_scale_up_at=950.0)
    assert decide(cooled, observed(replicas=4), history, now=1000.0).replicas == 4
    assert decide(cooled, observed(replicas=4), history, now=1070.0).replicas == 1


def test_min_replicas_zero_scales_to_zero_only_without_lag_and_wakes_on_lag() -> None:
    to_zero = spec().model_copy(update={"min_replicas": 0, "scale_down_stabilization_seconds": 0})
    assert decide(to_zero, observed(replicas=1, lag=0), EMPTY, now=0.0).replicas == 0
    assert decide(to_zero, observed(replicas=0, lag=1), EMPTY, now=0.0).replicas == 1


def test_replicas_above_the_task_ceiling_come_down_at_once() -> None:
    history = ScalingHistory(recommendations=(Recommendation(at=999.0, replicas=8),))
    decision = decide(spec(), observed(replicas=8, lag=10**9, tasks=4), history, now=1000.0)
    assert decision.replicas == 2


@pytest.mark.parametrize(
    "target",
    [{}, {"lag_per_task": 10, "catch_up_seconds": 5}, {"lag_per_task": 0}],
)
def test_a_target_needs_exactly_one_positive_metric(target: dict[str, int]) -> None:
    with pytest.raises(ValidationError):
        AutoscalingTarget.model_validate(target)


def test_min_replicas_above_max_replicas_is_refused() -> None:
    with pytest.raises(ValidationError, match="minReplicas"):
        AutoscalingSpec.model_validate({"minReplicas": 5, "maxReplicas": 2, "target": {"lagPerTask": 10}})


def test_the_spec_reads_camel_case() -> None:
    parsed = AutoscalingSpec.model_validate(
        {"minReplicas": 0, "maxReplicas": 4, "target": {"catchUpSeconds": 30}, "scaleDownStabilizationSeconds": 60}
    )
    assert (parsed.min_replicas, parsed.target.catch_up_seconds, parsed.scale_down_stabilization_seconds) == (0, 30, 60)


# -- properties ---------------------------------------------------------------------------------------------

targets = st.one_of(
    st.builds(AutoscalingTarget, lag_per_task=st.integers(1, 5_000)),
    st.builds(AutoscalingTarget, records_per_second_per_thread=st.floats(1, 5_000)),
    st.builds(AutoscalingTarget, catch_up_seconds=st.floats(1, 600)),
)
specs = st.builds(
    lambda low, extra, target, up, down, window: AutoscalingSpec(
        min_replicas=low,
        max_replicas=max(1, low + extra),
        target=target,
        scale_up_cooldown_seconds=up,
        scale_down_cooldown_seconds=down,
        scale_down_stabilization_seconds=window,
    ),
    st.integers(0, 4),
    st.integers(0, 12),
    targets,
    st.sampled_from([0.0, 30.0]),
    st.sampled_from([0.0, 60.0]),
    st.sampled_from([0.0, 120.0, 300.0]),
)
observations = st.builds(
    Observed,
    replicas=st.integers(0, 20),
    threads_per_pod=st.integers(1, 4),
    tasks=st.integers(0, 40),
    total_lag=st.integers(0, 10**7),
    records_per_second=st.floats(0, 10**5),
)
histories = st.builds(
    ScalingHistory,
    recommendations=st.lists(
        st.builds(Recommendation, at=st.floats(0, 1000), replicas=st.integers(0, 20)), max_size=5
    ).map(tuple),
    last_scale_up_at=st.none() | st.floats(0, 1000),
    last_scale_down_at=st.none() | st.floats(0, 1000),
)


def bounds(s: AutoscalingSpec, o: Observed) -> tuple[int, int]:
    ceiling = s.max_replicas if o.tasks == 0 else min(s.max_replicas, -(-o.tasks // o.threads_per_pod))
    floor = min(s.min_replicas, ceiling)
    return (max(floor, 1) if o.total_lag > 0 else floor), ceiling


@settings(max_examples=300, deadline=None)
@given(s=specs, o=observations, h=histories)
def test_the_decision_is_always_within_min_max_and_the_task_ceiling(
    s: AutoscalingSpec, o: Observed, h: ScalingHistory
) -> None:
    decision = decide(s, o, h, now=1000.0)
    low, high = bounds(s, o)
    assert low <= decision.replicas <= high
    assert decision.replicas <= s.max_replicas
    assert decision.history.recommendations[-1] == Recommendation(at=1000.0, replicas=decision.recommendation)


@settings(max_examples=300, deadline=None)
@given(s=specs, o=observations, h=histories, more=st.integers(0, 10**6))
def test_more_lag_never_gives_fewer_replicas(s: AutoscalingSpec, o: Observed, h: ScalingHistory, more: int) -> None:
    bigger = Observed(o.replicas, o.threads_per_pod, o.tasks, o.total_lag + more, o.records_per_second)
    assert decide(s, bigger, h, now=1000.0).replicas >= decide(s, o, h, now=1000.0).replicas


@settings(max_examples=200, deadline=None)
@given(
    s=specs,
    threads=st.integers(1, 4),
    tasks=st.integers(1, 40),
    steps=st.lists(st.tuples(st.floats(1, 60), st.integers(0, 10**6), st.floats(0, 10**5)), min_size=2, max_size=40),
)
def test_noisy_metrics_never_flap_down_up_down_within_the_window(
    s: AutoscalingSpec, threads: int, tasks: int, steps: list[tuple[float, int, float]]
) -> None:
    """Feed decisions back (replicas, history) over noisy lag and rates: after a scale-up, no scale-down comes
    before a whole stabilization window has passed, so no down-up-down fits in one window."""
    replicas, history, now = 1, ScalingHistory(), 0.0
    events: list[tuple[float, str]] = []
    for gap, lag, rate in steps:
        now += gap
        decision: Decision = decide(s, Observed(replicas, threads, tasks, lag, rate), history, now)
        if decision.replicas != replicas:
            events.append((now, "up" if decision.replicas > replicas else "down"))
        replicas, history = decision.replicas, decision.history
    for (t_up, kind), (t_next, next_kind) in itertools.pairwise(events):
        if kind == "up" and next_kind == "down":
            assert t_next - t_up >= s.scale_down_stabilization_seconds, events
    for (t0, a), (_, b), (t2, c) in zip(events, events[1:], events[2:], strict=False):
        if (a, b, c) == ("down", "up", "down"):
            assert t2 - t0 >= s.scale_down_stabilization_seconds, events
