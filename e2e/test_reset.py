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

import uuid
from collections.abc import Iterator

import pytest

from e2e import cluster, operations, resets

pytestmark = pytest.mark.e2e
RECORDS = 600


@pytest.fixture
def namespace(operator_installed: None) -> Iterator[str]:
    name = cluster.create_namespace("reset")
    yield name
    cluster.delete_namespace(name)


def test_a_new_reset_nonce_recounts_the_input_from_scratch(namespace: str) -> None:
    name = f"reset-{uuid.uuid4().hex[:6]}"
    try:
        load = resets.start_counted_app(namespace, name, RECORDS)
        claim_before = cluster.get_json("pvc", f"state-{name}-0", namespace)["metadata"]["uid"]
        steps: list[str] = []
        resets.ask_reset(namespace, name, "first")
        done = resets.step_recorder(namespace, name, "first", steps)
        cluster.wait_until(done, 150, "the reset to finish", 1, operations.describe(namespace, name))
        resets.assert_in_order(steps)
        resets.assert_recounted(namespace, name, load, RECORDS)
        assert cluster.get_json("pvc", f"state-{name}-0", namespace)["metadata"]["uid"] != claim_before
    finally:
        cluster.delete_topics(name)
