"""Fixtures of the e2e scenarios: the local stack must be up (``make test`` starts it); these fixtures check it
and install the operator chart. They refuse to run against anything but the local stack's kubeconfig."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from e2e import cluster


@pytest.fixture(scope="session")
def stack() -> dict[str, str]:
    """The local stack's environment; fails (does not skip) when the stack is down."""
    env = cluster.stack_env()
    cache = (cluster.ROOT / ".cache" / "run").resolve()  # a worktree's .cache/run may link to the main tree's
    assert Path(env["KUBECONFIG"]).resolve().is_relative_to(cache), "refusing a kubeconfig outside .cache/run"
    cluster.kubectl("get", "--raw", "/readyz")
    return env


@pytest.fixture(scope="session")
def operator_installed(stack: dict[str, str]) -> None:
    """The operator chart is installed (idempotent ``helm upgrade --install``) and its Deployment is ready."""
    subprocess.run([str(cluster.ROOT / "hack" / "operator-install.sh")], env=cluster.process_env(), check=True)
