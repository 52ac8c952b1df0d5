"""A handover brings new code: the new version takes ``handover.image`` (else the StreamReplay's ``spec.image``)
and ``handover.replicas``, and the replay's Job runs the code of that image; without them the new version keeps
the app's image and replicas and the Job runs the app image's code. A version mismatch fails the replay with its
own reason. Over the hand-written fakes (``replay_fakes``)."""

from __future__ import annotations

from typing import Any

import pytest
from replay_fakes import HANDOVER, NS, fail_job_by_policy, finish_job, reconcile_step, replay_world
from streamapp_operator.streamreplays import app_code


def _handed_over(spec: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The replay's Job and the new version's spec, once the handover created it."""
    world, cluster, _ = replay_world()
    status = reconcile_step(world, spec, {})
    job = cluster.get("Job", NS, "flights-v2-replay")
    finish_job(cluster)
    reconcile_step(world, spec, status)
    new = cluster.get("StreamApp", NS, "flights-v2")
    assert job is not None and new is not None
    return job, new["spec"]


@pytest.mark.parametrize(
    ("extra", "image", "replicas"),
    [
        ({}, "localhost/streamapp:dev", 2),  # the app's
        ({"handover": {"image": "apps/flights:2", "replicas": 4}}, "apps/flights:2", 4),
        ({"image": "apps/flights:3", "handover": {"replicas": 0}}, "apps/flights:3", 0),
    ],
)
def test_the_new_version_takes_the_handovers_image_and_replicas_and_the_job_runs_that_images_code(
    extra: dict[str, Any], image: str, replicas: int
) -> None:
    job, new = _handed_over({**HANDOVER, **extra})
    assert (new["image"], new["replicas"]) == (image, replicas)
    init = job["spec"]["template"]["spec"]["initContainers"][0]
    assert init["name"] == app_code.INIT_CONTAINER and init["image"] == image


def test_a_job_refusing_the_app_images_runtime_fails_the_replay_as_a_version_mismatch() -> None:
    world, cluster, _ = replay_world()
    status = reconcile_step(world, HANDOVER, {})
    fail_job_by_policy(cluster, 78)
    status = reconcile_step(world, HANDOVER, status)  # no pod log (the e2e node agent serves none)
    failed = {c["type"]: c for c in status["conditions"]}["Failed"]
    assert status["phase"] == "Failed" and failed["reason"] == "RuntimeVersionMismatch"
    assert cluster.get("StreamApp", NS, "flights-v2") is None  # no new version of code that cannot run
