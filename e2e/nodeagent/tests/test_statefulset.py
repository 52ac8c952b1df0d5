"""A StatefulSet really runs on the node agent: 2/2 ready, data survives pod re-creation, SIGTERM on delete.

Needs the local stack (``hack/stack/up.sh k8s``); the node agent is started with
``e2e/nodeagent/run.sh start`` if it is not running yet (no-op otherwise).
"""

from __future__ import annotations

import ipaddress
import os
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.nodeagent.agent import REPO
from e2e.nodeagent.kube import Kube, Obj

pytestmark = pytest.mark.e2e

RUN = REPO / ".cache" / "run"
NODE = "streamapp-node-0"

# The shell traps SIGTERM and records it in the volume; python (same process group) gets it too.
SERVER = (
    "trap 'echo SIGTERM >> /data/signals; exit 0' TERM; "
    "python -m http.server --bind $(POD_IP) 8080 --directory /data & wait"
)


def wait_for(what: str, check: Callable[[], Any], timeout: float = 90.0) -> Any:
    """Poll ``check`` until it returns something truthy; fail with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.5)
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")


@pytest.fixture(scope="module")
def kube() -> Kube:
    kubeconfig = os.environ.get("KUBECONFIG") or str(RUN / "admin.kubeconfig")
    if not Path(kubeconfig).exists():
        pytest.fail(f"no kubeconfig at {kubeconfig}: start the stack with hack/stack/up.sh k8s")
    subprocess.run(
        [str(REPO / "e2e" / "nodeagent" / "run.sh"), "start"], check=True, env={**os.environ, "KUBECONFIG": kubeconfig}
    )
    client = Kube(kubeconfig)

    def node_ready() -> bool:
        node = client.get_node(NODE) or {}
        conditions = (node.get("status") or {}).get("conditions") or []
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    wait_for(f"node {NODE} Ready", node_ready, 30)
    return client


@pytest.fixture
def namespace(kube: Kube) -> Iterator[str]:
    name = f"nodeagent-e2e-{uuid.uuid4().hex[:6]}"
    kube.create("/api/v1/namespaces", {"metadata": {"name": name}})
    wait_for("default service account", lambda: kube.get(f"/api/v1/namespaces/{name}/serviceaccounts/default"))
    yield name
    kube.request("DELETE", f"/api/v1/namespaces/{name}")


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
