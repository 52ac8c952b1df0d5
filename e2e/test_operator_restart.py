"""An operator killed mid-rollout or mid-reset resumes where it was (issue 11).

On the real stack, the operator's pod is deleted (its Deployment starts a new one) in the middle of

- a rollout: a 3-pod counting app under load gets a config change; as soon as ``status.rollout`` names the first
  pod being replaced, the operator goes. The new operator reads the rollout's progress back from the
  StatefulSet's partition and finishes it: every pod is replaced exactly once, highest ordinal first, at most
  one pod is down at any time, and the output stays exact;
- a declarative reset: a counted app gets a new ``spec.reset.nonce``; while ``status.reset.step`` is
  ``awaitStopped`` (the app scaled to zero, its offsets, internal topics and state not reset yet: the step that
  must not be skipped nor run under a live group), the operator goes. The new operator reads the step back from
  status and finishes the reset: the steps never go back, and the input is recounted exactly, as in
  ``test_reset``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from e2e import cluster, operations, resets

pytestmark = pytest.mark.e2e
REPLICAS = 3
RESET_RECORDS = 600
OPERATOR_NAMESPACE = "streamapp-system"
OPERATOR_SELECTOR = "app.kubernetes.io/name=streamapp-operator"


@pytest.fixture
def namespace(operator_installed: None) -> Iterator[str]:
    name = cluster.create_namespace("oprestart")
    yield name
    cluster.delete_namespace(name)


def _rollout(namespace: str, name: str) -> dict[str, Any]:
    return dict((cluster.get_json("streamapp", name, namespace).get("status") or {}).get("rollout") or {})


def _operator_pods() -> list[str]:
    out = cluster.kubectl("get", "pods", "-n", OPERATOR_NAMESPACE, "-l", OPERATOR_SELECTOR, "-o", "json")
    return [p["metadata"]["name"] for p in json.loads(out)["items"] if not p["metadata"].get("deletionTimestamp")]


def _kill_operator() -> None:
    """Delete the operator's pod and wait until its Deployment has started another one."""
    (before,) = _operator_pods()
    cluster.kubectl("delete", "pod", before, "-n", OPERATOR_NAMESPACE, "--wait=false")
    cluster.wait_until(lambda: bool(set(_operator_pods()) - {before}), 120, "a new operator pod")


def test_an_operator_killed_mid_rollout_resumes_and_never_has_two_pods_down(namespace: str) -> None:
    name = f"opr-{uuid.uuid4().hex[:6]}"
    cluster.create_topics({f"{name}-in": operations.PARTITIONS, f"{name}-out": operations.PARTITIONS})
    try:
        load = operations.Load(f"{name}-in")
        load.produce(3000)
        app = operations.counting_app(name, REPLICAS, processingGuarantee="exactly_once_v2")
        cluster.apply(app, namespace)
        operations.wait_settled(namespace, name, REPLICAS)
        with load, operations.watching(namespace, name, REPLICAS) as watch:
            cluster.kubectl("patch", "streamapp", name, "-n", namespace, "--type=merge",
                            "-p", json.dumps({"spec": {"config": {"commit.interval.ms": "300"}}}))  # fmt: skip
            handed_over = lambda: bool(_rollout(namespace, name).get("replacing"))  # noqa: E731
            cluster.wait_until(handed_over, 120, "the first pod handed over", 0.5, operations.describe(namespace, name))
            _kill_operator()

            def finished() -> bool:
                status = cluster.get_json("streamapp", name, namespace).get("status") or {}
                sts = cluster.get_json("statefulset", name, namespace).get("status") or {}
                return (
                    not status.get("rollout")
                    and sts.get("updatedReplicas") == REPLICAS
                    and sts.get("currentRevision") == sts.get("updateRevision")
                    and status.get("readyReplicas") == REPLICAS
                )

            cluster.wait_until(finished, 300, "the rollout to finish", 1, operations.describe(namespace, name))
        assert watch.most_down <= 1, f"{watch.most_down} pods were down at once"
        assert watch.replaced_order == [f"{name}-2", f"{name}-1", f"{name}-0"]
        assert operations.latest_counts(f"{name}-out", load.sent) == dict(load.sent)
    finally:
        cluster.delete_topics(name)


def test_an_operator_killed_mid_reset_resumes_and_recounts_exactly(namespace: str) -> None:
    name = f"opreset-{uuid.uuid4().hex[:6]}"
    try:
        load = resets.start_counted_app(namespace, name, RESET_RECORDS)
        steps: list[str] = []
        done = resets.step_recorder(namespace, name, "after-restart", steps)
        resets.ask_reset(namespace, name, "after-restart")
        stopped = lambda: done() or steps[-1:] == ["awaitStopped"]  # noqa: E731
        cluster.wait_until(stopped, 60, "the reset at awaitStopped", 0.2, operations.describe(namespace, name))
        assert steps[-1] == "awaitStopped", steps
        _kill_operator()
        cluster.wait_until(done, 150, "the reset to finish", 1, operations.describe(namespace, name))
        resets.assert_in_order(steps)
        resets.assert_recounted(namespace, name, load, RESET_RECORDS)
    finally:
        cluster.delete_topics(name)
