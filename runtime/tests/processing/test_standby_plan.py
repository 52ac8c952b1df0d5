"""Standby placement from the group description (pure): never on the active's instance, balanced, stable."""

from __future__ import annotations

from collections import Counter

from streamapp.processing.standby import MemberRef, plan_standbys
from streamapp.processing.task import TaskId

A0, A1, B0, B1, C0 = MemberRef("a", 0), MemberRef("a", 1), MemberRef("b", 0), MemberRef("b", 1), MemberRef("c", 0)


def test_a_standby_never_shares_the_active_instance_and_goes_to_the_next_instance() -> None:
    owners = {TaskId(1, 0): A0, TaskId(1, 1): B0, TaskId(1, 2): C0}
    plan = plan_standbys(owners, [A0, B0, C0], owners, 1)
    assert plan == {TaskId(1, 0): [B0], TaskId(1, 1): [C0], TaskId(1, 2): [A0]}


def test_two_replicas_use_two_other_instances() -> None:
    owners = {TaskId(1, p): m for p, m in enumerate([A0, B0, C0])}
    plan = plan_standbys(owners, [A0, B0, C0], owners, 2)
    for task, placed in plan.items():
        assert len(placed) == 2 and owners[task] not in placed
        assert len({m.instance for m in placed}) == 2


def test_standbys_are_spread_over_an_instance_threads() -> None:
    owners = {TaskId(1, p): (A0 if p % 2 == 0 else A1) for p in range(4)}
    plan = plan_standbys(owners, [A0, A1, B0, B1], owners, 1)
    assert Counter(m for placed in plan.values() for m in placed) == {B0: 2, B1: 2}


def test_one_instance_gets_no_standbys_and_unowned_tasks_are_left_out() -> None:
    assert plan_standbys({TaskId(1, 0): A0}, [A0, A1], [TaskId(1, 0)], 1) == {TaskId(1, 0): []}
    assert plan_standbys({}, [A0, B0], [TaskId(1, 0)], 1) == {}


def test_every_member_computes_the_same_plan_whatever_the_input_order() -> None:
    owners = {TaskId(1, p): m for p, m in enumerate([A0, B0, C0, A1, B1])}
    first = plan_standbys(owners, [A0, A1, B0, B1, C0], owners, 1)
    second = plan_standbys(dict(reversed(list(owners.items()))), [C0, B1, B0, A1, A0], list(owners)[::-1], 1)
    assert first == second
