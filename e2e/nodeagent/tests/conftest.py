"""Fixtures for the node agent's real tests: the local API server, the agent, a throw-away namespace."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.nodeagent.agent import REPO
from e2e.nodeagent.kube import Kube

RUN = REPO / ".cache" / "run"
NODE = "streamapp-node-0"


def wait_for(what: str, check: Callable[[], Any], timeout: float = 90.0) -> Any:
    """Poll ``check`` every 0.5 s until it returns something truthy; fail naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.5)
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")


@pytest.fixture(scope="session")
def kube() -> Kube:
    """API client for the local stack, with the node agent running (started if needed) and the node Ready."""
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
    """A fresh namespace with its default ServiceAccount; deleted afterwards."""
    name = f"nodeagent-e2e-{uuid.uuid4().hex[:6]}"
    kube.create("/api/v1/namespaces", {"metadata": {"name": name}})
    wait_for("default service account", lambda: kube.get(f"/api/v1/namespaces/{name}/serviceaccounts/default"))
    yield name
    kube.request("DELETE", f"/api/v1/namespaces/{name}")
