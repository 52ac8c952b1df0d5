"""A StreamApp's pods run under the ``restricted`` Pod Security Standard by default (issue 9, item 9).

On the real stack: in a namespace labelled ``pod-security.kubernetes.io/enforce=restricted`` (the API
server's admission refuses any pod that does not meet it; the test first shows that it does), a StreamApp's
pods are created, become ready and copy records, running as a non-root user with a read-only root file
system and default resource requests.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator

import pytest

from e2e import cluster

pytestmark = pytest.mark.e2e
RESTRICTED = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/enforce-version": "latest",
}


@pytest.fixture
def namespace(operator_installed: None) -> Iterator[str]:
    name = cluster.create_namespace("restricted", RESTRICTED)
    yield name
    cluster.delete_namespace(name)


def test_the_app_runs_in_a_namespace_enforcing_the_restricted_standard(namespace: str) -> None:
    plain_pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "plain"},
                 "spec": {"containers": [{"name": "c", "image": "localhost/streamapp:dev"}]}}  # fmt: skip
    refused = subprocess.run(
        ["kubectl", "create", "--dry-run=server", "-n", namespace, "-f", "-"],
        env=cluster.process_env(), input=json.dumps(plain_pod), capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert 'violates PodSecurity "restricted:latest"' in refused.stderr, "the namespace enforces nothing"

    name = f"psa-{uuid.uuid4().hex[:6]}"
    cluster.create_topics({f"{name}-in": 1, f"{name}-out": 1})
    try:
        cluster.apply(cluster.passthrough_app(name, f"{name}-in", f"{name}-out"), namespace)
        cluster.wait_condition(name, namespace, "Ready", "True", timeout_s=180)
        pod = cluster.get_json("pod", f"{name}-0", namespace)
        container = pod["spec"]["containers"][0]
        assert container["securityContext"]["runAsNonRoot"] is True
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["resources"]["requests"] == {"cpu": "100m", "memory": "256Mi"}
        assert cluster.condition(name, namespace, "Degraded")["status"] == "False"
    finally:
        cluster.delete_topics(name)
