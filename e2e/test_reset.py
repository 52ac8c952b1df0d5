"""``spec.reset``: the operator stops the app, resets its offsets, deletes its internal topics and state volumes,
and scales it back; the app then recounts its input from scratch (issue 11, declarative reset).

On the real stack: a counting app (store ``counts``, one pod) has counted a backlog. A new ``spec.reset.nonce``
makes the operator walk ``status.reset.step`` through scaleToZero .. done. Afterwards:

- the pod's state volume is a new one (the old claim was deleted: ``KafkaStreams.cleanUp()``);
- the latest count per key equals the records produced per key, not twice them (the state and the changelog
  are gone, so nothing is counted on top of the old counts), and the output holds the backlog's counts twice
  over (once before, once after: the input was read again from the earliest offset);
- the nonce runs once: the StatefulSet is back at one replica and stays there.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest

from e2e import cluster, operations

pytestmark = pytest.mark.e2e
RECORDS = 600


@pytest.fixture
def namespace(operator_installed: None) -> Iterator[str]:
    name = cluster.create_namespace("reset")
    yield name
    cluster.delete_namespace(name)


def test_a_new_reset_nonce_recounts_the_input_from_scratch(namespace: str) -> None:
    name = f"reset-{uuid.uuid4().hex[:6]}"
    cluster.create_topics({f"{name}-in": 3, f"{name}-out": 3})
    try:
        load = operations.Load(f"{name}-in")
        load.produce(RECORDS)
        # no store cache: every count update is an output record (the re-read is then countable); the stopped
        # pod's static member is removed by the operator (the group protocol's session timeout is the broker's)
        config = {"statestore.cache.max.bytes": "0"}
        app = operations.counting_app(name, 1, config=config, processingGuarantee="exactly_once_v2")
        cluster.apply(app, namespace)
        operations.wait_settled(namespace, name, 1)
        assert operations.latest_counts(f"{name}-out", load.sent) == dict(load.sent)
        claim_before = cluster.get_json("pvc", f"state-{name}-0", namespace)["metadata"]["uid"]

        steps: list[str] = []
        cluster.kubectl("patch", "streamapp", name, "-n", namespace, "--type=merge",
                        "-p", json.dumps({"spec": {"reset": {"nonce": "first", "to": "earliest"}}}))  # fmt: skip

        def reset_done() -> bool:
            reset = (cluster.get_json("streamapp", name, namespace).get("status") or {}).get("reset") or {}
            if reset.get("step") and (not steps or steps[-1] != reset["step"]):
                steps.append(reset["step"])
            return reset.get("nonce") == "first" and reset.get("step") == "done"

        cluster.wait_until(reset_done, 150, "the reset to finish", 1, operations.describe(namespace, name))
        order = ["scaleToZero", "awaitStopped", "resetOffsets", "deleteInternalTopics", "deleteLocalState",
                 "scaleBack", "done"]  # fmt: skip
        assert [order.index(step) for step in steps] == sorted(order.index(step) for step in steps), steps
        operations.wait_settled(namespace, name, 1)
        assert cluster.get_json("pvc", f"state-{name}-0", namespace)["metadata"]["uid"] != claim_before
        assert operations.latest_counts(f"{name}-out", load.sent) == dict(load.sent)  # not twice the counts
        assert cluster.count_records(f"{name}-out", 2 * RECORDS) >= 2 * RECORDS  # the input was read again
        reasons = [e["reason"] for e in cluster.events(name, namespace)]
        assert "ResetOffsets" in reasons and "ResetStateDeleted" in reasons, reasons
        assert cluster.get_json("statefulset", name, namespace)["spec"]["replicas"] == 1
    finally:
        cluster.delete_topics(name)
