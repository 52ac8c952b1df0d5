"""The side effects of ``streamapp image build``, behind one seam (``ImageTools``): build a project folder into a
wheel, ask the base image what it has installed, build the image, run a command in an image.

``LocalTools`` does them with the local tooling the project's own image uses (``hack/image/README.md``): podman
and buildah without a daemon (``--isolation chroot``, ``--pull=never``: the base image is a local one), in the
containers/storage the local cluster's node agent reads (``STORAGE_DRIVER``, default ``overlay``). A wheel is
built with ``$UV build`` when the environment variable ``UV`` names a uv, else with ``pip wheel`` of this interpreter.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final, Protocol

__all__ = ["PROBE", "ImageTools", "LocalTools", "ToolError"]

PROBE: Final = """
import importlib.metadata, json, os, platform, sys
print(json.dumps({
    "distributions": {d.metadata["Name"]: d.version for d in importlib.metadata.distributions()},
    "environment": {
        "python_version": ".".join(platform.python_version_tuple()[:2]),
        "python_full_version": platform.python_version(),
        "implementation_name": sys.implementation.name,
        "platform_python_implementation": platform.python_implementation(),
        "platform_machine": platform.machine(),
        "platform_system": platform.system(),
        "platform_release": platform.release(),
        "sys_platform": sys.platform,
        "os_name": os.name,
    },
}))
"""
"""Run by the base image's Python: its distributions and PEP 508 marker environment as JSON (``plan.image_facts``)."""


class ToolError(RuntimeError):
    """A tool failed or is missing; the message holds its command and the end of its output."""


class ImageTools(Protocol):
    """What ``streamapp image build`` asks of the machine (``LocalTools``; unit tests pass a fake)."""

    def build_wheel(self, project: Path, out_dir: Path) -> Path:
        """Build the project folder ``project`` (with a pyproject.toml) into a wheel in ``out_dir``; its path."""
        ...

    def probe(self, image: str) -> dict[str, dict[str, str]]:
        """``PROBE``'s document for ``image``. Raises ToolError when the image is not in the local store."""
        ...

    def build(self, context: Path, tag: str) -> None:
        """Build ``context``/Dockerfile into the local image ``tag``."""
        ...


class LocalTools:
    """``ImageTools`` with uv or pip, buildah and podman on this machine."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self._env = {**(os.environ if env is None else env)}
        self._env.setdefault("STORAGE_DRIVER", "overlay")

    def build_wheel(self, project: Path, out_dir: Path) -> Path:
        uv = self._env.get("UV")  # where the caller keeps its uv (this project's scripts: hack/env.sh); no PATH lookup
        if uv:
            command = [uv, "build", "--wheel", "--out-dir", str(out_dir), str(project)]
        else:
            command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(out_dir), str(project)]
        self._run(command)
        wheels = sorted(out_dir.glob("*.whl"))
        if len(wheels) != 1:
            raise ToolError(f"{' '.join(command)} made {len(wheels)} wheels in {out_dir}, expected 1")
        return wheels[0]

    def probe(self, image: str) -> dict[str, dict[str, str]]:
        output = self.run_in(image, ["python", "-c", PROBE])
        document: dict[str, dict[str, str]] = json.loads(output)
        return document

    def build(self, context: Path, tag: str) -> None:
        self._run(
            ["podman", "build", "--isolation=chroot", "--pull=never", "--layers", "--file",
             str(context / "Dockerfile"), "--tag", tag, str(context)],
            capture=False,
        )  # fmt: skip

    def run_in(self, image: str, command: Sequence[str]) -> str:
        """stdout of ``command`` run in a working container of ``image`` as its user, the way the local node agent
        runs pods (``buildah run --isolation chroot``; ``podman run`` needs an OCI runtime this stack lacks)."""
        container = f"streamapp-image-{uuid.uuid4().hex[:10]}"
        self._run(["buildah", "from", "--pull-never", "--name", container, image])
        try:
            return self._run(["buildah", "run", "--isolation", "chroot", "--network", "host", container, "--",
                              *command])  # fmt: skip
        finally:
            subprocess.run(["buildah", "rm", container], env=self._env, capture_output=True, check=False)

    def _run(self, command: Sequence[str], *, capture: bool = True) -> str:
        if shutil.which(command[0], path=self._env.get("PATH")) is None and not Path(command[0]).exists():
            raise ToolError(f"{command[0]} is not installed (needed for: {' '.join(command[:2])})")
        done = subprocess.run(
            list(command),
            env=self._env,
            stdout=subprocess.PIPE if capture else None,
            stderr=subprocess.PIPE if capture else None,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            tail = "\n".join((done.stderr or "").strip().splitlines()[-15:])
            raise ToolError(
                f"{' '.join(command[:3])} ... failed (exit {done.returncode})" + (f":\n{tail}" if tail else "")
            )
        return done.stdout or ""
