"""Container processes: build the command line for a mode, spawn it, track it with a pid file.

Two modes (agent flag ``--mode``):

- ``venv``: the container command runs on the host, with ``PATH`` starting at the workspace venv's
  ``bin``. ``unshare --mount --uts --propagation private`` gives it a private mount namespace (the bind
  mounts of its volumes are invisible to the host) and its own hostname (the pod name); a small
  ``bash`` prologue makes the mounts, then execs the command, so the container's pid is the
  spawned pid. Mount targets that do not exist are created (empty) on the host file system.
- ``image``: the command runs in the image's root file system through
  ``buildah run --isolation chroot --network host`` on a working container made by ``buildah from``.

Every process leads its own session/process group (pgid == pid); signals go to the whole group. A pid
file ``<pid> <start time in clock ticks>`` lets a restarted agent find and kill what it started before.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shlex
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from e2e.nodeagent.volumes import Mount

log = logging.getLogger(__name__)

SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class ImageConfig:
    """The parts of an image's OCI config that shape a container: ENTRYPOINT, CMD, ENV (``K=V``)."""

    entrypoint: list[str] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    working_dir: str = ""


@dataclass(frozen=True)
class LaunchSpec:
    """One container run: the expanded ``argv``, its full ``env``, mounts, working dir and hostname.

    ``key`` is unique per pod container (``<ns>_<pod>_<container>``); image mode names its working
    container after it.
    """

    key: str
    image: str
    argv: list[str]
    env: dict[str, str]
    mounts: list[Mount]
    working_dir: str
    hostname: str
    run_as: str = ""


class Runtime(Protocol):
    """How a container becomes a process in one mode."""

    name: str

    def image_config(self, image: str, key: str) -> ImageConfig:
        """Defaults of ``image`` (venv mode: none). May prepare a working container named after ``key``."""
        ...

    def base_env(self, image_config: ImageConfig) -> dict[str, str]:
        """Variables every container starts with, before the pod's own env."""
        ...

    def command(self, spec: LaunchSpec) -> tuple[list[str], dict[str, str]]:
        """(argv, environment) of the process to spawn for ``spec``."""
        ...

    def remove(self, key: str) -> None:
        """Drop what ``image_config`` prepared for ``key`` (on pod removal)."""
        ...


def mount_prologue(mounts: Sequence[Mount], hostname: str, working_dir: str) -> str:
    """``bash`` script that makes the bind mounts, sets the hostname, enters the working dir, execs "$@".

    Every source is opened (fd 10, 11, ...) before the first mount and bound from ``/proc/self/fd/N``,
    so a mount at e.g. ``/work`` cannot hide the sources of later mounts that live under it. The working
    dir defaults to ``/`` as in a container whose image sets no WORKDIR.
    """
    lines = ["set -e"]
    for fd, m in enumerate(mounts, start=10):
        lines.append(f"exec {fd}<{shlex.quote(str(m.source))}")
    for fd, m in enumerate(mounts, start=10):
        dst = shlex.quote(m.target)
        if m.source.is_dir():
            lines.append(f"mkdir -p {dst}")
        else:
            lines.append(f'[ -e {dst} ] || {{ mkdir -p "$(dirname {dst})"; : > {dst}; }}')
        lines.append(f"mount --bind /proc/self/fd/{fd} {dst}")
        if m.read_only:
            lines.append(f"mount -o remount,bind,ro {dst}")
        lines.append(f"exec {fd}<&-")
    lines.append(f"hostname {shlex.quote(hostname)}")
    workdir = shlex.quote(working_dir or "/")
    lines.append(f"mkdir -p {workdir} && cd {workdir}")
    lines.append('exec "$@"')
    return "\n".join(lines)


class VenvRuntime:
    """Runs commands on the host with the workspace venv first on PATH (see module doc)."""

    name = "venv"

    def __init__(self, venv: Path) -> None:
        self.venv = venv

    def image_config(self, image: str, key: str) -> ImageConfig:
        return ImageConfig()

    def base_env(self, image_config: ImageConfig) -> dict[str, str]:
        return {
            "PATH": f"{self.venv / 'bin'}:{SYSTEM_PATH}",
            "VIRTUAL_ENV": str(self.venv),
            "HOME": "/root",
            "LANG": "C.UTF-8",
        }

    def command(self, spec: LaunchSpec) -> tuple[list[str], dict[str, str]]:
        script = mount_prologue(spec.mounts, spec.hostname, spec.working_dir)
        unshare = ["unshare", "--mount", "--uts", "--propagation", "private", "--"]
        return [*unshare, "/bin/bash", "-c", script, "nodeagent", *spec.argv], spec.env

    def remove(self, key: str) -> None:
        return None


def _container_name(key: str) -> str:
    return "nodeagent-" + re.sub(r"[^a-zA-Z0-9_.-]", "-", key)


class ImageRuntime:
    """Runs commands inside the image's root file system with ``buildah run --isolation chroot``."""

    name = "image"
    prefix = "nodeagent-"

    def __init__(self) -> None:
        self.roots: dict[str, Path] = {}  # key -> mounted root file system of its working container

    def image_config(self, image: str, key: str) -> ImageConfig:
        name = _container_name(key)
        subprocess.run(["buildah", "rm", name], capture_output=True, check=False)
        made = subprocess.run(
            ["buildah", "from", "--pull=never", "--name", name, image], capture_output=True, text=True
        )
        if made.returncode != 0:
            raise RuntimeError(f"buildah from {image}: {made.stderr.strip()}")
        shown = subprocess.run(
            ["buildah", "inspect", "--type", "container", name], capture_output=True, text=True, check=True
        )
        mounted = subprocess.run(["buildah", "mount", name], capture_output=True, text=True, check=True)
        self.roots[key] = Path(mounted.stdout.strip())
        cfg = (json.loads(shown.stdout).get("OCIv1") or {}).get("config") or {}
        env = dict(item.split("=", 1) for item in cfg.get("Env") or [] if "=" in item)
        return ImageConfig(cfg.get("Entrypoint") or [], cfg.get("Cmd") or [], env, cfg.get("WorkingDir") or "")

    def base_env(self, image_config: ImageConfig) -> dict[str, str]:
        return {"PATH": SYSTEM_PATH, **image_config.env}

    def command(self, spec: LaunchSpec) -> tuple[list[str], dict[str, str]]:
        argv = [
            "buildah",
            "run",
            "--isolation",
            "chroot",
            "--network",
            "host",
            "--no-hosts",
            "--hostname",
            spec.hostname,
        ]
        root = self.roots.get(spec.key)
        for m in spec.mounts:
            # buildah's chroot isolation does not follow symlinks in mount targets (/var/run -> /run)
            target = resolve_in_root(root, m.target) if root is not None else m.target
            argv += ["-v", f"{m.source}:{target}" + (":ro" if m.read_only else "")]
        for key, value in spec.env.items():
            argv += ["--env", f"{key}={value}"]
        if spec.working_dir:
            argv += ["--workingdir", spec.working_dir]
        if spec.run_as:
            argv += ["--user", spec.run_as]
        argv += [_container_name(spec.key), "--", *spec.argv]
        # buildah itself must see the agent's container-storage settings (the pod's env goes in via --env)
        storage = {k: v for k, v in os.environ.items() if k.startswith("CONTAINERS_") or k == "STORAGE_DRIVER"}
        return argv, {"PATH": SYSTEM_PATH, "HOME": "/root", **storage}

    def remove(self, key: str) -> None:
        self.roots.pop(key, None)
        subprocess.run(["buildah", "rm", _container_name(key)], capture_output=True, check=False)

    def remove_all(self) -> None:
        """Remove working containers left by an earlier agent (names start with ``nodeagent-``)."""
        listed = subprocess.run(
            ["buildah", "containers", "--format", "{{.ContainerName}}"], capture_output=True, text=True
        )
        for name in listed.stdout.split():
            if name.startswith(self.prefix):
                subprocess.run(["buildah", "rm", name], capture_output=True, check=False)


def resolve_in_root(root: Path, target: str, max_links: int = 40) -> str:
    """``target`` with every symlink inside the image root ``root`` resolved, as a path in that root.

    Absolute link targets are taken relative to ``root``; components that do not exist are kept.
    Example: with ``<root>/var/run -> /run``, "/var/run/secrets" -> "/run/secrets".
    """
    parts = [p for p in target.split("/") if p and p != "."]
    resolved: list[str] = []
    links = 0
    while parts:
        part = parts.pop(0)
        if part == "..":
            if resolved:
                resolved.pop()
            continue
        candidate = root.joinpath(*resolved, part)
        if candidate.is_symlink() and links < max_links:
            links += 1
            link = os.readlink(candidate)
            if link.startswith("/"):
                resolved = []
            parts = [p for p in link.split("/") if p and p != "."] + parts
            continue
        resolved.append(part)
    return "/" + "/".join(resolved)


def process_start_ticks(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot (/proc/<pid>/stat field 22); None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def spawn(argv: list[str], env: dict[str, str], log_path: Path, pid_path: Path) -> subprocess.Popen[bytes]:
    """Start ``argv`` as a new session with stdout+stderr appended to ``log_path``; write ``pid_path``."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as out:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    pid_path.write_text(f"{proc.pid} {process_start_ticks(proc.pid) or 0}\n")
    return proc


def signal_group(pid: int, sig: signal.Signals) -> None:
    """Send ``sig`` to process group ``pid`` (ignore an already empty group)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _is_runtime_helper(pid: int) -> bool | None:
    """True for buildah's own processes, False for a container process in a chroot; None otherwise/gone."""
    try:
        in_chroot = os.readlink(f"/proc/{pid}/root") != "/"
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None
    if comm.startswith(("memfd:", "buildah")):
        return True
    return False if in_chroot else None


def signal_container(pid: int, sig: signal.Signals) -> None:
    """Deliver a stop signal the way a container runtime does.

    Venv mode (``pid`` is the command itself): the whole process group. Image mode (``pid`` is
    ``buildah run``): only the processes inside the image's chroot, so that the command can handle the
    signal and exit while buildah waits for it and passes its exit code on (buildah itself exits 1 on
    SIGTERM and would cut the command's shutdown short). SIGKILL always hits the whole group.
    """
    if sig != signal.SIGKILL:
        inside = [p for p in descendants(pid) if _is_runtime_helper(p) is False]
        if inside:
            for target in inside:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(target, sig)
            return
    signal_group(pid, sig)


def kill_orphans(pods_dir: Path) -> int:
    """SIGKILL the process groups named by pid files under ``pods_dir`` (from an earlier agent run).

    A pid counts only if its start time still matches the file (so a reused pid is never hit). Pid
    files are removed. Returns the number of groups killed.
    """
    killed = 0
    for pid_file in pods_dir.glob("*/*/*.pid"):
        try:
            pid_text, ticks_text = pid_file.read_text().split()
            pid, ticks = int(pid_text), int(ticks_text)
        except ValueError:
            pid_file.unlink(missing_ok=True)
            continue
        if process_start_ticks(pid) == ticks:
            log.info("Killed orphaned container process group %d (%s)", pid, pid_file)
            signal_group(pid, signal.SIGKILL)
            killed += 1
        pid_file.unlink(missing_ok=True)
    return killed


def descendants(pid: int) -> list[int]:
    """All descendant pids of ``pid`` (breadth first), from /proc/<pid>/task/*/children."""
    out: list[int] = []
    frontier = [pid]
    while frontier:
        current = frontier.pop(0)
        for task in Path(f"/proc/{current}/task").glob("*"):
            try:
                children = [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
            out.extend(children)
            frontier.extend(children)
    return out


def namespace_target(pid: int) -> int:
    """The pid whose namespaces/root an exec probe should enter.

    Venv mode: ``pid`` itself. Image mode: the first process inside the image's chroot that is not one of
    buildah's own helpers (``memfd:buildah-chroot``...), i.e. the container's command.
    """
    return next((p for p in descendants(pid) if _is_runtime_helper(p) is False), pid)
