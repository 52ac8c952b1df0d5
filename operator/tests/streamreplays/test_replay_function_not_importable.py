"""A function that cannot be imported is found before the Spark job (issue 19, audit R9c: two Job attempts, 91 s,
each with Spark's 4 task attempts, before ``module 'flights_app.logic' has no attribute 'nope'``): the Job's
first step imports every function of the plan's topology with the app's code first on the path, exits 65, and
the Job's pod failure policy fails it at once; the replay says ``FunctionNotImportable`` naming the function,
from the pod's log or, when the API cannot serve it, from the container's termination message."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from replay_fakes import SECOND_TOPOLOGY, add_job_pod, fail_job_by_policy, reconcile_step, replay_world
from streamapp_operator.streamreplays import app_code, app_code_script, job_reports

BACKFILL = {"appRef": {"name": "flights"}, "topology": SECOND_TOPOLOGY}


def _plan(tmp_path: Path, mapper: str) -> Path:
    topology = copy.deepcopy(SECOND_TOPOLOGY)
    topology["nodes"][1]["mapper"] = mapper
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({"topology": topology}))
    return plan


def _copied(tmp_path: Path) -> Path:
    """The app-code folder as the init container leaves it, with this interpreter's runtime (no mismatch)."""
    script = tmp_path / app_code.SCRIPT_FILE
    script.write_text(app_code.script_text())
    dest = tmp_path / "app"
    copied = subprocess.run([sys.executable, str(script), "copy", str(dest)], capture_output=True, text=True)
    assert copied.returncode == 0, copied.stderr
    return dest


def test_the_check_refuses_a_function_that_does_not_import_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dest, log = _copied(tmp_path), tmp_path / "termination-log"
    log.touch()  # the kubelet's mount at terminationMessagePath
    missing = _plan(tmp_path, "flights_app.logic:nope")
    assert app_code_script.check(dest, plan=missing, termination_log=log) == app_code.NOT_IMPORTABLE_EXIT == 65
    said = capsys.readouterr().err.splitlines()[-1]
    assert said.startswith("Error: FunctionNotImportable: ") and "flights_app.logic:nope" in said
    assert "node 'key': mapper" in said and log.read_text() == said.removeprefix("Error: ")
    assert app_code_script.check(dest, plan=_plan(tmp_path, "flights_app.logic:carrier"), termination_log=log) == 0


def test_the_pod_runs_the_check_from_the_scripts_text_with_the_plan(tmp_path: Path) -> None:
    dest = _copied(tmp_path)
    script = tmp_path / app_code.SCRIPT_FILE
    plan = _plan(tmp_path, "no_such_module:f")
    checked = subprocess.run(
        [sys.executable, str(script), "check", str(dest), str(plan)], capture_output=True, text=True
    )
    assert checked.returncode == 65 and "no_such_module" in checked.stderr
    # outside a pod there is no /dev/termination-log to write: none is made


@pytest.mark.parametrize(
    ("job_reason", "job_message", "log", "reason"),
    [
        (
            "PodFailurePolicy",
            "Container replay for pod ns/p failed with exit code 65 matching FailJob rule",
            "",
            "FunctionNotImportable",
        ),
        ("BackoffLimitExceeded", "...", "Error: FunctionNotImportable: user functions ...", "FunctionNotImportable"),
        (
            "PodFailurePolicy",
            "Container replay for pod ns/p failed with exit code 78 matching FailJob rule",
            "",
            "RuntimeVersionMismatch",
        ),
    ],
)
def test_the_exit_code_or_the_line_is_the_replays_reason(
    job_reason: str, job_message: str, log: str, reason: str
) -> None:
    assert app_code.failure_reason(job_reason, job_message, log) == reason


def test_the_job_fails_at_once_on_either_exit_code_of_the_check() -> None:
    rule = app_code.pod_failure_policy()["rules"][0]
    assert rule["action"] == "FailJob" and rule["onExitCodes"]["values"] == [65, 78]


def _terminated(message: str) -> dict[str, Any]:
    return {"name": "replay", "state": {"terminated": {"exitCode": 65, "message": message}}}


def test_the_termination_message_is_the_replay_containers_of_the_last_pod() -> None:
    pods = [
        {"status": {"containerStatuses": [_terminated("first")]}},
        {"status": {"containerStatuses": [{"name": "other", "state": {"terminated": {"message": "no"}}}]}},
        {"status": {"containerStatuses": [{"name": "replay", "lastState": {"terminated": {"message": "last"}}}]}},
    ]
    assert job_reports.termination_message(pods) == "last"
    assert job_reports.termination_message([{"status": {}}]) == ""


def test_without_a_pod_log_the_replay_names_the_function_from_the_termination_message() -> None:
    world, cluster, _ = replay_world()
    status = reconcile_step(world, BACKFILL, {})
    message = "FunctionNotImportable: user functions cannot be imported: node 'key': mapper: flights_app.logic:nope"
    fail_job_by_policy(cluster, 65)
    add_job_pod(cluster, status={"phase": "Failed", "containerStatuses": [_terminated(message)]})
    status = reconcile_step(world, BACKFILL, status)
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert status["phase"] == "Failed" and failed["reason"] == "FunctionNotImportable"
    assert "flights_app.logic:nope" in failed["message"]
