"""A StreamReplay's status has the records the Spark job dropped, by reason, from the job's result line: the same
reasons and status keys as the StreamApp's ``status.droppedRecords``, so that the two engines compare."""

from __future__ import annotations

import dataclasses
import json

from replay_fakes import SECOND_TOPOLOGY, finish_job, reconcile_step, replay_world
from streamapp.replay.spark.engine import ReplayResult
from streamapp_operator.streamreplays import job_reports
from streamapp_operator.streamreplays.resources import StreamReplayStatus


def test_the_replay_status_has_the_jobs_dropped_records_by_reason() -> None:
    world, cluster, _ = replay_world()
    spec = {"appRef": {"name": "flights"}, "topology": SECOND_TOPOLOGY}
    status = reconcile_step(world, spec, {})
    finish_job(cluster)
    # the line ``streamapp replay run`` prints last: ``dataclasses.asdict`` of the engine's ``ReplayResult``
    result = ReplayResult(records_read={"flights": 180}, records_written={"per-key": 7})
    result.dropped_records.update({"late": 12, "null_key_or_value": 3})
    cluster.logs["flights-v2-replay-abc"] = json.dumps(dataclasses.asdict(result), sort_keys=True)

    done = reconcile_step(world, spec, status)

    assert done["droppedRecords"] == {
        "late": 12,
        "nullKeyOrValue": 3,
        "invalidTimestamp": 0,
        "deserializationError": 0,
        "processingError": 0,
    }
    StreamReplayStatus.model_validate(done)  # the typed status (the CRD's schema) accepts it


def test_a_result_without_drops_from_an_older_runtime_leaves_the_field_out() -> None:
    assert job_reports.dropped_records({"records_written": {"per-key": 4}}) is None
    assert job_reports.dropped_records(None) is None
    assert job_reports.dropped_records({"dropped_records": {"late": -1, "processing_error": 2}}) == {
        "late": 0,
        "nullKeyOrValue": 0,
        "invalidTimestamp": 0,
        "deserializationError": 0,
        "processingError": 2,
    }
