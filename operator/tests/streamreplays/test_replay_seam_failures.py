"""A seam that fails in the middle of a StreamReplay step (the API server refuses the new version's StreamApp) is a
problem of the run (``Degraded``, retried), and what the step recorded before it failed stays in the status: the
handover step's ``Started`` intent, which a failed replay later reads to keep the topics a new version may run on.
"""

from __future__ import annotations

from replay_fakes import HANDOVER, NS, finish_job, reconcile_step, replay_world


def test_a_handover_step_refused_by_the_api_server_keeps_its_started_intent_and_goes_on_once_admitted() -> None:
    world, cluster, _ = replay_world()
    status = reconcile_step(world, HANDOVER, {})
    finish_job(cluster)
    cluster.reject["StreamApp"] = "admission webhook denied the request"
    status = reconcile_step(world, HANDOVER, status)
    steps = {s["name"]: s["state"] for s in status["handover"]}
    assert steps == {"setGroupOffsets": "Done", "createNewVersion": "Started"}
    assert status["phase"] == "HandingOver" and status["progress"] == "handover 2/4: createNewVersion"
    degraded = next(c for c in status["conditions"] if c["type"] == "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "ApplyRejected")
    assert "admission webhook denied the request" in degraded["message"]
    assert cluster.get("StreamApp", NS, "flights-v2") is None
    del cluster.reject["StreamApp"]
    status = reconcile_step(world, HANDOVER, status)
    assert [s["name"] for s in status["handover"] if s["state"] == "Done"] == ["setGroupOffsets", "createNewVersion"]
    assert next(c for c in status["conditions"] if c["type"] == "Degraded")["status"] == "False"
