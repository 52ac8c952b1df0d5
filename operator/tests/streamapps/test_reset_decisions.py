"""The declarative reset's state machine: every step in order, each recorded in status before it runs, resumed
after an operator restart at any point, never run twice for one nonce, never resetting under a live group."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError
from streamapp.kafka.reset_plan import ToDatetime, ToEarliest, ToOffsets
from streamapp.kafka.types import TopicPartition
from streamapp_operator.streamapps.reset import RESET_STEPS, ResetObserved, ResetSpec, ResetStatus, Step, next_step

SPEC = ResetSpec(nonce="n1", to="earliest")
RUNNING = ResetObserved(replicas=3, pods=3, group_members=3, state_volumes=3)


@dataclass
class World:
    """A tiny cluster: scale actions change replicas; pods and members leave one reconcile later; the other
    actions are recorded. ``status`` is what the operator persisted."""

    observed: ResetObserved = RUNNING
    status: ResetStatus | None = None
    done: list[str] = field(default_factory=list)

    def reconcile(
        self, spec: ResetSpec | None, crash_before_action: bool = False, crash_before_after: bool = False
    ) -> Step:
        step = next_step(spec, self.status, self.observed)
        self.status = step.status  # recorded before acting
        if crash_before_action:
            return step
        self._settle()
        if step.action == "scaleToZero":
            self.observed = replace(self.observed, replicas=0)
        elif step.action == "scaleBack":
            assert step.replicas is not None
            self.observed = replace(self.observed, replicas=step.replicas)
        elif step.action == "deleteLocalState":
            self.observed = replace(self.observed, state_volumes=0)
        if step.action not in ("none", "wait"):
            self.done.append(step.action)
        if step.after is not None and not crash_before_after:
            self.status = step.after
        return step

    def _settle(self) -> None:
        """Pods follow the replicas one reconcile later (as a StatefulSet does)."""
        r = self.observed.replicas
        self.observed = replace(self.observed, pods=r, group_members=r)


def run(world: World, spec: ResetSpec | None, limit: int = 30) -> list[str]:
    actions: list[str] = []
    for _ in range(limit):
        step = world.reconcile(spec)
        actions.append(step.action)
        if step.action == "none":
            return actions
    raise AssertionError(f"no end after {limit} reconciles: {actions}")


def test_a_reset_runs_every_step_in_order_and_ends_done_with_the_replicas_back() -> None:
    world = World()
    actions = run(world, SPEC)
    assert world.done == ["scaleToZero", "resetOffsets", "deleteInternalTopics", "deleteLocalState", "scaleBack"]
    assert "wait" in actions  # pods and members had to leave before the offsets were reset
    assert world.status is not None and world.status.step == "done"
    assert world.observed.replicas == 3


def test_each_step_is_in_status_before_its_action() -> None:
    world = World()
    seen = []
    for _ in range(20):
        step = world.reconcile(SPEC)
        if step.action == "none":
            break
        assert step.status is not None
        seen.append((step.action, step.status.step))
    expected = {
        ("scaleToZero", "scaleToZero"),
        ("wait", "awaitStopped"),
        ("resetOffsets", "resetOffsets"),
        ("deleteInternalTopics", "deleteInternalTopics"),
        ("deleteLocalState", "deleteLocalState"),
        ("scaleBack", "scaleBack"),
    }
    assert set(seen) == expected


def test_a_finished_nonce_never_runs_again() -> None:
    world = World()
    run(world, SPEC)
    world.done.clear()
    for _ in range(3):
        assert world.reconcile(SPEC).action == "none"
    assert world.done == []


def test_a_new_nonce_runs_a_new_reset() -> None:
    world = World()
    run(world, SPEC)
    world.done.clear()
    run(world, ResetSpec(nonce="n2", to="2026-11-24T20:00:00Z"))
    assert world.done[1] == "resetOffsets"
    assert world.status is not None and (world.status.nonce, world.status.to) == ("n2", "2026-11-24T20:00:00Z")


def test_no_spec_and_no_status_is_no_reset() -> None:
    assert next_step(None, None, RUNNING).action == "none"


@pytest.mark.parametrize("crash_at", range(12))
@pytest.mark.parametrize("where", ["before_action", "before_after"])
def test_an_operator_restart_at_any_point_resumes_from_status_and_finishes(crash_at: int, where: str) -> None:
    """The operator dies after recording a step (before or after its action); a new one reads only the
    persisted status and the cluster, and the reset finishes with every action done, in order."""
    world = World()
    for _ in range(crash_at):
        if world.reconcile(SPEC).action == "none":
            break
    world.reconcile(SPEC, crash_before_action=where == "before_action", crash_before_after=where == "before_after")
    run(world, SPEC)
    assert world.status is not None and world.status.step == "done"
    order = [RESET_STEPS.index(a) for a in dict.fromkeys(world.done)]
    assert order == sorted(order)
    assert set(world.done) == {"scaleToZero", "resetOffsets", "deleteInternalTopics", "deleteLocalState", "scaleBack"}
    assert world.observed.replicas == 3


@pytest.mark.parametrize("step", ["resetOffsets", "deleteInternalTopics", "deleteLocalState"])
def test_an_application_that_comes_back_mid_reset_is_stopped_again_before_anything_is_reset(step: str) -> None:
    status = ResetStatus(nonce="n1", step=step, replicas_before=3)  # type: ignore[arg-type]
    back = ResetObserved(replicas=0, pods=1, group_members=1, state_volumes=3)
    decided = next_step(SPEC, status, back)
    assert decided.action == "wait"
    assert decided.status is not None and decided.status.step == "awaitStopped"
    scaled = next_step(SPEC, status, replace(back, replicas=2))
    assert (scaled.action, scaled.replicas) == ("scaleToZero", 0)


def test_a_reset_in_progress_keeps_its_target_when_the_spec_changes() -> None:
    status = ResetStatus(nonce="n1", to="earliest", step="resetOffsets", replicas_before=2)
    idle = ResetObserved(replicas=0, pods=0, group_members=0, state_volumes=2)
    decided = next_step(ResetSpec(nonce="n2", to="2026-01-01T00:00:00Z"), status, idle)
    assert decided.action == "resetOffsets"
    assert decided.status is not None and (decided.status.nonce, decided.status.to) == ("n1", "earliest")


def test_scale_back_restores_the_replicas_recorded_when_the_reset_started() -> None:
    status = ResetStatus(nonce="n1", step="scaleBack", replicas_before=5)
    decided = next_step(SPEC, status, ResetObserved(replicas=0, pods=0, group_members=0, state_volumes=0))
    assert (decided.action, decided.replicas) == ("scaleBack", 5)


def test_targets_convert_to_the_reset_plan() -> None:
    assert isinstance(ResetSpec(nonce="a").target(), ToEarliest)
    at = ResetSpec(nonce="a", to="2026-11-24T20:00:00+01:00").target()
    assert isinstance(at, ToDatetime) and at.timestamp_ms == datetime(2026, 11, 24, 19, tzinfo=UTC).timestamp() * 1000
    offsets = ResetSpec.model_validate({"nonce": "a", "to": "offsets", "offsets": {"events": {0: 5, 1: 7}}}).target()
    assert offsets == ToOffsets({TopicPartition("events", 0): 5, TopicPartition("events", 1): 7})


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"nonce": "a", "to": "yesterday"}, "neither earliest, offsets nor an RFC 3339 time"),
        ({"nonce": "a", "to": "2026-11-24T20:00:00"}, "time zone"),
        ({"nonce": "a", "to": "offsets"}, "needs offsets"),
        ({"nonce": "a", "offsets": {"t": {0: 1}}}, "only with to: offsets"),
        ({"nonce": "a", "to": "offsets", "offsets": {"t": {0: -1}}}, "t:0"),
        ({"nonce": "", "to": "earliest"}, "nonce"),
    ],
)
def test_a_bad_reset_spec_is_refused_with_a_clear_message(document: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        ResetSpec.model_validate(document)
