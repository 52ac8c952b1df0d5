"""The helm binary of the local stack and chart rendering, for the chart tests and the API-server test."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "streamapp-operator"


def helm_binary() -> Path:
    """``.cache/helm-v<HELM_VERSION>/bin/helm``, built by ``hack/stack/build-helm.sh`` when missing (cached)."""
    versions = (ROOT / "hack" / "stack" / "versions.env").read_text().splitlines()
    version = next(line.split("=", 1)[1].strip() for line in versions if line.startswith("HELM_VERSION="))
    binary = ROOT / ".cache" / f"helm-v{version}" / "bin" / "helm"
    if not binary.exists():
        subprocess.run([str(ROOT / "hack" / "stack" / "build-helm.sh")], check=True)
    return binary


def render(
    helm: Path, release: str, namespace: str, *sets: str, api_versions: Sequence[str] = ()
) -> list[dict[str, Any]]:
    """``helm template`` output as documents; ``_source`` names the template file of each. ``api_versions``: what
    the cluster is said to serve besides the built-ins (``monitoring.coreos.com/v1/PrometheusRule``)."""
    args = [str(helm), "template", release, str(CHART), "--namespace", namespace]
    for value in sets:
        args += ["--set", value]
    for api_version in api_versions:
        args += ["--api-versions", api_version]
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    docs = []
    for chunk in done.stdout.split("\n---\n"):
        doc = yaml.safe_load(chunk)
        if doc:
            source = next((line for line in chunk.splitlines() if line.startswith("# Source: ")), "")
            doc["_source"] = source.rsplit("/", 1)[-1]
            docs.append(doc)
    return docs
