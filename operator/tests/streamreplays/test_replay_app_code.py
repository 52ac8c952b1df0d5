"""The replay runs the app image's own code: what the init container copies, the version check before the replay,
the Job's pods (init container, PYTHONPATH, failure policy), which image's code runs, and the failure reason.

The in-pod script (``streamapp_operator.streamreplays.app_code_script``) runs here on a site-packages folder the test
lays out (distributions with METADATA and RECORD, as pip installs them), with this interpreter, as a subprocess
where the pod runs it so.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from operator_fakes import flights_spec
from replay_fakes import NS
from streamapp_operator.kinds import Owner
from streamapp_operator.streamapps.resources import StreamAppSpec
from streamapp_operator.streamreplays import app_code, app_code_script, job_manifests
from streamapp_operator.streamreplays.resources import StreamReplaySpec

SCRIPT = Path(app_code_script.__file__)


def _dist(site: Path, name: str, version: str, files: list[str], requires: tuple[str, ...] | list[str] = ()) -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    lines = [f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}"] + [f"Requires-Dist: {r}" for r in requires]
    (info / "METADATA").write_text("\n".join(lines) + "\n")
    for file in files:
        path = site / file
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("VALUE = 1\n" if file.endswith(".py") else "")
    record = [*files, f"{info.name}/METADATA", f"{info.name}/RECORD"]
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in record))


@pytest.fixture
def app_site(tmp_path: Path) -> Path:
    """An app image's site-packages: the platform (the runtime with its replay extra's pyspark[sql] and pandas,
    pip), the user's wheel with a dependency of its own, a package copied in without a wheel, a test tool whose
    extra requires something the user also uses."""
    site = tmp_path / "site-packages"
    _dist(
        site,
        "streamapp-runtime",
        "9.1.0",
        ["streamapp/__init__.py"],
        ["confluent-kafka>=2.6", 'pyspark[sql]==4.2.0; extra == "replay"'],
    )
    _dist(site, "confluent-kafka", "2.6.0", ["confluent_kafka/__init__.py"])
    _dist(site, "pyspark", "4.2.0", ["pyspark/__init__.py"], ['pandas>=2; extra == "sql"', 'numpy; extra == "ml"'])
    _dist(site, "pandas", "2.2.0", ["pandas/__init__.py"])
    _dist(site, "numpy", "2.0.0", ["numpy/__init__.py"])  # only pyspark's ml extra, which nothing asks for
    _dist(site, "pip", "24.0", ["pip/__init__.py"], ['pytest; extra == "test"'])
    _dist(site, "pytest", "8.0", ["pytest/__init__.py", "_pytest/__init__.py"])
    _dist(site, "clickstream", "1.0", ["clickstream/__init__.py", "clickstream/logic.py"], ["requests", "numpy"])
    _dist(site, "requests", "2.32", ["requests/__init__.py"])
    (site / "rawpkg").mkdir()
    (site / "rawpkg" / "__init__.py").write_text("RAW = True\n")
    (site / "__pycache__").mkdir()
    return site


def test_the_init_container_copies_the_users_code_and_never_the_platform(app_site: Path, tmp_path: Path) -> None:
    manifest = app_code_script.copy(tmp_path / "dest", app_site)
    copied = sorted(p.name for p in (tmp_path / "dest" / "site-packages").iterdir())
    assert copied == [
        "_pytest",  # pip's test extra is no platform requirement
        "clickstream",
        "clickstream-1.0.dist-info",
        "numpy",  # the user's dependency (pyspark's ml extra is no platform requirement)
        "numpy-2.0.0.dist-info",
        "pytest",
        "pytest-8.0.dist-info",
        "rawpkg",  # copied into site-packages without a wheel
        "requests",
        "requests-2.32.dist-info",
    ]
    assert (tmp_path / "dest" / "site-packages" / "clickstream" / "logic.py").read_text() == "VALUE = 1\n"
    assert manifest["streamappRuntime"] == "9.1.0" and manifest["python"] == app_code_script.python_version()
    assert json.loads((tmp_path / "dest" / app_code_script.MANIFEST).read_text()) == manifest


def test_an_image_that_declares_its_code_folder_has_that_folder_copied_whole(app_site: Path, tmp_path: Path) -> None:
    declared = tmp_path / "code"
    (declared / "mine").mkdir(parents=True)
    (declared / "mine" / "__init__.py").write_text("")
    manifest = app_code_script.copy(tmp_path / "dest", app_site, declared=str(declared))
    assert manifest["copied"] == ["mine"] and manifest["source"] == str(declared)
    assert sorted(p.name for p in (tmp_path / "dest" / "site-packages").iterdir()) == ["mine"]


def test_the_check_passes_the_same_runtime_and_refuses_another_naming_both_versions(
    app_site: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    app_code_script.copy(tmp_path / "dest", app_site)
    log = tmp_path / "termination-log"
    log.touch()  # the kubelet's mount
    assert app_code_script.check(tmp_path / "dest", runtime="9.1.0", termination_log=log) == 0
    assert (
        app_code_script.check(tmp_path / "dest", runtime="9.2.0", termination_log=log) == app_code.MISMATCH_EXIT == 78
    )
    assert log.read_text().startswith("RuntimeVersionMismatch: the app image has streamapp-runtime 9.1.0")
    said = capsys.readouterr().err.splitlines()[-1]
    assert said.startswith("Error: RuntimeVersionMismatch: the app image has streamapp-runtime 9.1.0")
    assert "the replay image streamapp-runtime 9.2.0" in said
    assert app_code_script.check(tmp_path / "nothing", runtime="9.1.0") == 1  # the init container did not run


def test_the_script_runs_as_the_pod_runs_it_from_its_text_alone(tmp_path: Path) -> None:
    """The ConfigMap holds the script's text; the pods run it with their image's Python, outside the operator's
    package: copy then check, in this interpreter (whose streamapp-runtime is the same on both sides)."""
    script = tmp_path / app_code.SCRIPT_FILE
    script.write_text(app_code.script_text())
    dest = tmp_path / "app"
    copied = subprocess.run([sys.executable, str(script), "copy", str(dest)], capture_output=True, text=True)
    assert copied.returncode == 0, copied.stderr
    assert (
        "app code: copied" in copied.stderr
        and "streamapp" not in json.loads((dest / app_code_script.MANIFEST).read_text())["copied"]
    )
    checked = subprocess.run([sys.executable, str(script), "check", str(dest)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    usage = subprocess.run([sys.executable, str(script), "rewind"], capture_output=True, text=True)
    assert usage.returncode == 2


def _app(**spec: object) -> StreamAppSpec:
    return StreamAppSpec.parse({**flights_spec(), "image": "apps/flights:1", "imagePullPolicy": "Never", **spec})


@pytest.mark.parametrize(
    ("replay", "image", "pull"),
    [
        ({}, "apps/flights:1", "Never"),  # the app's own image, pulled as the app's pods pull it
        ({"image": "apps/flights:2"}, "apps/flights:2", "IfNotPresent"),
        ({"mode": "handover", "handover": {"image": "apps/flights:3"}}, "apps/flights:3", "IfNotPresent"),
        ({"mode": "backfill", "handover": {"image": "apps/flights:3"}}, "apps/flights:1", "Never"),
    ],
)
def test_the_replay_runs_the_code_of_the_new_versions_image_else_its_own_else_the_apps(
    replay: dict[str, object], image: str, pull: str
) -> None:
    topology = {"topology": flights_spec()["topology"]} if replay.get("mode") == "handover" else {}
    spec = StreamReplaySpec.parse({"appRef": {"name": "flights"}, **topology, **replay})
    assert app_code.of(spec, _app()) == app_code.CodeImage(image, pull)


def _job(spark: dict[str, object] | None = None) -> tuple[dict[str, object], dict[str, object]]:
    spec = StreamReplaySpec.parse({"appRef": {"name": "flights"}, **({"spark": spark} if spark else {})})
    owner = Owner("StreamReplay", "r", NS, "uid-1")
    code = app_code.CodeImage("apps/flights:1", "Never")
    manifests = job_manifests.job_manifests(
        owner, spec, {"replayId": "r-1"}, job_manifests.JobImages("streamapp-replay:1", code)
    )
    return manifests[-2], manifests[-1]


def test_the_jobs_pod_copies_the_apps_code_first_and_checks_it_before_the_replay_runs() -> None:
    config_map, job = _job()
    assert config_map["data"][app_code.SCRIPT_FILE] == app_code.script_text()  # type: ignore[index]
    pod = job["spec"]["template"]["spec"]  # type: ignore[index]
    (init,) = pod["initContainers"]
    assert (init["image"], init["imagePullPolicy"]) == ("apps/flights:1", "Never")
    assert init["command"] == ["python", "/etc/streamapp-replay/app_code.py", "copy", "/opt/streamapp/app"]
    assert init["securityContext"]["readOnlyRootFilesystem"] and init["resources"]["limits"]["memory"] == "256Mi"
    container = pod["containers"][0]
    assert container["image"] == "streamapp-replay:1"
    assert {"name": "PYTHONPATH", "value": "/opt/streamapp/app/site-packages"} in container["env"]
    assert {"name": "app-code", "mountPath": "/opt/streamapp/app", "readOnly": True} in container["volumeMounts"]
    shell, flag, script, _, *run = container["command"]
    assert (shell, flag) == ("/bin/sh", "-c")
    assert script == (
        'python /etc/streamapp-replay/app_code.py check /opt/streamapp/app /etc/streamapp-replay/plan.yaml && exec "$@"'
    )
    assert run[:3] == ["streamapp", "replay", "run"]
    assert {"name": "app-code", "emptyDir": {}} in pod["volumes"]
    rule = job["spec"]["podFailurePolicy"]["rules"][0]  # type: ignore[index]
    assert rule["action"] == "FailJob" and rule["onExitCodes"]["values"] == [65, 78]


def test_a_kubernetes_mode_replay_checks_in_the_driver_and_copies_the_code_into_every_executor() -> None:
    config_map, job = _job({"mode": "kubernetes", "serviceAccountName": "spark"})
    script = job["spec"]["template"]["spec"]["containers"][0]["command"][2]  # type: ignore[index]
    check = "python /etc/streamapp-replay/app_code.py check /opt/streamapp/app /etc/streamapp-replay/plan.yaml"
    assert script.startswith(f"{check} || exit $?; ")
    executor = yaml.safe_load(config_map["data"][job_manifests.EXECUTOR_TEMPLATE_FILE])["spec"]  # type: ignore[index]
    assert executor["initContainers"][0]["image"] == "apps/flights:1"
    assert {"name": "plan", "configMap": {"name": "r-replay"}} in executor["volumes"]
    assert {"name": "PYTHONPATH", "value": "/opt/streamapp/app/site-packages"} in executor["containers"][0]["env"]


def test_without_a_code_image_the_job_is_the_replay_images_alone() -> None:
    spec = StreamReplaySpec.parse({"appRef": {"name": "flights"}})
    *_, config_map, job = job_manifests.job_manifests(
        Owner("StreamReplay", "r", NS, "u"), spec, {}, job_manifests.JobImages("img:1")
    )
    assert app_code.SCRIPT_FILE not in config_map["data"] and "podFailurePolicy" not in job["spec"]
    assert "initContainers" not in job["spec"]["template"]["spec"]


@pytest.mark.parametrize(
    ("job_reason", "job_message", "log", "reason"),
    [
        (
            "BackoffLimitExceeded",
            "Job has reached the specified backoff limit",
            "Error: RuntimeVersionMismatch: x",
            "RuntimeVersionMismatch",
        ),
        (
            "PodFailurePolicy",
            "Container replay for pod ns/p failed with exit code 78 matching FailJob rule at index 0",
            "",
            "RuntimeVersionMismatch",
        ),
        (
            "PodFailurePolicy",
            "Container replay for pod ns/p failed with exit code 1 matching ...",
            "",
            "PodFailurePolicy",
        ),
        ("BackoffLimitExceeded", "Job has reached the specified backoff limit", "Error: boom", "BackoffLimitExceeded"),
    ],
)
def test_a_version_mismatch_is_the_replays_reason_from_the_log_or_else_the_exit_code(
    job_reason: str, job_message: str, log: str, reason: str
) -> None:
    assert app_code.failure_reason(job_reason, job_message, log) == reason
