"""An empty range runs no Job (issue 19, audit R5f: a 51 s Spark Job for 0 records): a replay whose resolved range
holds no record ends at once, a backfill with nothing written, a handover with its new version at the end offsets."""

from __future__ import annotations

import copy

from replay_fakes import EARLIEST, HANDOVER, NS, SECOND_TOPOLOGY, new_version_ready, reconcile_step, replay_world

BACKFILL = {"appRef": {"name": "flights"}, "topology": SECOND_TOPOLOGY}


def test_an_empty_backfill_succeeds_at_once_without_a_job_or_topics() -> None:
    world, cluster, kafka = replay_world()
    kafka.latest = copy.deepcopy(EARLIEST)
    status = reconcile_step(world, BACKFILL, {})
    assert status["phase"] == "Succeeded" and status["recordsRead"] == 0 and status["recordsWritten"] == 0
    assert "nothing to write" in status["progress"]
    assert ("Job", NS, "flights-v2-replay") not in cluster.objects
    assert "per-key" not in kafka.topics


def test_an_empty_handover_creates_the_new_version_at_the_end_offsets_without_a_job() -> None:
    world, cluster, kafka = replay_world()
    kafka.latest = copy.deepcopy(EARLIEST)
    status = reconcile_step(world, HANDOVER, {})
    assert ("Job", NS, "flights-v2-replay") not in cluster.objects
    assert status["phase"] == "HandingOver" and status["recordsWritten"] == 0
    assert kafka.group_offsets[status["applicationId"]] == EARLIEST
    assert ("StreamApp", NS, "flights-v2") in cluster.objects
    new_version_ready(cluster)
    status = reconcile_step(world, HANDOVER, status)
    assert status["phase"] == "Succeeded" and ("Job", NS, "flights-v2-replay") not in cluster.objects


def test_a_range_with_records_still_runs_the_job() -> None:
    world, cluster, _ = replay_world()
    status = reconcile_step(world, BACKFILL, {})
    assert status["phase"] == "Running" and ("Job", NS, "flights-v2-replay") in cluster.objects
