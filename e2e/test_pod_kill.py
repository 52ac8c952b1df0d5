"""A deleted pod comes back on its own volume and restores only the changelog tail (issue 11).

On the real stack: a 2-pod counting app (``exactly_once_v2``) has counted 6,000 records into its store (a
changelog of about as many records); pod 1 is deleted under load. The StatefulSet controller re-creates it with
the same name, so it mounts the same PersistentVolumeClaim (same claim uid) and rejoins with the same
``group.instance.id``: it restores fewer than a tenth of the changelog (counted from its ``/status``), the other
pod's assignment never changes, and the output stays exact.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from e2e import cluster, operations

pytestmark = pytest.mark.e2e
REPLICAS = 2
BEFORE = 6000


@pytest.fixture
def namespace(operator_installed: None) -> Iterator[str]:
    name = cluster.create_namespace("podkill")
    yield name
    cluster.delete_namespace(name)


def test_a_deleted_pod_comes_back_on_its_volume_and_restores_only_the_tail(namespace: str) -> None:
    name = f"kill-{uuid.uuid4().hex[:6]}"
    cluster.create_topics({f"{name}-in": operations.PARTITIONS, f"{name}-out": operations.PARTITIONS})
    try:
        load = operations.Load(f"{name}-in")
        load.produce(BEFORE)
        cluster.apply(operations.counting_app(name, REPLICAS, processingGuarantee="exactly_once_v2"), namespace)
        operations.wait_settled(namespace, name, REPLICAS)
        claim = cluster.get_json("pvc", f"state-{name}-1", namespace)
        victim = cluster.get_json("pod", f"{name}-1", namespace)
        with load, operations.watching(namespace, name, REPLICAS) as watch:
            cluster.kubectl("delete", "pod", f"{name}-1", "-n", namespace, "--wait=false")

            def back() -> bool:
                found = {p["metadata"]["name"]: p for p in operations.pods(namespace, name)}
                pod = found.get(f"{name}-1")
                return pod is not None and pod["metadata"]["uid"] != victim["metadata"]["uid"] and operations.ready(pod)

            cluster.wait_until(back, 180, f"pod {name}-1 back and ready", 1, operations.describe(namespace, name))
        pod = cluster.get_json("pod", f"{name}-1", namespace)
        (volume,) = [v for v in pod["spec"]["volumes"] if v["name"] == "state"]
        assert volume["persistentVolumeClaim"]["claimName"] == f"state-{name}-1"
        assert cluster.get_json("pvc", f"state-{name}-1", namespace)["metadata"]["uid"] == claim["metadata"]["uid"]
        document = operations.pod_status(pod)
        assert document is not None
        restored = operations.restored_records(document)
        print(f"pod kill: restored {restored}, assignment changes {dict(watch.assignment_changes)}")
        assert restored < BEFORE // 10, f"restored {restored} records of a ~{BEFORE}-record changelog"
        assert set(watch.assignment_changes) <= {f"{name}-1-0"}, watch.assignment_changes
        assert operations.latest_counts(f"{name}-out", load.sent) == dict(load.sent)
    finally:
        cluster.delete_topics(name)
