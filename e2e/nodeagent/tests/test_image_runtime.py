"""Image mode really runs commands inside the image with buildah (needs the built localhost/streamapp:dev).

Pins the buildah quirks the runtime works around: mount targets behind symlinks (/var/run -> /run),
/etc/hosts overridden by buildah when several volumes are given, and SIGTERM that must reach the
command rather than buildah.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.nodeagent import launch
from e2e.nodeagent.volumes import SERVICE_ACCOUNT_DIR, Mount

pytestmark = pytest.mark.e2e
IMAGE = "localhost/streamapp:dev"


@pytest.fixture
def runtime() -> Iterator[launch.ImageRuntime]:
    present = subprocess.run(["buildah", "inspect", "--type", "image", IMAGE], capture_output=True)
    if present.returncode != 0:
        pytest.fail(f"image {IMAGE} not found: build it with hack/image/build.sh")
    rt = launch.ImageRuntime()
    yield rt
    rt.remove("test_image_runtime")


def spec(tmp_path: Path, argv: list[str], config: launch.ImageConfig) -> launch.LaunchSpec:
    (tmp_path / "sa").mkdir()
    (tmp_path / "sa" / "token").write_text("jwt")
    (tmp_path / "data").mkdir(mode=0o777)
    (tmp_path / "data").chmod(0o777)
    (tmp_path / "hosts").write_text("127.0.0.1\tlocalhost\n127.0.100.77\tweb-0\n")
    mounts = [
        Mount(tmp_path / "sa", SERVICE_ACCOUNT_DIR, True),
        Mount(tmp_path / "data", "/data", False),
        Mount(tmp_path / "hosts", "/etc/hosts", False),
    ]
    env = {**config.env, "POD_NAME": "web-0"}
    return launch.LaunchSpec(
        key="test_image_runtime",
        image=IMAGE,
        argv=argv,
        env=env,
        mounts=mounts,
        working_dir=config.working_dir,
        hostname="web-0",
    )


def test_command_runs_in_the_image_with_volumes_hosts_and_env(runtime: launch.ImageRuntime, tmp_path: Path) -> None:
    config = runtime.image_config(IMAGE, "test_image_runtime")
    script = (
        "cat /var/run/secrets/kubernetes.io/serviceaccount/token; echo; getent hosts web-0; hostname; "
        "echo $POD_NAME; command -v streamapp; id -u; touch /data/written"
    )
    argv, env = runtime.command(spec(tmp_path, ["sh", "-c", script], config))
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split("\n")
    assert lines[0] == "jwt"
    assert lines[1].split() == ["127.0.100.77", "web-0"]
    assert lines[2:5] == ["web-0", "web-0", "/opt/streamapp/venv/bin/streamapp"]  # the image's venv, not ours
    assert lines[5] != "0"  # the image's non-root user
    assert (tmp_path / "data" / "written").exists()


def test_sigterm_reaches_the_command_and_its_exit_code_passes_through(
    runtime: launch.ImageRuntime, tmp_path: Path
) -> None:
    config = runtime.image_config(IMAGE, "test_image_runtime")
    script = "trap 'echo got-term > /data/term; exit 0' TERM; echo up > /data/up; sleep 60 & wait"
    argv, env = runtime.command(spec(tmp_path, ["sh", "-c", script], config))
    proc = launch.spawn(argv, env, tmp_path / "log", tmp_path / "pid")
    deadline = time.monotonic() + 30
    while not (tmp_path / "data" / "up").exists():
        assert time.monotonic() < deadline and proc.poll() is None, (tmp_path / "log").read_text()
        time.sleep(0.1)
    launch.signal_container(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=20) == 0
    assert (tmp_path / "data" / "term").read_text() == "got-term\n"
    launch.signal_group(proc.pid, signal.SIGKILL)
