"""One step protocol for both Kinds (``streamapp_operator.steps``): waiting, blocked and failed are outcomes of
the run, returned or raised by a step, and stop the steps after it; a seam's failure is a problem."""

from __future__ import annotations

import pytest
from streamapp_operator.kafka import KafkaUnavailable
from streamapp_operator.outcomes import Problem
from streamapp_operator.steps import Blocked, Failed, Halt, StepOutcome, Waiting, run_steps, seam_problem

Steps = list[str]


def _first(ran: Steps) -> StepOutcome:
    ran.append("first")
    return StepOutcome(status={"first": True})


def _last(ran: Steps) -> StepOutcome:
    ran.append("last")
    return StepOutcome()


@pytest.mark.parametrize(
    "halt", [Waiting("the Job runs"), Blocked(Problem("ForeignObject", "Job j is someone else's")), Failed("F", "no")]
)
@pytest.mark.parametrize("raised", [True, False])
def test_a_halt_returned_or_raised_stops_the_run_and_is_its_outcome(halt: Halt, raised: bool) -> None:
    def halting(ran: Steps) -> StepOutcome:
        ran.append("halting")
        if raised:
            raise halt
        return StepOutcome(status={"halting": True}, halt=halt)

    ran: Steps = []
    run = run_steps([_first, halting, _last], ran)
    assert ran == ["first", "halting"] and run.halt is halt and run.problem is None
    assert run.status == ({"first": True} if raised else {"first": True, "halting": True})


def test_a_seam_failure_is_a_problem_not_a_halt() -> None:
    def unreachable(ran: Steps) -> StepOutcome:
        raise KafkaUnavailable("broker down")

    ran: Steps = []
    run = run_steps([_first, unreachable, _last], ran)
    assert ran == ["first"] and run.halt is None
    assert run.problem == Problem("KafkaUnavailable", "broker down")


def test_halts_carry_their_problem() -> None:
    assert Waiting("job").problem == Problem("Waiting", "job") and str(Waiting("job")) == "job"
    failed = Failed("JobFailed", "backoff limit reached")
    assert failed.reason == "JobFailed" and failed.problem == Problem("JobFailed", "backoff limit reached")


def test_with_advance_a_step_reads_what_the_steps_before_it_recorded() -> None:
    def reads(seen: dict[str, bool]) -> StepOutcome:
        return StepOutcome(status={"saw_first": seen.get("first", False)})

    def first(seen: dict[str, bool]) -> StepOutcome:
        return StepOutcome(status={"first": True})

    passed_on = run_steps([first, reads], {}, advance=lambda seen, outcome: {**seen, **outcome.status})
    assert passed_on.status == {"first": True, "saw_first": True}
    assert run_steps([first, reads], {}).status == {"first": True, "saw_first": False}  # without: the same context


def test_a_step_that_fails_at_a_seam_after_recording_its_intent_keeps_the_intent() -> None:
    def intends_then_fails(ran: Steps) -> StepOutcome:
        ran.append("intends")
        return StepOutcome(status={"intent": "Started"}, problem=seam_problem(KafkaUnavailable("broker down")))

    ran: Steps = []
    run = run_steps([_first, intends_then_fails, _last], ran)
    assert ran == ["first", "intends"] and run.halt is None
    assert run.problem == Problem("KafkaUnavailable", "broker down")
    assert run.status == {"first": True, "intent": "Started"}
