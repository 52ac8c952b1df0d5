"""The operator never takes over, nor deletes, an object it did not create (issue 9, item 1).

The ``victim`` case on the real stack: a namespace already has a Service ``victim`` (selector
``app: team-x-db``) and a ConfigMap ``victim-config``. A StreamApp named ``victim`` is Degraded
(``ForeignObject``) naming both; neither is changed, adopted (no owner reference) nor deleted with the
StreamApp, and nothing of the app (topics, StatefulSet) is created while they are in the way. State volumes follow
the same rule (issue 19, audit D-H2): a PersistentVolumeClaim ``state-<app>-0`` someone else made is named
(``ForeignObject``) before the StatefulSet is applied, so it is neither mounted nor, with ``cleanupPolicy: Delete``,
deleted with the StreamApp. A StreamApp annotated ``streamapp.io/paused: "true"`` is left alone by the operator until
the annotation goes.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

from e2e import cluster

pytestmark = pytest.mark.e2e

#: Another team's claim named as StreamApp ``pvcvictim``'s pod 0 state volume would be.
FOREIGN_CLAIM = {
    "apiVersion": "v1",
    "kind": "PersistentVolumeClaim",
    "metadata": {"name": "state-pvcvictim-0", "labels": {"team": "x"}},
    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Mi"}}},
}


@pytest.fixture
def namespace(operator_installed: None) -> Iterator[str]:
    name = cluster.create_namespace("ownership")
    yield name
    cluster.delete_namespace(name)


def test_foreign_service_and_config_map_are_never_applied_over_nor_deleted(namespace: str) -> None:
    prefix = f"ownership-{uuid.uuid4().hex[:6]}"
    cluster.create_topics({f"{prefix}-in": 1, f"{prefix}-out": 1})
    try:
        service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "victim"},
                   "spec": {"selector": {"app": "team-x-db"}, "ports": [{"port": 5432}]}}  # fmt: skip
        config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "victim-config"},
                      "data": {"team": "x"}}  # fmt: skip
        cluster.apply(service, namespace)
        cluster.apply(config_map, namespace)
        before = {kind: cluster.get_json(kind, name, namespace) for kind, name in
                  (("service", "victim"), ("configmap", "victim-config"))}  # fmt: skip

        app = cluster.passthrough_app("victim", f"{prefix}-in", f"{prefix}-out", applicationId=f"{prefix}-app")
        cluster.apply(app, namespace)
        degraded = cluster.wait_condition("victim", namespace, "Degraded", "True", "ForeignObject")
        assert "ConfigMap victim-config exists and is not owned by this StreamApp" in degraded["message"]
        assert "Service victim exists and is not owned by this StreamApp" in degraded["message"]
        assert "ForeignObject" in [e["reason"] for e in cluster.events("victim", namespace)]

        for (kind, name), old in zip((("service", "victim"), ("configmap", "victim-config")), before.values(),
                                     strict=True):  # fmt: skip
            now = cluster.get_json(kind, name, namespace)
            assert now["metadata"]["resourceVersion"] == old["metadata"]["resourceVersion"], f"{kind} changed"
            assert not now["metadata"].get("ownerReferences"), f"{kind} was adopted"
        assert cluster.get_json("service", "victim", namespace)["spec"]["selector"] == {"app": "team-x-db"}
        assert cluster.kubectl("get", "statefulset", "victim", "-n", namespace, "--ignore-not-found") == ""
        assert cluster.topics(f"{prefix}-app") == set(), "internal topics created for an app that cannot run"

        cluster.kubectl("delete", "streamapp", "victim", "-n", namespace, "--wait=true", "--timeout=60s")
        time.sleep(3)  # the garbage collector would have deleted them by now
        for kind, name in (("service", "victim"), ("configmap", "victim-config")):
            assert cluster.get_json(kind, name, namespace)["metadata"]["uid"] == before[kind]["metadata"]["uid"]
    finally:
        cluster.delete_topics(prefix)


def test_a_foreign_state_volume_claim_is_named_before_the_stateful_set_and_neither_mounted_nor_deleted(
    namespace: str,
) -> None:
    prefix = f"ownership-{uuid.uuid4().hex[:6]}"
    cluster.create_topics({f"{prefix}-in": 1, f"{prefix}-out": 1})
    try:
        cluster.apply(FOREIGN_CLAIM, namespace)
        before = cluster.get_json("pvc", "state-pvcvictim-0", namespace)["metadata"]

        app = cluster.passthrough_app("pvcvictim", f"{prefix}-in", f"{prefix}-out", applicationId=f"{prefix}-app",
                                      cleanupPolicy="Delete")  # fmt: skip
        cluster.apply(app, namespace)
        degraded = cluster.wait_condition("pvcvictim", namespace, "Degraded", "True", "ForeignObject", timeout_s=60)

        assert degraded["message"] == (
            "PersistentVolumeClaim state-pvcvictim-0 exists and is not this StreamApp's state volume (it lacks the "
            "labels app.kubernetes.io/instance=pvcvictim, app.kubernetes.io/name=streamapp); it is neither mounted nor "
            "deleted: rename or delete it, or give the StreamApp another name"
        )
        assert cluster.kubectl("get", "statefulset", "pvcvictim", "-n", namespace, "--ignore-not-found") == ""
        cluster.kubectl("delete", "streamapp", "pvcvictim", "-n", namespace, "--wait=true", "--timeout=60s")
        time.sleep(3)  # the garbage collector would have deleted it by now
        after = cluster.get_json("pvc", "state-pvcvictim-0", namespace)["metadata"]
        assert (after["uid"], after["resourceVersion"], after.get("ownerReferences")) == (
            before["uid"], before["resourceVersion"], before.get("ownerReferences")
        ), "the claim was changed, adopted or deleted"  # fmt: skip
    finally:
        cluster.delete_topics(prefix)


def test_a_paused_app_is_left_alone_and_says_so(namespace: str) -> None:
    """``streamapp.io/paused: "true"``: a spec change is not applied while paused, status says so, and it is
    applied once the annotation goes."""
    name = f"paused-{uuid.uuid4().hex[:6]}"
    cluster.create_topics({f"{name}-in": 1, f"{name}-out": 1})
    try:
        cluster.apply(cluster.passthrough_app(name, f"{name}-in", f"{name}-out", replicas=0), namespace)
        cluster.wait_condition(name, namespace, "Ready", "True")
        cluster.kubectl("annotate", "streamapp", name, "-n", namespace, "streamapp.io/paused=true")
        cluster.wait_condition(name, namespace, "Progressing", "False", "Paused")
        assert cluster.get_json("streamapp", name, namespace)["status"]["paused"] is True
        cluster.kubectl("scale", "streamapp", name, "-n", namespace, "--replicas=2")
        time.sleep(12)  # longer than the reconcile timer
        assert cluster.get_json("statefulset", name, namespace)["spec"]["replicas"] == 0
        cluster.kubectl("annotate", "streamapp", name, "-n", namespace, "streamapp.io/paused-")
        cluster.wait_until(lambda: cluster.get_json("statefulset", name, namespace)["spec"]["replicas"] == 2, 60,
                           "the scale to be applied once resumed")  # fmt: skip
        assert "paused" not in cluster.get_json("streamapp", name, namespace)["status"]
    finally:
        cluster.delete_topics(name)
