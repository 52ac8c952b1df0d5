"""``spec.autoscaling`` scales out on lag up to the task count, and back in after the stabilization window,
without flapping; ``spec.replicas`` is never written (issue 11, scaling).

On the real stack: a backlog waits on a 3-partition topic (3 tasks) before a counting app with one stream thread
per pod starts with ``autoscaling: {minReplicas: 1, maxReplicas: 8, target: {lagPerTask: 100}}``. The lag asks
for far more threads than tasks, so the operator scales the StatefulSet to 3 pods (a fourth would idle), never
more. Once the backlog is processed the lag is 0 and, after the 20 s stabilization window, the app goes back to
1 pod. The replica counts seen go up, then only down (no flapping), each change with an event, and
``spec.replicas`` stays what Git says.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from e2e import cluster, operations

pytestmark = pytest.mark.e2e
RECORDS = 3000


@pytest.fixture
def namespace(operator_installed: None) -> Iterator[str]:
    name = cluster.create_namespace("autoscale")
    yield name
    cluster.delete_namespace(name)


def test_lag_scales_out_to_the_task_count_and_back_in_after_the_window(namespace: str) -> None:
    name = f"scale-{uuid.uuid4().hex[:6]}"
    cluster.create_topics({f"{name}-in": 3, f"{name}-out": 3})
    try:
        load = operations.Load(f"{name}-in")
        load.produce(RECORDS)
        autoscaling = {"minReplicas": 1, "maxReplicas": 8, "target": {"lagPerTask": 100},
                       "scaleDownStabilizationSeconds": 20, "scaleDownCooldownSeconds": 10}  # fmt: skip
        app = operations.counting_app(name, 1, autoscaling=autoscaling, processingGuarantee="exactly_once_v2")
        cluster.apply(app, namespace)
        seen: list[int] = []

        def replicas() -> int:
            sts = cluster.get_json("statefulset", name, namespace)
            count = int(sts["spec"]["replicas"])
            if not seen or seen[-1] != count:
                seen.append(count)
            return count

        cluster.wait_until(lambda: cluster.kubectl("get", "statefulset", name, "-n", namespace,
                                                   "--ignore-not-found") != "", 60, "the StatefulSet")  # fmt: skip
        describe = operations.describe(namespace, name)
        cluster.wait_until(lambda: replicas() == 3, 60, "a scale-out to 3 pods", 1, describe)
        cluster.wait_until(lambda: replicas() == 1, 150, "a scale-in to 1 pod", 1, describe)
        assert max(seen) == 3, seen  # never past the task count
        peak = seen.index(3)
        assert seen[: peak + 1] == sorted(seen[: peak + 1]), seen  # up, then only down: no flapping
        assert seen[peak:] == sorted(seen[peak:], reverse=True), seen
        assert operations.latest_counts(f"{name}-out", load.sent) == dict(load.sent)
        reasons = [e["reason"] for e in cluster.events(name, namespace)]
        assert "ScaledUp" in reasons and "ScaledDown" in reasons, reasons
        streamapp = cluster.get_json("streamapp", name, namespace)
        assert streamapp["spec"]["replicas"] == 1  # the decision is on the StatefulSet, never in spec
        assert streamapp["status"]["autoscaling"]["replicas"] == 1
    finally:
        cluster.delete_topics(name)
