"""Container processes see their volumes at mountPaths, in a mount namespace the host does not see.

These start real processes with ``unshare``; they need root (as the node agent does).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from e2e.nodeagent import launch
from e2e.nodeagent.agent import REPO
from e2e.nodeagent.volumes import Mount

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mount namespaces need root")


def run_spec(tmp_path: Path, mounts: list[Mount], argv: list[str], working_dir: str = "") -> launch.LaunchSpec:
    return launch.LaunchSpec(
        key="ns_pod_c",
        image="",
        argv=argv,
        env={"GREETING": "hi"},
        mounts=mounts,
        working_dir=working_dir,
        hostname="web-0",
    )


def test_venv_mode_binds_volumes_sets_hostname_and_venv_path(tmp_path: Path) -> None:
    volume = tmp_path / "volume"
    volume.mkdir()
    (volume / "data.txt").write_text("persisted")
    target = tmp_path / "mnt" / "state"  # does not exist yet: created by the prologue
    runtime = launch.VenvRuntime(REPO / ".venv")
    script = f"cat {target}/data.txt; echo; hostname; pwd; echo $GREETING; touch {target}/written"
    argv, env = runtime.command(
        run_spec(tmp_path, [Mount(volume, str(target), False)], ["sh", "-c", script], working_dir=str(tmp_path))
    )
    env = {**runtime.base_env(launch.ImageConfig()), **env}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=10)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n") == ["persisted", "web-0", str(tmp_path), "hi", ""]
    assert (volume / "written").exists()  # writes land in the volume folder
    assert not (target / "data.txt").exists()  # the host does not see the bind mount
    assert os.uname().nodename != "web-0"


def test_read_only_mount_rejects_writes(tmp_path: Path) -> None:
    volume = tmp_path / "cfg"
    volume.mkdir()
    runtime = launch.VenvRuntime(REPO / ".venv")
    argv, env = runtime.command(
        run_spec(tmp_path, [Mount(volume, str(tmp_path / "etc"), True)], ["sh", "-c", f"touch {tmp_path}/etc/x"])
    )
    done = subprocess.run(argv, env={**env, "PATH": launch.SYSTEM_PATH}, capture_output=True, text=True)
    assert done.returncode != 0 and "Read-only file system" in done.stderr


def test_restarted_agent_kills_orphans_from_pid_files_only_if_start_time_matches(tmp_path: Path) -> None:
    pod_dir = tmp_path / "pods" / "ns" / "pod"
    proc = launch.spawn(["sleep", "60"], {"PATH": launch.SYSTEM_PATH}, pod_dir / "c.log", pod_dir / "c.pid")
    stale = pod_dir / "stale.pid"
    stale.write_text(f"{os.getpid()} 1\n")  # our own pid with a wrong start time: must survive
    assert launch.kill_orphans(tmp_path / "pods") == 1
    assert proc.wait(timeout=5) == -signal.SIGKILL
    assert not (pod_dir / "c.pid").exists() and not stale.exists()


def test_signal_reaches_the_whole_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    proc = launch.spawn(
        ["sh", "-c", f"sleep 60 & echo $! > {pid_file}; wait"],
        {"PATH": launch.SYSTEM_PATH},
        tmp_path / "log",
        tmp_path / "pid",
    )
    deadline = time.monotonic() + 5
    while not pid_file.exists() or not pid_file.read_text().strip():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    child = int(pid_file.read_text())
    launch.signal_group(proc.pid, signal.SIGTERM)
    proc.wait(timeout=5)
    deadline = time.monotonic() + 5
    while launch.process_start_ticks(child) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert launch.process_start_ticks(child) is None


def test_mount_targets_follow_symlinks_inside_the_image_root(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "var").mkdir()
    (tmp_path / "var" / "run").symlink_to("/run")
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "conf").symlink_to("../opt/conf")
    assert launch.resolve_in_root(tmp_path, "/var/run/secrets/kubernetes.io") == "/run/secrets/kubernetes.io"
    assert launch.resolve_in_root(tmp_path, "/etc/conf/app.yaml") == "/opt/conf/app.yaml"
    assert launch.resolve_in_root(tmp_path, "/data/") == "/data"


def test_a_mount_over_an_ancestor_of_later_sources_does_not_hide_them(tmp_path: Path) -> None:
    # an emptyDir mounted at the folder that holds the other volumes' sources (e.g. mountPath /work)
    sources = tmp_path / "pods"
    (sources / "config").mkdir(parents=True)
    (sources / "config" / "app.yaml").write_text("config")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    mounts = [Mount(scratch, str(tmp_path), False), Mount(sources / "config", str(tmp_path / "etc"), True)]
    runtime = launch.VenvRuntime(REPO / ".venv")
    argv, env = runtime.command(run_spec(tmp_path, mounts, ["cat", f"{tmp_path}/etc/app.yaml"]))
    done = subprocess.run(argv, env={**env, "PATH": launch.SYSTEM_PATH}, capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (0, "config"), done.stderr
