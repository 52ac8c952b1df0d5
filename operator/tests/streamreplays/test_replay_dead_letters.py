"""A replay's dead letters go to a topic of its own, ``<application.id>-dlq``, never into the live app's: the replay's
config names it, the operator creates it with the outputs (the live one's partition count, the output's retention)
and, when the replay ends, deletes it if it is empty and keeps it, named in status with its count and a Warning
event, when it holds dead letters. A handover's new version goes on with the app's own dead-letter topic."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from replay_fakes import HANDOVER, NS, REPLAY, SECOND_TOPOLOGY, finish_job, reconcile_step, replay_world
from streamapp_operator.streamreplays import dead_letters, replay_plan
from streamapp_operator.streamreplays.reconcile import reconcile_replay

LIVE = "flights-dead-letters"
DLQ = "flights-flights-v2-dlq"
CONFIG = {"processing.exception.handler": "dead_letter_queue", dead_letters.DLQ_KEY: LIVE}
BACKFILL = {"appRef": {"name": "flights"}, "topology": SECOND_TOPOLOGY}


def test_the_replays_config_names_its_own_dead_letter_topic_not_the_live_apps() -> None:
    config = replay_plan.replay_config(CONFIG, "flights-flights-v2")
    assert config[dead_letters.DLQ_KEY] == DLQ and config["processing.exception.handler"] == "dead_letter_queue"
    assert dead_letters.DLQ_KEY not in replay_plan.replay_config({}, "flights-flights-v2")  # no handler can write one


@pytest.mark.parametrize(
    ("offsets", "records", "delete", "count"),
    [(0, None, True, 0), (3, 0, True, 0), (5, 3, False, 3)],  # empty; aborted writes and markers only; 3 letters
)
def test_an_empty_dead_letter_topic_goes_and_one_with_records_is_kept_and_named(
    offsets: int, records: int | None, delete: bool, count: int
) -> None:
    verdict = dead_letters.verdict(DLQ, offsets, records)
    assert (verdict.delete, verdict.records) == (delete, count)
    assert (
        delete
        or verdict.message
        == f"the replay wrote 3 dead letters to {DLQ}: kept (delete the topic once they are dealt with)"
    )


def _world_with_live_dlq() -> tuple[Any, Any, Any]:
    world, cluster, kafka = replay_world()
    app = cluster.objects[("StreamApp", NS, "flights")]
    app["spec"]["config"] = dict(CONFIG)
    kafka.topics[LIVE] = 3
    return world, cluster, kafka


def _launched(spec: dict[str, Any]) -> tuple[Any, Any, Any, dict[str, Any]]:
    world, cluster, kafka = _world_with_live_dlq()
    status = reconcile_step(world, spec, {})
    return world, cluster, kafka, status


def test_the_replay_creates_its_dead_letter_topic_and_its_plan_writes_there() -> None:
    _, cluster, kafka, status = _launched(BACKFILL)
    assert status["deadLetterTopic"] == DLQ and kafka.topics[DLQ] == 3  # as many partitions as the live one
    plan = yaml.safe_load(cluster.objects[("ConfigMap", NS, "flights-v2-replay")]["data"]["plan.yaml"])
    assert plan["config"][dead_letters.DLQ_KEY] == DLQ and plan["partitions"][DLQ] == 3


@pytest.mark.parametrize("spec", [BACKFILL, HANDOVER], ids=["backfill", "handover"])
def test_an_empty_dead_letter_topic_is_deleted_when_the_replay_ends(spec: dict[str, Any]) -> None:
    world, cluster, kafka, status = _launched(spec)
    kafka.earliest[DLQ], kafka.latest[DLQ] = {0: 0, 1: 0, 2: 0}, {0: 0, 1: 0, 2: 0}
    finish_job(cluster)
    status = reconcile_step(world, spec, status)
    if spec is HANDOVER:
        ready = {"conditions": [{"type": "Ready", "status": "True"}], "lag": 0, "readyReplicas": 1}
        cluster.set_status("StreamApp", NS, "flights-v2", ready)
        status = reconcile_step(world, spec, status)
    assert status["phase"] == "Succeeded" and DLQ in status["topicsDeleted"] and DLQ not in kafka.topics
    assert "deadLetters" not in status and LIVE in kafka.topics


def test_a_dead_letter_topic_with_records_is_kept_and_named_in_status_and_an_event() -> None:
    world, cluster, kafka, status = _launched(BACKFILL)
    kafka.earliest[DLQ], kafka.latest[DLQ] = {0: 0, 1: 0, 2: 0}, {0: 2, 1: 0, 2: 3}  # markers counted by offsets
    kafka.values[DLQ] = [b"poison-1", b"poison-2", b"poison-3"]
    finish_job(cluster)
    result = reconcile_replay(REPLAY, BACKFILL, status, world, "2026-01-01T00:00:20Z")
    status = {**status, **result.status}
    assert status["phase"] == "Succeeded" and DLQ in kafka.topics and DLQ not in status["topicsDeleted"]
    assert (status["deadLetterTopic"], status["deadLetters"]) == (DLQ, 3)
    warned = [e for e in result.events if e.reason == "DeadLetters"]
    assert [(e.type, e.message) for e in warned] == [("Warning", dead_letters.verdict(DLQ, 5, 3).message)]


def test_a_handovers_new_version_writes_its_own_dead_letters_to_the_apps_topic() -> None:
    world, cluster, kafka, status = _launched(HANDOVER)
    kafka.earliest[DLQ], kafka.latest[DLQ] = {0: 0, 1: 0, 2: 0}, {0: 0, 1: 0, 2: 0}
    finish_job(cluster)
    reconcile_step(world, HANDOVER, status)
    new = cluster.get("StreamApp", NS, "flights-v2")
    assert new is not None and new["spec"]["config"][dead_letters.DLQ_KEY] == LIVE
