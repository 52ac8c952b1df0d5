"""A config change of a 3-pod app under load rolls one pod at a time without a rebalance storm (issue 11).

On the real stack: a counting app (store ``counts``, ``exactly_once_v2``) with 3 replicas processes a steady load;
its ``commit.interval.ms`` changes. The operator hands the pods to the new template one at a time, highest
ordinal first, and only when the previous one is back, Ready and the group Stable:

- at most one pod is down at any time, and each pod is replaced exactly once, in the order 2, 1, 0;
- ``status.rollout`` said which pod was being replaced while it ran, and is gone afterwards;
- static membership keeps a restarting pod's partitions for it: the pods that are not restarting never see
  their assignment change (rebalances of the surviving members counted from the group: 0);
- each restarted pod restores only the changelog tail from its warm volume (restored records counted from the
  pods' ``/status``: fewer than a tenth of the changelog);
- the output is exact: the latest count per key equals the records produced per key (no loss, no duplicate).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest

from e2e import cluster, operations

pytestmark = pytest.mark.e2e
REPLICAS = 3
BEFORE = 6000


@pytest.fixture
def namespace(operator_installed: None) -> Iterator[str]:
    name = cluster.create_namespace("rolling")
    yield name
    cluster.delete_namespace(name)


def test_a_config_change_replaces_one_pod_at_a_time_without_rebalancing_the_others(namespace: str) -> None:
    name = f"roll-{uuid.uuid4().hex[:6]}"
    cluster.create_topics({f"{name}-in": operations.PARTITIONS, f"{name}-out": operations.PARTITIONS})
    try:
        load = operations.Load(f"{name}-in")
        load.produce(BEFORE)
        app = operations.counting_app(name, REPLICAS, processingGuarantee="exactly_once_v2", threads=1)
        cluster.apply(app, namespace)
        operations.wait_settled(namespace, name, REPLICAS)
        with load, operations.watching(namespace, name, REPLICAS) as watch:
            seen_rollout: list[dict[str, object]] = []
            cluster.kubectl("patch", "streamapp", name, "-n", namespace, "--type=merge",
                            "-p", json.dumps({"spec": {"config": {"commit.interval.ms": "200"}}}))  # fmt: skip

            def rolled() -> bool:
                status = cluster.get_json("streamapp", name, namespace).get("status") or {}
                if status.get("rollout"):
                    seen_rollout.append(status["rollout"])
                sts = cluster.get_json("statefulset", name, namespace)
                sts_status = sts.get("status") or {}
                return (
                    bool(seen_rollout)
                    and not status.get("rollout")
                    and sts_status.get("updatedReplicas") == REPLICAS
                    and sts_status.get("currentRevision") == sts_status.get("updateRevision")
                    and status.get("readyReplicas") == REPLICAS
                )

            cluster.wait_until(rolled, 300, "the rollout to finish", 1, operations.describe(namespace, name))
        assert watch.samples > 20
        assert watch.most_down <= 1, f"{watch.most_down} pods were down at once"
        assert watch.replaced_order == [f"{name}-2", f"{name}-1", f"{name}-0"]
        assert {r.get("replacing") for r in seen_rollout} >= {f"{name}-2", f"{name}-1", f"{name}-0"}
        restarted = {f"{name}-{i}-0" for i in range(REPLICAS)}
        assert set(watch.assignment_changes) <= restarted, watch.assignment_changes
        # a surviving member never moves: every assignment change is of a pod that was itself restarting, and
        # at most twice per pod (away and back)
        assert all(count <= 2 for count in watch.assignment_changes.values()), watch.assignment_changes
        assert not watch.survivor_changes, f"partitions of pods that were up moved: {watch.survivor_changes}"
        restored = operations.restored_per_pod(namespace, name)
        assert len(restored) == REPLICAS
        assert sum(restored) < BEFORE // 10, f"restored {restored} records of a ~{BEFORE}-record changelog"
        print(
            f"rollout: most down {watch.most_down}, assignment changes {dict(watch.assignment_changes)}, "
            f"group states {watch.states}, restored {restored}, produced {sum(load.sent.values())}"
        )
        latest = operations.latest_counts(f"{name}-out", load.sent)
        assert latest == dict(load.sent)
    finally:
        cluster.delete_topics(name)
