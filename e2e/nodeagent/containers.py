"""One container of a pod: its process, restarts with backoff, probes, and its status snapshot.

A ``ContainerRunner`` is driven by its pod worker's loop (never by its own thread): ``start`` spawns a
run, ``poll`` notices an exit, ``restart_due`` applies restartPolicy and the crash-loop backoff,
``probe`` runs due probes. Backoff starts at ``BACKOFF_INITIAL`` seconds and doubles up to
``BACKOFF_MAX`` (the kubelet's 10 s .. 300 s, shortened so tests stay fast); a run that lasted
``BACKOFF_RESET`` seconds resets it.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from e2e.nodeagent import launch, probes
from e2e.nodeagent.status import ContainerSnapshot, Termination, rfc3339

log = logging.getLogger(__name__)

BACKOFF_INITIAL = 1.0
BACKOFF_MAX = 10.0
BACKOFF_RESET = 30.0


@dataclass
class Prepared:
    """What the pod worker resolved for one run: the spawn command and the probe context."""

    argv: list[str]
    env: dict[str, str]
    probe_env: dict[str, str]


class ContainerRunner:
    """State machine of one container across its runs (see module doc).

    ``prepare`` builds a run (it may raise to keep the container waiting with a reason);
    ``log_path``/``pid_path`` are this container's files in the pod folder.
    """

    def __init__(self, spec: dict[str, Any], log_path: Path, pid_path: Path, restart_count: int = 0) -> None:
        self.spec = spec
        self.name: str = spec["name"]
        self.log_path = log_path
        self.pid_path = pid_path
        self.proc: subprocess.Popen[bytes] | None = None
        self.restart_count = restart_count
        self.runs = 0
        self.waiting_reason = "ContainerCreating"
        self.waiting_message = ""
        self.started_at = ""
        self.started_mono = 0.0
        self.termination: Termination | None = None
        self.last_termination: Termination | None = None
        self.backoff = 0.0
        self.next_start = 0.0
        self.probes: dict[str, probes.ProbeTracker] = {}
        self.probe_env: dict[str, str] = {}
        self.killed_reason = ""

    # --- lifecycle -------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self.proc is not None

    def start(self, prepared: Prepared, now: float) -> None:
        """Spawn a run; the previous termination (if any) becomes ``lastState``."""
        if self.termination is not None:
            self.last_termination = self.termination
            self.restart_count += 1
        self.termination = None
        self.killed_reason = ""
        self.proc = launch.spawn(prepared.argv, prepared.env, self.log_path, self.pid_path)
        self.runs += 1
        self.started_at = rfc3339()
        self.started_mono = now
        self.probe_env = prepared.probe_env
        self.probes = {
            kind: probes.ProbeTracker(self.spec[f"{kind}Probe"], kind, now)
            for kind in ("startup", "readiness", "liveness")
            if self.spec.get(f"{kind}Probe")
        }
        log.info("Started container %s (pid %d)", self.name, self.proc.pid)

    def wait_failed(self, reason: str, message: str) -> None:
        """Stay waiting (no process) with ``reason``; the pod worker retries ``prepare`` later."""
        self.waiting_reason, self.waiting_message = reason, message

    def poll(self, now: float) -> bool:
        """Notice an exit of the running process; returns True when it just exited."""
        if self.proc is None or self.proc.poll() is None:
            return False
        code = self.proc.returncode
        launch.signal_group(self.proc.pid, signal.SIGKILL)  # leftovers of the container's process group
        self.pid_path.unlink(missing_ok=True)
        sig = -code if code < 0 else None
        exit_code = 128 + sig if sig is not None else code
        reason = "Completed" if exit_code == 0 else "Error"
        self.termination = Termination(exit_code, reason, self.started_at, rfc3339(), self.killed_reason, sig)
        ran = now - self.started_mono
        self.backoff = 0.0 if ran >= BACKOFF_RESET else min(max(self.backoff * 2, BACKOFF_INITIAL), BACKOFF_MAX)
        self.next_start = now + self.backoff
        self.proc = None
        self.probes = {}
        log.info("Container %s exited with code %d after %.1fs", self.name, exit_code, ran)
        return True

    def restart_wanted(self, restart_policy: str) -> bool:
        """Whether restartPolicy asks for another run after the last termination."""
        if self.termination is None:
            return self.proc is None
        if restart_policy == "Always":
            return True
        return restart_policy == "OnFailure" and self.termination.exit_code != 0

    def start_due(self, restart_policy: str, now: float) -> bool:
        """Whether a (re)start should happen now (policy allows it and the backoff has passed)."""
        return self.proc is None and self.restart_wanted(restart_policy) and now >= self.next_start

    def signal(self, sig: signal.Signals, reason: str = "") -> None:
        """Signal the run's process group (no-op when not running)."""
        if self.proc is not None:
            if reason:
                self.killed_reason = reason
            launch.signal_container(self.proc.pid, sig)

    # --- probes ----------------------------------------------------------------------------------
    def run_probes(self, pod_ip: str, now: float, exec_prefix: Callable[[int], list[str]]) -> list[str]:
        """Run due probes; kill the run on liveness failure. Returns event messages of failures."""
        if self.proc is None:
            return []
        pid = self.proc.pid
        failures: list[str] = []
        startup = self.probes.get("startup")
        for kind, tracker in self.probes.items():
            if kind != "startup" and startup is not None and not startup.passing:
                continue
            if kind == "startup" and tracker.passing:
                continue
            if not tracker.due(now):
                continue
            prefix = exec_prefix(pid) if "exec" in tracker.spec else []
            ok, message = probes.check(tracker.spec, self.spec, pod_ip, self.probe_env, prefix, tracker.timeout)
            tracker.record(ok, time.monotonic(), message)
            if not ok:
                failures.append(f"{kind.capitalize()} probe failed: {message}".strip())
            if (
                kind in ("liveness", "startup")
                and not tracker.passing
                and tracker.failures >= int(tracker.spec.get("failureThreshold", 3))
            ):
                log.info("Killed container %s: %s probe failed", self.name, kind)
                self.signal(signal.SIGKILL, f"Container {self.name} failed {kind} probe, will be restarted")
        return failures

    @property
    def ready(self) -> bool:
        if self.proc is None:
            return False
        startup = self.probes.get("startup")
        if startup is not None and not startup.passing:
            return False
        readiness = self.probes.get("readiness")
        return readiness.passing if readiness is not None else True

    # --- status ----------------------------------------------------------------------------------
    def snapshot(self, restart_policy: str, now: float) -> ContainerSnapshot:
        """The container's status entry at ``now``."""
        image = str(self.spec.get("image", ""))
        started = self.proc is not None and ("startup" not in self.probes or self.probes["startup"].passing)
        common: dict[str, Any] = {
            "name": self.name,
            "image": image,
            "restart_count": self.restart_count,
            "last_termination": self.last_termination,
            "started": started,
        }
        if self.proc is not None:
            return ContainerSnapshot(
                state="running",
                started_at=self.started_at,
                ready=self.ready,
                container_id=f"nodeagent://{self.proc.pid}",
                **common,
            )
        if self.termination is not None and self.restart_wanted(restart_policy):
            # Between runs: the kubelet shows Waiting/CrashLoopBackOff with the run that ended as lastState.
            return ContainerSnapshot(
                state="waiting",
                reason="CrashLoopBackOff",
                message=f"back-off {self.backoff:.0f}s restarting failed container={self.name}",
                **{**common, "last_termination": self.termination},
            )
        if self.termination is not None:
            return ContainerSnapshot(state="terminated", termination=self.termination, **common)
        return ContainerSnapshot(state="waiting", reason=self.waiting_reason, message=self.waiting_message, **common)
