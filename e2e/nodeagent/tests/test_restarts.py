"""Real pods restart per restartPolicy: a crashing container and a liveness failure, after an init container.

Needs the local stack; see conftest.
"""

from __future__ import annotations

import pytest

from e2e.nodeagent.kube import Kube, Obj
from e2e.nodeagent.tests.conftest import RUN, wait_for

pytestmark = pytest.mark.e2e


def pod() -> Obj:
    shared = [{"name": "work", "mountPath": "/work"}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "restarts"},
        "spec": {
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 1,
            "volumes": [{"name": "work", "emptyDir": {}}],
            "initContainers": [
                {
                    "name": "init",
                    "image": "localhost/streamapp:dev",
                    "volumeMounts": shared,
                    "command": ["sh", "-c", "echo initialized > /work/marker"],
                }
            ],
            "containers": [
                {
                    "name": "crasher",
                    "image": "localhost/streamapp:dev",
                    "volumeMounts": shared,
                    "command": ["sh", "-c", "cat /work/marker; exit 3"],
                },
                {
                    "name": "unhealthy",
                    "image": "localhost/streamapp:dev",
                    "command": ["sleep", "300"],
                    "livenessProbe": {"exec": {"command": ["false"]}, "periodSeconds": 1, "failureThreshold": 2},
                },
            ],
        },
    }


def test_crash_and_liveness_failure_restart_with_last_state(kube: Kube, namespace: str) -> None:
    pods = f"/api/v1/namespaces/{namespace}/pods"
    kube.create(pods, pod())

    def restarted_twice() -> dict[str, Obj] | None:
        status = (kube.get(f"{pods}/restarts") or {}).get("status") or {}
        by_name = {c["name"]: c for c in status.get("containerStatuses") or []}
        if len(by_name) == 2 and all(c["restartCount"] >= 2 for c in by_name.values()):
            return by_name
        return None

    statuses = wait_for("both containers to restart twice", restarted_twice, 60)
    assert statuses["crasher"]["lastState"]["terminated"]["exitCode"] == 3
    assert statuses["unhealthy"]["lastState"]["terminated"]["exitCode"] == 137  # SIGKILL after liveness failure
    full = kube.get(f"{pods}/restarts") or {}
    assert full["status"]["phase"] == "Running"
    init = full["status"]["initContainerStatuses"][0]
    assert init["state"]["terminated"]["exitCode"] == 0 and init["restartCount"] == 0
    log = (RUN / "pods" / namespace / "restarts" / "crasher.log").read_text()
    assert log.count("initialized\n") >= 3  # every run saw the init container's file in the emptyDir
