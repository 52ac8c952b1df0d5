"""``streamapp image build`` really builds: a tiny project folder becomes an image ``FROM`` the StreamApp image
with podman (its layers cached), in which the image's non-root user imports the package from the venv, next to
the runtime, as a pod on the local cluster would run it (``buildah run``, the node agent's way).

Needs podman, buildah and the project image (``make image``); marked e2e like the other tests that need the
built image (hack/image/tests/test_image_security.py). Measured: 7.4 s (wheel 0.7 s, base probe 0.9 s, podman
build 4 s, the import check 1 s) on the 2-core machine, the base image's layers cached.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from streamapp.app_image.plan import DEFAULT_BASE
from streamapp.app_image.tools import LocalTools
from streamapp.commands.image import build_app_image

pytestmark = pytest.mark.e2e  # needs the built image

REPO = Path(__file__).resolve().parents[3]
BASE = os.environ.get("STREAMAPP_IMAGE", DEFAULT_BASE)


@pytest.fixture
def tools() -> LocalTools:
    if shutil.which("podman") is None or shutil.which("buildah") is None:
        pytest.skip("podman/buildah not installed (hack/image/setup.sh)")
    env = {**os.environ, "UV": str(REPO / "hack" / "bin" / "uv")}  # $UV builds the wheel
    if subprocess.run(["podman", "image", "exists", BASE], env=env, check=False).returncode != 0:
        pytest.skip(f"{BASE} not built (make image)")
    return LocalTools(env)


@pytest.fixture
def tag(tools: LocalTools) -> Iterator[str]:
    name = f"localhost/streamapp-apptest-{uuid.uuid4().hex[:8]}:1"
    yield name
    subprocess.run(["podman", "rmi", "--force", name], capture_output=True, check=False)


def test_the_image_of_a_project_folder_lets_the_runtime_user_import_the_package(
    tmp_path: Path, tools: LocalTools, tag: str
) -> None:
    project = tmp_path / "tiny-clicks"
    (project / "src" / "tiny_clicks").mkdir(parents=True)
    (project / "pyproject.toml").write_text(
        '[project]\nname = "tiny-clicks"\nversion = "0.1.0"\ndependencies = ["streamapp-runtime", "pyyaml>=6"]\n'
        '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n'
    )
    (project / "src" / "tiny_clicks" / "__init__.py").write_text("GREETING = 'clicks'\n")

    built = build_app_image(project, tag, BASE, [], tools)
    output = tools.run_in(
        tag,
        [
            "python",
            "-c",
            "import os, streamapp, tiny_clicks; print(tiny_clicks.GREETING, os.getuid(), tiny_clicks.__file__)",
        ],
    )

    assert built.wheel.name == "tiny-clicks"
    assert output.split() == [
        "clicks",
        "10001",
        "/opt/streamapp/venv/lib/python3.11/site-packages/tiny_clicks/__init__.py",
    ]
