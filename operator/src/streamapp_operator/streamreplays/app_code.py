"""The replay runs the app's own code: which image it comes from, and how the Job's pods get it (pure decisions).

The replay image (``STREAMAPP_REPLAY_IMAGE``, ``spec.spark.image``) is generic: the runtime, pyspark and Java. The
user's functions are in the app's image (``StreamApp.spec.image``, built ``FROM`` the project's image). Each pod of
the replay (the Job's, and in ``spark.mode: kubernetes`` each executor) starts with the init container ``app-code``,
the app's image running :mod:`streamapp_operator.streamreplays.app_code_script` (shipped in the replay's ConfigMap
as :data:`SCRIPT_FILE`), which copies the image's user code into the emptyDir ``app-code`` (:data:`CODE_DIR`). The
replay container puts :data:`CODE_SITE` first on ``PYTHONPATH`` (Spark's Python workers inherit it) and checks,
before ``streamapp replay run``, that the copied code was installed with the replay image's ``streamapp-runtime``
and Python; a mismatch exits :data:`MISMATCH_EXIT`, which the Job's pod failure policy turns into a failed Job at
once (Kubernetes' ``podFailurePolicy``, ``FailJob``), and the replay fails with reason :data:`MISMATCH`. Which code
wins where both images have it: the user's (the app image's copy is first on the path); the platform (``streamapp``
and everything it requires) is never copied, so it is always the replay image's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streamapp_operator.streamapps.resources import StreamAppSpec
from streamapp_operator.streamreplays import app_code_script
from streamapp_operator.streamreplays.resources import ReplayMode, StreamReplaySpec

#: The emptyDir's mount in every container of a replay pod.
CODE_DIR = "/opt/streamapp/app"
CODE_SITE = f"{CODE_DIR}/{app_code_script.SITE}"
VOLUME = "app-code"
INIT_CONTAINER = "app-code"
#: The script's file in the replay's ConfigMap (mounted at the plan's folder).
SCRIPT_FILE = "app_code.py"
MISMATCH = app_code_script.MISMATCH
MISMATCH_EXIT = app_code_script.MISMATCH_EXIT
NOT_IMPORTABLE = app_code_script.NOT_IMPORTABLE
NOT_IMPORTABLE_EXIT = app_code_script.NOT_IMPORTABLE_EXIT
#: The check's refusals, each failing the Job at once (its exit code) with the replay's reason.
REFUSALS = {MISMATCH_EXIT: MISMATCH, NOT_IMPORTABLE_EXIT: NOT_IMPORTABLE}
#: The init container's resources: a file copy (requests = limits, so a namespace's ResourceQuota admits it).
INIT_RESOURCES = {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "256Mi"}}


def script_text() -> str:
    """The in-pod script's source (:mod:`streamapp_operator.streamreplays.app_code_script`), for the ConfigMap."""
    return Path(app_code_script.__file__).read_text(encoding="utf-8")


@dataclass(frozen=True)
class CodeImage:
    """The image whose user code a replay runs, and the init container's ``imagePullPolicy``."""

    image: str
    pull_policy: str = "IfNotPresent"


def of(spec: StreamReplaySpec, app: StreamAppSpec) -> CodeImage:
    """:func:`code_image` and :func:`pull_policy` of a replay of ``app``."""
    return CodeImage(code_image(spec, app), pull_policy(spec, app))


def code_image(spec: StreamReplaySpec, app: StreamAppSpec) -> str:
    """The image whose user code the replay runs: a handover's ``handover.image`` (the new version's code), else
    the StreamReplay's ``spec.image``, else the app's ``spec.image``. The CRD refuses a handover whose
    ``spec.image`` and ``handover.image`` differ."""
    if spec.mode == ReplayMode.HANDOVER and spec.handover.image:
        return spec.handover.image
    return spec.image or app.image


def pull_policy(spec: StreamReplaySpec, app: StreamAppSpec) -> str:
    """The init container's ``imagePullPolicy``: the app's when it runs the app's own image (e2e's local images
    are ``Never``), else ``IfNotPresent``."""
    return app.image_pull_policy.value if code_image(spec, app) == app.image else "IfNotPresent"


def init_container(
    image: str, pull: str, plan_dir: str, security_context: Mapping[str, Any], plan_volume: str = "plan"
) -> dict[str, Any]:
    """The init container ``app-code``: the app's image copying its user code into the emptyDir."""
    return {
        "name": INIT_CONTAINER,
        "image": image,
        "imagePullPolicy": pull,
        "command": ["python", f"{plan_dir}/{SCRIPT_FILE}", "copy", CODE_DIR],
        "resources": INIT_RESOURCES,
        "volumeMounts": [
            {"name": plan_volume, "mountPath": plan_dir, "readOnly": True},
            {"name": VOLUME, "mountPath": CODE_DIR},
        ],
        "securityContext": dict(security_context),
    }


def code_mount() -> dict[str, Any]:
    """The emptyDir, read-only, in the replay (or executor) container."""
    return {"name": VOLUME, "mountPath": CODE_DIR, "readOnly": True}


def code_volume() -> dict[str, Any]:
    return {"name": VOLUME, "emptyDir": {}}


def python_path_env() -> dict[str, str]:
    """``PYTHONPATH``: the user's code first (Spark's Python workers inherit it: ``PythonWorkerFactory`` merges the
    environment's ``PYTHONPATH``)."""
    return {"name": "PYTHONPATH", "value": CODE_SITE}


def check_command(plan_dir: str, plan_file: str) -> str:
    """The shell step before ``streamapp replay run``: exits :data:`MISMATCH_EXIT` on a version mismatch and
    :data:`NOT_IMPORTABLE_EXIT` when a function of the plan's topology does not import."""
    return f"python {plan_dir}/{SCRIPT_FILE} check {CODE_DIR} {plan_dir}/{plan_file}"


def pod_failure_policy() -> dict[str, Any]:
    """A version mismatch or a function that does not import fails the Job at once (no retry can help; Spark's
    tasks would each try 4 times, and the Job ``backoffLimit`` times more): ``FailJob`` on the check's exit codes."""
    return {
        "rules": [
            {
                "action": "FailJob",
                "onExitCodes": {"containerName": "replay", "operator": "In", "values": sorted(REFUSALS)},
            }
        ]
    }


def failure_reason(job_reason: str, job_message: str, log_detail: str) -> str:
    """The replay's reason for a failed Job: :data:`MISMATCH` or :data:`NOT_IMPORTABLE` when the check refused the
    app's code (its line in the pod's log or termination message, or, when neither can be read, the Job's
    ``PodFailurePolicy`` on the check's exit code), else the Job's reason."""
    for code, reason in REFUSALS.items():
        if reason in log_detail or (job_reason == "PodFailurePolicy" and f"exit code {code}" in job_message):
            return reason
    return job_reason
