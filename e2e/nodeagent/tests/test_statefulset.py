"""A StatefulSet really runs on the node agent: 2/2 ready, data survives pod re-creation, SIGTERM on delete.

Needs the local stack (``hack/stack/up.sh k8s``); the node agent is started with
``e2e/nodeagent/run.sh start`` if it is not running yet (no-op otherwise).
"""

from __future__ import annotations

import ipaddress
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from e2e.nodeagent.kube import Kube, Obj
from e2e.nodeagent.tests.conftest import NODE, RUN, wait_for

pytestmark = pytest.mark.e2e

# The shell traps SIGTERM and records it in the volume; python (same process group) gets it too.
SERVER = (
    "trap 'echo SIGTERM >> /data/signals; exit 0' TERM; "
    "python -m http.server --bind $(POD_IP) 8080 --directory /data & wait"
)


def statefulset(name: str) -> Obj:
    labels = {"app": name}
    container = {
        "name": "web",
        "image": "localhost/streamapp:dev",
        "command": ["sh", "-c", SERVER],
        "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
        "ports": [{"name": "http", "containerPort": 8080}],
        "readinessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 1},
        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": {
            "serviceName": name,
            "replicas": 2,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [container], "terminationGracePeriodSeconds": 30},
            },
            "volumeClaimTemplates": [
                {
                    "metadata": {"name": "data"},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
                }
            ],
        },
    }


def http_get(ip: str, path: str) -> str:
    with urllib.request.urlopen(f"http://{ip}:8080/{path}", timeout=5) as response:
        body: bytes = response.read()
    return body.decode()


def test_statefulset_pods_run_keep_their_volume_and_get_sigterm(kube: Kube, namespace: str) -> None:
    apps = f"/apis/apps/v1/namespaces/{namespace}/statefulsets"
    pods = f"/api/v1/namespaces/{namespace}/pods"
    kube.create(apps, statefulset("web"))

    def two_ready() -> bool:
        sts = kube.get(f"{apps}/web") or {}
        return (sts.get("status") or {}).get("readyReplicas") == 2

    wait_for("statefulset web 2/2 ready", two_ready)

    # each pod has its own loopback IP, serves its own volume there, and the claims use the default class
    web0, web1 = (kube.get(f"{pods}/web-{i}") or {} for i in range(2))
    ips = [web0["status"]["podIP"], web1["status"]["podIP"]]
    assert len(set(ips)) == 2
    assert all(ipaddress.ip_address(ip) in ipaddress.ip_network("127.0.100.0/24") for ip in ips)
    assert web0["status"]["hostIP"] == "127.0.0.1" and web0["spec"]["nodeName"] == NODE
    claim = kube.get(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/data-web-0") or {}
    assert claim["status"]["phase"] == "Bound" and claim["spec"]["storageClassName"] == "local"
    volume = kube.get_pv(claim["spec"]["volumeName"]) or {}
    folder = Path(volume["spec"]["hostPath"]["path"])
    assert folder == RUN / "volumes" / namespace / "data-web-0"

    # a file in web-0's volume is served by web-0 only
    (folder / "hello.txt").write_text("written before the pod was deleted")
    assert http_get(ips[0], "hello.txt") == "written before the pod was deleted"
    with pytest.raises(urllib.error.HTTPError):
        http_get(ips[1], "hello.txt")

    # deleting web-0 sends SIGTERM (the process exits long before the 30 s grace period)
    old_uid = web0["metadata"]["uid"]
    started = time.monotonic()
    kube.request("DELETE", f"{pods}/web-0")

    def old_pod_gone() -> bool:
        pod = kube.get(f"{pods}/web-0")
        return pod is None or pod["metadata"]["uid"] != old_uid

    wait_for("web-0 to be deleted", old_pod_gone, 30)
    assert time.monotonic() - started < 15
    assert (folder / "signals").read_text() == "SIGTERM\n"

    # the StatefulSet re-creates web-0 on the same claim: the file is still there
    wait_for("statefulset web 2/2 ready again", two_ready)
    new_web0 = kube.get(f"{pods}/web-0") or {}
    assert new_web0["metadata"]["uid"] != old_uid
    assert http_get(new_web0["status"]["podIP"], "hello.txt") == "written before the pod was deleted"
    log = RUN / "pods" / namespace / "web-0" / "web.log"
    assert "GET /hello.txt" in log.read_text()
