"""A container restarts per restartPolicy with a growing, capped backoff, and reports it."""

from __future__ import annotations

import time
from pathlib import Path

from e2e.nodeagent import containers
from e2e.nodeagent.containers import ContainerRunner, Prepared

SH = {"PATH": "/usr/bin:/bin"}


def wait_exit(runner: ContainerRunner) -> float:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        now = time.monotonic()
        if runner.poll(now):
            return now
        time.sleep(0.02)
    raise AssertionError("container did not exit")


def test_failed_container_backs_off_and_restarts_with_last_state(tmp_path: Path) -> None:
    runner = ContainerRunner({"name": "app", "image": "img"}, tmp_path / "app.log", tmp_path / "app.pid")
    failing = Prepared(["sh", "-c", "echo boom; exit 3"], SH, SH)
    assert runner.start_due("Always", time.monotonic())
    runner.start(failing, time.monotonic())
    exited_at = wait_exit(runner)
    assert runner.termination is not None and runner.termination.exit_code == 3
    assert runner.backoff == containers.BACKOFF_INITIAL
    assert not runner.start_due("Always", exited_at)  # still backing off
    snap = runner.snapshot("Always", exited_at)
    assert snap.state == "waiting" and snap.reason == "CrashLoopBackOff" and snap.last_termination is not None
    runner.start(failing, runner.next_start)
    wait_exit(runner)
    assert runner.restart_count == 1 and runner.backoff == 2 * containers.BACKOFF_INITIAL
    assert (tmp_path / "app.log").read_text() == "boom\nboom\n"


def test_backoff_is_capped_and_reset_after_a_long_run(tmp_path: Path) -> None:
    runner = ContainerRunner({"name": "app"}, tmp_path / "app.log", tmp_path / "app.pid")
    runner.backoff = containers.BACKOFF_MAX
    runner.start(Prepared(["sh", "-c", "exit 1"], SH, SH), time.monotonic())
    wait_exit(runner)
    assert runner.backoff == containers.BACKOFF_MAX
    runner.start(Prepared(["sh", "-c", "exit 1"], SH, SH), time.monotonic())
    runner.started_mono -= containers.BACKOFF_RESET  # as if it had run that long
    wait_exit(runner)
    assert runner.backoff == 0.0


def test_restart_policy_decides_after_exit(tmp_path: Path) -> None:
    for policy, code, wanted in [
        ("Never", 1, False),
        ("OnFailure", 0, False),
        ("OnFailure", 1, True),
        ("Always", 0, True),
    ]:
        runner = ContainerRunner({"name": "c"}, tmp_path / "c.log", tmp_path / "c.pid")
        runner.start(Prepared(["sh", "-c", f"exit {code}"], SH, SH), time.monotonic())
        wait_exit(runner)
        assert runner.restart_wanted(policy) is wanted, (policy, code)
        if not wanted:
            assert runner.snapshot(policy, time.monotonic()).state == "terminated"


def test_liveness_failure_kills_the_run(tmp_path: Path) -> None:
    spec = {"name": "c", "livenessProbe": {"exec": {"command": ["false"]}, "periodSeconds": 1, "failureThreshold": 1}}
    runner = ContainerRunner(spec, tmp_path / "c.log", tmp_path / "c.pid")
    runner.start(Prepared(["sleep", "30"], SH, SH), time.monotonic())
    failures = runner.run_probes("", time.monotonic(), lambda pid: [])
    assert failures and failures[0].startswith("Liveness probe failed")
    wait_exit(runner)
    assert runner.termination is not None and runner.termination.exit_code == 137
    assert "failed liveness probe" in runner.termination.message
