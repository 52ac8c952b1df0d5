"""A replay leaves no topics behind that nothing reads (issue 19: 21 topics from 13 replays): a backfill's
changelog and repartition topics go when it succeeds or fails, a handover's stay with the new version that runs on
them (its warm state), and a handover that fails before the new version existed leaves none either."""

from __future__ import annotations

from typing import Any

import pytest
from replay_fakes import HANDOVER, SECOND_TOPOLOGY, finish_job, new_version_ready, reconcile_step, replay_world

BACKFILL = {"appRef": {"name": "flights"}, "topology": SECOND_TOPOLOGY}
INTERNAL = ["flights-flights-v2-count-changelog", "flights-flights-v2-by-key-repartition"]


def test_a_backfill_that_succeeds_deletes_its_internal_topics() -> None:
    world, cluster, kafka = replay_world()
    status = reconcile_step(world, BACKFILL, {})
    kafka.topics.update({topic: 2 for topic in [*INTERNAL, "flights-other-changelog"]})
    finish_job(cluster)
    status = reconcile_step(world, BACKFILL, status)
    assert status["phase"] == "Succeeded"
    assert sorted(status["topicsDeleted"]) == sorted(INTERNAL)
    assert not set(INTERNAL) & set(kafka.topics) and "flights-other-changelog" in kafka.topics


def test_a_handover_keeps_them_for_the_new_version() -> None:
    world, cluster, kafka = replay_world()
    status = reconcile_step(world, HANDOVER, {})
    kafka.topics.update({topic: 2 for topic in INTERNAL})
    finish_job(cluster)
    status = reconcile_step(world, HANDOVER, status)
    new_version_ready(cluster)
    status = reconcile_step(world, HANDOVER, status)
    assert status["phase"] == "Succeeded" and status["topicsDeleted"] == []
    assert set(INTERNAL) <= set(kafka.topics)


@pytest.mark.parametrize("spec", [BACKFILL, HANDOVER], ids=["backfill", "handover"])
def test_a_replay_whose_job_failed_leaves_none(spec: dict[str, Any]) -> None:
    """A failed backfill, or a handover that failed before its new version existed: no one runs on them."""
    world, cluster, kafka = replay_world()
    status = reconcile_step(world, spec, {})
    kafka.topics.update({topic: 2 for topic in INTERNAL})
    finish_job(cluster, "Failed")
    status = reconcile_step(world, spec, status)
    assert status["phase"] == "Failed" and sorted(status["topicsDeleted"]) == sorted(INTERNAL)
    assert not set(INTERNAL) & set(kafka.topics)
