"""The replay's Kubernetes children: the ConfigMap with the plan, the ServiceAccount (no API rights, no token) and
the Job (the app's SASL credentials from their Secrets as ``STREAMAPP_KAFKA_SASL_*`` variables, its TLS CA
mounted; for ``spark.mode: kubernetes`` the executors' pod template and defaults from ``spark_executors``), and which
of those names someone else made (:func:`foreign_children`). Pure: manifests as plain dicts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from streamapp_operator import identity
from streamapp_operator.connection import SecretKeyRef, credentials_env
from streamapp_operator.identity import FOREIGN_OBJECT
from streamapp_operator.kinds import CONTAINER_SECURITY, Owner
from streamapp_operator.outcomes import Problem
from streamapp_operator.streamapps.resources import StreamAppSpec
from streamapp_operator.streamreplays import app_code
from streamapp_operator.streamreplays.resources import (
    KIND,
    SparkMode,
    StreamReplaySpec,
)
from streamapp_operator.streamreplays.spark_executors import (
    EXECUTOR_TEMPLATE_FILE,
    PLAN_DIR,
    POD_SECURITY,
    TMP_DIR,
    ca_mounts,
    ca_volumes,
    executor_template,
    spark_defaults,
)

PLAN_FILE = "plan.yaml"
WORK_DIR = "/var/lib/streamapp"
SERVICE_ACCOUNT = "streamapp-replay"
SPARK_DEFAULTS_FILE = "spark-defaults.conf"
#: Memory the container needs beyond the JVM heap (Spark's own minimum overhead; Python workers).
MEMORY_OVERHEAD_MB = 512
MANAGED_BY = "app.kubernetes.io/managed-by"


#: Labels of what several replays share (the ServiceAccount): how the operator knows it made it.
_SHARED_LABELS = {"app.kubernetes.io/name": "streamapp-replay", MANAGED_BY: "streamapp-operator"}


def job_name(replay_name: str) -> str:
    return f"{replay_name}-replay"


def foreign_children(
    owner: Owner, children: Mapping[str, Mapping[str, Any] | None], account: Mapping[str, Any] | None
) -> list[Problem]:
    """The replay's children that someone else made (``kind -> object``: the Job and its ConfigMap, which the
    StreamReplay owns), and the shared ServiceAccount ``streamapp-replay`` when the operator did not create it
    (``account``; None: absent or not used, ``spark.mode: kubernetes`` runs as the user's): each is named,
    never applied over or used (the replay's pod would run as someone else's account, its Job's success
    would start a handover)."""
    problems = identity.foreign_children(owner.uid, children, KIND)
    labels = (account or {}).get("metadata", {}).get("labels") or {}
    if account is not None and labels.get(MANAGED_BY) != _SHARED_LABELS[MANAGED_BY]:
        problems.append(
            Problem(
                FOREIGN_OBJECT,
                f"ServiceAccount {SERVICE_ACCOUNT} exists and was not created by the StreamApp operator (no label "
                f"{MANAGED_BY}={_SHARED_LABELS[MANAGED_BY]}); the replay's pod would run as it: it is left "
                "untouched: delete it, or run the replay with spark.mode kubernetes and a serviceAccountName",
            )
        )
    return problems


def _labels(owner: Owner) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "streamapp-replay",
        "app.kubernetes.io/instance": owner.name,
        "app.kubernetes.io/managed-by": "streamapp-operator",
    }


def _memory_mb(spark_memory: str) -> int:
    number, unit = int(spark_memory[:-1]), spark_memory[-1]
    return number * 1024 if unit == "g" else number


@dataclass(frozen=True)
class JobImages:
    """The images of a replay's Job: the replay image (``image``) and the one whose user code it runs (``code``;
    None: the replay image's own code only)."""

    image: str
    code: app_code.CodeImage | None = None


def job_manifests(
    owner: Owner, spec: StreamReplaySpec, plan: Mapping[str, Any], images: JobImages, app: StreamAppSpec | None = None
) -> list[dict[str, Any]]:
    """The ServiceAccount, the ConfigMap with the plan and the Job, as uid 10001 under the restricted Pod
    Security Standard.

    ``spark.mode: local``: one pod running ``streamapp replay run`` with Spark's local master, without a service
    account token (the replay needs Kafka, not the Kubernetes API). ``spark.mode: kubernetes``: that pod is the
    Spark driver (client mode, ``--master k8s://``) and starts ``executor.instances`` executor pods of the same
    image through Spark's Kubernetes backend, as ``spark.serviceAccountName`` (the user's, e.g. the chart's
    ``replayDriver``: it may create, watch and delete pods and configmaps; the operator grants nothing); the
    executors are owned by the driver pod (gone with it) and run the executor entrypoint of the pod template
    (``executor.yaml`` in the ConfigMap); Spark's settings are ``spark-defaults.conf`` there.

    ``app``: the StreamApp's spec, whose Kafka security the Job's pod gets as the app's pods do: the SASL
    credentials as ``STREAMAPP_KAFKA_SASL_USERNAME``/``_PASSWORD`` from their Secrets (the kubelet reads them:
    never in the ConfigMap, the pod spec or status), the TLS CA Secret mounted where the plan's
    ``ssl.ca.location`` points (in the executor pods too: they read Kafka).

    ``code``: the image whose user code the replay runs (``app_code.of``): every pod (the Job's, the executors')
    copies it with the init container ``app-code`` and puts it first on ``PYTHONPATH``; the Job's container checks
    its ``streamapp-runtime`` first (``app_code``). None: the replay image's own code only (the old way)."""
    job = _Job(owner, spec, images, app)
    config_map = _config_map(job, plan)
    return [config_map, _job(job)] if job.kubernetes else [_service_account(owner), config_map, _job(job)]


@dataclass(frozen=True)
class _Job:
    """What the replay's Job is made of: its owner, the replay's spec, the images and the app's spec (its Kafka
    security; None: none)."""

    owner: Owner
    spec: StreamReplaySpec
    images: JobImages
    app: StreamAppSpec | None

    @property
    def kubernetes(self) -> bool:
        return self.spec.spark.mode == SparkMode.KUBERNETES

    @property
    def ca(self) -> SecretKeyRef | None:
        app = self.app
        return app.kafka.tls.ca_secret if app is not None and app.kafka.tls is not None else None

    @property
    def metadata(self) -> dict[str, Any]:
        owner = self.owner
        return {"namespace": owner.namespace, "labels": _labels(owner), "ownerReferences": [owner.reference()]}


def _service_account(owner: Owner) -> dict[str, Any]:
    """The ServiceAccount the local-mode replays share: no API rights, no token."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": SERVICE_ACCOUNT, "namespace": owner.namespace, "labels": dict(_SHARED_LABELS)},
        "automountServiceAccountToken": False,
    }


def _config_map(job: _Job, plan: Mapping[str, Any]) -> dict[str, Any]:
    """The plan, the app-code check script, and (kubernetes mode) Spark's defaults and the executors' template."""
    owner, code = job.owner, job.images.code
    data = {PLAN_FILE: yaml.safe_dump(json.loads(json.dumps(plan)), sort_keys=False)}
    if code is not None:
        data[app_code.SCRIPT_FILE] = app_code.script_text()
    if job.kubernetes:
        data[SPARK_DEFAULTS_FILE] = spark_defaults(owner, job.spec, job.images.image)
        template = executor_template(job.ca, code, job_name(owner.name))
        data[EXECUTOR_TEMPLATE_FILE] = yaml.safe_dump(template, sort_keys=False)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": job_name(owner.name), **job.metadata},
        "data": data,
    }


def _command_and_env(job: _Job) -> tuple[list[str], list[dict[str, Any]]]:
    """The replay container's command and environment: the Spark driver in client mode (kubernetes) or a local
    master; the app-code check first when the code comes from another image."""
    code, driver = job.images.code, job.spec.spark.driver
    run = ["streamapp", "replay", "run", "--plan", f"{PLAN_DIR}/{PLAN_FILE}"]
    if job.kubernetes:
        # the driver's address and pod name are known in the pod only
        command = [
            "/bin/sh",
            "-c",
            ("" if code is None else f"{app_code.check_command(PLAN_DIR, PLAN_FILE)} || exit $?; ")
            + 'export PYSPARK_SUBMIT_ARGS="--conf spark.driver.host=$POD_IP --conf spark.driver.bindAddress=$POD_IP '
            '--conf spark.kubernetes.driver.pod.name=$POD_NAME --driver-memory $DRIVER_MEMORY pyspark-shell"; '
            f'exec {" ".join(run)} --master "k8s://https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT" '
            "--driver-memory $DRIVER_MEMORY",
        ]
        # no SPARK_LOCAL_DIRS: Spark would mount the driver's local dirs into the executors (over their /tmp)
        env: list[dict[str, Any]] = [
            {"name": "HOME", "value": WORK_DIR},
            {"name": "SPARK_CONF_DIR", "value": PLAN_DIR},
            {"name": "DRIVER_MEMORY", "value": driver.memory},
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "SPARK_LOCAL_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "SPARK_LOCAL_HOSTNAME", "value": "localhost"},
        ]
    else:
        command = [*run, "--master", f"local[{driver.cores}]", "--driver-memory", driver.memory]
        if code is not None:  # the check first; "$@" keeps the arguments as they are
            command = [
                "/bin/sh",
                "-c",
                f'{app_code.check_command(PLAN_DIR, PLAN_FILE)} && exec "$@"',
                "replay",
                *command,
            ]
        env = [
            {"name": "HOME", "value": WORK_DIR},
            {"name": "SPARK_LOCAL_DIRS", "value": TMP_DIR},
            # local master: driver and executors talk over the loopback (the pod's host name need not resolve)
            {"name": "SPARK_LOCAL_IP", "value": "127.0.0.1"},
            {"name": "SPARK_LOCAL_HOSTNAME", "value": "localhost"},
        ]
    env += credentials_env(job.app.kafka) if job.app is not None else []
    env += [app_code.python_path_env()] if code is not None else []
    return command, env


def _job(job: _Job) -> dict[str, Any]:
    """The Job: one pod (the replay container, the app-code init container), uid 10001, restricted."""
    owner, spec, code, driver = job.owner, job.spec, job.images.code, job.spec.spark.driver
    memory = f"{_memory_mb(driver.memory) + MEMORY_OVERHEAD_MB}Mi"
    command, env = _command_and_env(job)
    security_context = dict(CONTAINER_SECURITY)  # uid 10001 too: the same as the app's pods
    container = {
        "name": "replay",
        "image": job.images.image,
        "imagePullPolicy": "IfNotPresent",
        "command": command,
        "env": env,
        "resources": {"requests": {"cpu": str(driver.cores), "memory": memory}, "limits": {"memory": memory}},
        "volumeMounts": [
            {"name": "plan", "mountPath": PLAN_DIR, "readOnly": True},
            {"name": "tmp", "mountPath": TMP_DIR},
            {"name": "work", "mountPath": WORK_DIR},
            *ca_mounts(job.ca),
            *([app_code.code_mount()] if code is not None else []),
        ],
        "securityContext": security_context,
    }
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "serviceAccountName": spec.spark.service_account_name or "default" if job.kubernetes else SERVICE_ACCOUNT,
        "automountServiceAccountToken": job.kubernetes,
        "enableServiceLinks": False,
        "securityContext": dict(POD_SECURITY),
        "containers": [container],
        "volumes": [
            {"name": "plan", "configMap": {"name": job_name(owner.name)}},
            {"name": "tmp", "emptyDir": {}},
            {"name": "work", "emptyDir": {}},
            *ca_volumes(job.ca),
        ],
    }
    job_spec: dict[str, Any] = {"backoffLimit": spec.spark.retries}
    if code is not None:
        init = app_code.init_container(code.image, code.pull_policy, PLAN_DIR, security_context)
        pod_spec["initContainers"] = [init]
        pod_spec["volumes"].append(app_code.code_volume())
        job_spec["podFailurePolicy"] = app_code.pod_failure_policy()
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": job_name(owner.name), **job.metadata},
        "spec": {**job_spec, "template": {"metadata": {"labels": _labels(owner)}, "spec": pod_spec}},
    }
