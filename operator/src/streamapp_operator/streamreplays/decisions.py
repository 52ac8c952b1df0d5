"""Pure decisions of the StreamReplay controller: plain data in, plain data out, no I/O.

- :func:`resolve_range`: explicit per-partition ``[from, to)`` offsets from the spec's positions and what
  Kafka answered (earliest, latest, offsets for a timestamp): the replay never asks Spark for "latest", and
  the end offsets are the new version's starting point;
- :func:`plan_document`: the replay plan ``streamapp replay run --plan`` reads (``streamapp.replay.ReplayPlan``);
- :func:`job_manifests`: the ConfigMap with the plan, the ServiceAccount (no API rights, no token) and the Job
  (the app's SASL credentials from their Secrets as ``STREAMAPP_KAFKA_SASL_*`` variables, its TLS CA mounted);
- :func:`foreign_children`: a Job, ConfigMap or ServiceAccount of the replay's names that someone else made;
- :func:`job_state`: the Job's phase as the replay's; :func:`latest_progress`: the last progress report in the
  Job pod's log;
- :func:`new_version`: the new version's StreamApp (handover); :func:`new_version_conflict`: a name it must
  not take (the app it replaces, a StreamApp this replay did not create);
- :data:`HANDOVER_STEPS` and :func:`next_step`: where a handover is, from its status.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import yaml
from streamapp.drop_reasons import status_counts
from streamapp.replay.progress import ReplayProgress, parse_progress

from streamapp_operator import identity
from streamapp_operator.connection import CA_DIR, CA_FILE, SecretKeyRef, credentials_env
from streamapp_operator.identity import FOREIGN_OBJECT
from streamapp_operator.kinds import API_VERSION, CONTAINER_SECURITY, REPLAY_UID_ANNOTATION, Owner
from streamapp_operator.outcomes import Problem
from streamapp_operator.streamapps.resources import StreamAppSpec
from streamapp_operator.streamreplays import app_code, dead_letters
from streamapp_operator.streamreplays.resources import (
    KIND,
    EmitMode,
    HandoverStep,
    PerPartition,
    Phase,
    ReplayFrom,
    ReplayTo,
    SparkMode,
    StepState,
    StreamReplaySpec,
)

Offsets = dict[str, dict[int, int]]
"""``{topic: {partition: offset}}``."""

PLAN_DIR = "/etc/streamapp-replay"
PLAN_FILE = "plan.yaml"
TMP_DIR = "/tmp"
WORK_DIR = "/var/lib/streamapp"
SERVICE_ACCOUNT = "streamapp-replay"
SPARK_DEFAULTS_FILE = "spark-defaults.conf"
EXECUTOR_TEMPLATE_FILE = "executor.yaml"
VENV = "/opt/streamapp/venv"
SPARK_HOME = f"{VENV}/lib/python3.11/site-packages/pyspark"
RUN_AS_USER = 10001
#: The replay pods' securityContext (the Job's and the executors'): the ``restricted`` Pod Security Standard.
POD_SECURITY = {
    "runAsNonRoot": True,
    "runAsUser": RUN_AS_USER,
    "runAsGroup": RUN_AS_USER,
    "fsGroup": RUN_AS_USER,
    "seccompProfile": {"type": "RuntimeDefault"},
}
#: Memory the container needs beyond the JVM heap (Spark's own minimum overhead; Python workers).
MEMORY_OVERHEAD_MB = 512
REPLAY_LABEL = "streamapp.io/replay"
MANAGED_BY = "app.kubernetes.io/managed-by"
#: Labels of what several replays share (the ServiceAccount): how the operator knows it made it.
_SHARED_LABELS = {"app.kubernetes.io/name": "streamapp-replay", MANAGED_BY: "streamapp-operator"}

#: The handover's steps, in order (each recorded Started, then Done, in ``status.handover``).
HANDOVER_STEPS = ("setGroupOffsets", "createNewVersion", "awaitCaughtUp", "removeOldVersion")


class RangeError(ValueError):
    """The spec's range does not fit the topics (a partition missing, an offset out of the retained range)."""


@dataclass(frozen=True)
class KafkaPositions:
    """What Kafka answered for the input topics: earliest and latest offsets of every partition, and the
    offsets of the first record at or after ``from``/``to`` timestamps (-1: none, i.e. the end)."""

    earliest: Offsets
    latest: Offsets
    from_time: Offsets | None = None
    to_time: Offsets | None = None


def timestamp_ms(instant: str) -> int:
    """Milliseconds since the epoch of an RFC 3339 instant."""
    return int(datetime.fromisoformat(instant.replace("Z", "+00:00")).timestamp() * 1000)


def resolve_range(start: ReplayFrom, end: ReplayTo, kafka: KafkaPositions) -> tuple[Offsets, Offsets]:
    """``(from, to)`` per topic and partition; raises RangeError naming the topic and partition."""
    first = _position(_Asked(start.earliest, start.offsets, kafka.from_time, kafka.earliest), kafka, "from")
    last = _position(_Asked(None if end.now is None else True, end.offsets, kafka.to_time, kafka.latest), kafka, "to")
    for topic, parts in first.items():
        for p, offset in parts.items():
            if offset > last[topic][p]:
                raise RangeError(f"topic '{topic}' partition {p}: from {offset} is after to {last[topic][p]}")
    return first, last


@dataclass(frozen=True)
class _Asked:
    """One end of the range as the spec asks it: the whole retained range (``whole``), explicit ``offsets``, the
    ``by_time`` offsets Kafka found for an instant, else ``default`` (earliest or latest)."""

    whole: bool | None
    offsets: PerPartition | None
    by_time: Offsets | None
    default: Offsets


def _position(asked: _Asked, kafka: KafkaPositions, which: str) -> Offsets:
    whole, offsets, by_time, default = asked.whole, asked.offsets, asked.by_time, asked.default
    if offsets is not None:
        given = {t: {int(p): int(o) for p, o in parts.items()} for t, parts in offsets.items()}
        resolved: Offsets = {}
        for topic, parts in kafka.latest.items():
            if set(given.get(topic, {})) != set(parts):
                raise RangeError(
                    f"{which}.offsets: topic '{topic}' needs an offset for each of partitions "
                    f"{sorted(parts)}, got {sorted(given.get(topic, {}))}"
                )
            for p, offset in given[topic].items():
                low, high = kafka.earliest[topic][p], parts[p]
                if not low <= offset <= high:
                    raise RangeError(
                        f"{which}.offsets: topic '{topic}' partition {p}: {offset} is outside the retained "
                        f"range [{low}, {high}]"
                    )
            resolved[topic] = dict(sorted(given[topic].items()))
        unknown = sorted(set(given) - set(kafka.latest))
        if unknown:
            raise RangeError(f"{which}.offsets: {', '.join(unknown)} is not an input topic of the app")
        return resolved
    if by_time is not None and not whole:
        return {
            topic: {p: kafka.latest[topic][p] if o < 0 else o for p, o in sorted(parts.items())}
            for topic, parts in by_time.items()
        }
    return {topic: dict(sorted(parts.items())) for topic, parts in default.items()}


def shared_outputs(replay_sinks: Sequence[str], app_topology: Mapping[str, Any]) -> list[str]:
    """Topics the replay's topology writes that the running app's topology writes too (its sink nodes')."""
    app_sinks = {str(node.get("topic")) for node in app_topology.get("nodes") or [] if node.get("type") == "sink"}
    return sorted(set(replay_sinks) & app_sinks)


def replay_id(name: str, uid: str) -> str:
    """Keys the replay's transactional writes and done markers: stable across reruns of the same object."""
    return f"{name}-{uid[:8]}"


def application_id(spec: StreamReplaySpec, replay_name: str, app_application_id: str) -> str:
    return spec.application_id or f"{app_application_id}-{replay_name}"


@dataclass(frozen=True)
class PlanInputs:
    """What a replay plan holds: the replay's id, its topology and runtime config, the app's bootstrap servers,
    the ``[start, end)`` offsets, the sink topics' partition counts, the non-secret Kafka settings and the emit
    mode."""

    replay_id: str
    topology: Mapping[str, Any]
    config: Mapping[str, Any]
    bootstrap_servers: str
    start: Offsets
    end: Offsets
    sink_partitions: Mapping[str, int]
    kafka_settings: Mapping[str, str] | None = None
    emit: EmitMode = EmitMode.EVERY_UPDATE


def plan_document(inputs: PlanInputs) -> dict[str, Any]:
    """The replay plan (``ReplayPlan.from_document``'s form) of ``inputs``. ``kafka_settings``: the non-secret client
    settings (``connection.security_config``: ``security.protocol``, ``sasl.mechanism``, ``ssl.ca.location``),
    the plan's ``kafka`` section; the credentials reach the Job's pod as variables from their Secrets.
    ``emit``: the spec's (``every_update`` or ``final``: docs/replay.md)."""
    plan: dict[str, Any] = {
        "replayId": inputs.replay_id,
        "bootstrapServers": inputs.bootstrap_servers,
        "topology": dict(inputs.topology),
        "config": dict(inputs.config),
        "from": {t: {p: o for p, o in sorted(parts.items())} for t, parts in sorted(inputs.start.items())},
        "to": {t: {p: o for p, o in sorted(parts.items())} for t, parts in sorted(inputs.end.items())},
        "partitions": dict(sorted(inputs.sink_partitions.items())),
        "emit": inputs.emit.value,
    }
    if inputs.kafka_settings:
        plan["kafka"] = dict(sorted(inputs.kafka_settings.items()))
    return plan


def replay_config(app_config: Mapping[str, str], application_id: str) -> dict[str, Any]:
    """The Kafka Streams config the replay runs with: the app's ``spec.config``, the new ``application.id`` and,
    when the app names a dead-letter topic, the replay's own (``dead_letters.topic``: never the live app's)."""
    config: dict[str, Any] = {**{k: v for k, v in sorted(app_config.items())}, "application.id": application_id}
    own = dead_letters.topic(app_config, application_id)
    if own is not None:
        config[dead_letters.DLQ_KEY] = own
    return config


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
    image, code = images.image, images.code
    kubernetes = spec.spark.mode == SparkMode.KUBERNETES
    ca = app.kafka.tls.ca_secret if app is not None and app.kafka.tls is not None else None
    metadata = {"namespace": owner.namespace, "labels": _labels(owner), "ownerReferences": [owner.reference()]}
    account_name = spec.spark.service_account_name or "default" if kubernetes else SERVICE_ACCOUNT
    account = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": SERVICE_ACCOUNT, "namespace": owner.namespace, "labels": dict(_SHARED_LABELS)},
        "automountServiceAccountToken": False,
    }
    data = {PLAN_FILE: yaml.safe_dump(json.loads(json.dumps(plan)), sort_keys=False)}
    if code is not None:
        data[app_code.SCRIPT_FILE] = app_code.script_text()
    if kubernetes:
        data[SPARK_DEFAULTS_FILE] = spark_defaults(owner, spec, image)
        template = executor_template(ca, code, job_name(owner.name))
        data[EXECUTOR_TEMPLATE_FILE] = yaml.safe_dump(template, sort_keys=False)
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": job_name(owner.name), **metadata},
        "data": data,
    }
    driver = spec.spark.driver
    memory = f"{_memory_mb(driver.memory) + MEMORY_OVERHEAD_MB}Mi"
    run = ["streamapp", "replay", "run", "--plan", f"{PLAN_DIR}/{PLAN_FILE}"]
    if kubernetes:
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
    env += credentials_env(app.kafka) if app is not None else []
    env += [app_code.python_path_env()] if code is not None else []
    security_context = dict(CONTAINER_SECURITY)  # uid 10001 too: the same as the app's pods
    container = {
        "name": "replay",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": command,
        "env": env,
        "resources": {"requests": {"cpu": str(driver.cores), "memory": memory}, "limits": {"memory": memory}},
        "volumeMounts": [
            {"name": "plan", "mountPath": PLAN_DIR, "readOnly": True},
            {"name": "tmp", "mountPath": TMP_DIR},
            {"name": "work", "mountPath": WORK_DIR},
            *_ca_mounts(ca),
            *([app_code.code_mount()] if code is not None else []),
        ],
        "securityContext": security_context,
    }
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "serviceAccountName": account_name,
        "automountServiceAccountToken": kubernetes,
        "enableServiceLinks": False,
        "securityContext": dict(POD_SECURITY),
        "containers": [container],
        "volumes": [
            {"name": "plan", "configMap": {"name": job_name(owner.name)}},
            {"name": "tmp", "emptyDir": {}},
            {"name": "work", "emptyDir": {}},
            *_ca_volumes(ca),
        ],
    }
    job_spec: dict[str, Any] = {"backoffLimit": spec.spark.retries}
    if code is not None:
        init = app_code.init_container(code.image, code.pull_policy, PLAN_DIR, security_context)
        pod_spec["initContainers"] = [init]
        pod_spec["volumes"].append(app_code.code_volume())
        job_spec["podFailurePolicy"] = app_code.pod_failure_policy()
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": job_name(owner.name), **metadata},
        "spec": {**job_spec, "template": {"metadata": {"labels": _labels(owner)}, "spec": pod_spec}},
    }
    return [config_map, job] if kubernetes else [account, config_map, job]


#: The executor pods' command: Spark's Kubernetes backend sets ``SPARK_*`` variables and the argument
#: ``executor`` and expects the image's entrypoint to start ``KubernetesExecutorBackend`` (Spark's own images
#: ship ``entrypoint.sh``; pyspark's wheel does not, so the pod template carries it).
EXECUTOR_COMMAND = (
    'opts=(); while IFS= read -r line; do opts+=("${line#*=}"); done '
    "< <(env | grep '^SPARK_JAVA_OPT_' | sort -t_ -k4 -n); "
    'exec java "${opts[@]}" -Xms"$SPARK_EXECUTOR_MEMORY" -Xmx"$SPARK_EXECUTOR_MEMORY" -cp "$SPARK_HOME/jars/*" '
    'org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend --driver-url "$SPARK_DRIVER_URL" '
    '--executor-id "$SPARK_EXECUTOR_ID" --cores "$SPARK_EXECUTOR_CORES" --app-id "$SPARK_APPLICATION_ID" '
    '--hostname "$SPARK_EXECUTOR_POD_IP" --resourceProfileId "$SPARK_RESOURCE_PROFILE_ID" '
    '--podName "$SPARK_EXECUTOR_POD_NAME"'
)


def _ca_mounts(ca: SecretKeyRef | None) -> list[dict[str, Any]]:
    return [] if ca is None else [{"name": "kafka-ca", "mountPath": CA_DIR, "readOnly": True}]


def _ca_volumes(ca: SecretKeyRef | None) -> list[dict[str, Any]]:
    if ca is None:
        return []
    return [{"name": "kafka-ca", "secret": {"secretName": ca.name, "items": [{"key": ca.key, "path": CA_FILE}]}}]


def executor_template(
    ca: SecretKeyRef | None = None, code: app_code.CodeImage | None = None, config_map: str | None = None
) -> dict[str, Any]:
    """The executor pods' template: the entrypoint above, uid 10001 under the restricted Pod Security
    Standard, no service account token, a writable ``/tmp`` (Spark adds an emptyDir for its local dirs), and
    the Kafka CA Secret ``ca`` where the plan's ``ssl.ca.location`` points (the executors read Kafka).
    ``code``: the app image's user code, copied by the init container ``app-code`` (the script from the replay's
    ConfigMap ``config_map``) and first on ``PYTHONPATH``: the executors' Python workers import the user's
    functions."""
    security_context = {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    container: dict[str, Any] = {
        "name": "spark-executor",
        "command": ["/bin/bash", "-c", EXECUTOR_COMMAND],
        "env": [
            {"name": "SPARK_LOCAL_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "SPARK_LOCAL_HOSTNAME", "value": "localhost"},
            {"name": "HOME", "value": TMP_DIR},
        ],
        "securityContext": security_context,
        "volumeMounts": [{"name": "tmp", "mountPath": TMP_DIR}, *_ca_mounts(ca)],
    }
    pod: dict[str, Any] = {
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": dict(POD_SECURITY),
        "containers": [container],
        "volumes": [{"name": "tmp", "emptyDir": {}}, *_ca_volumes(ca)],
    }
    if code is not None and config_map is not None:
        container["env"].append(app_code.python_path_env())
        container["volumeMounts"].append(app_code.code_mount())
        pod["initContainers"] = [app_code.init_container(code.image, code.pull_policy, PLAN_DIR, security_context)]
        pod["volumes"] += [{"name": "plan", "configMap": {"name": config_map}}, app_code.code_volume()]
    return {"apiVersion": "v1", "kind": "Pod", "spec": pod}


def spark_defaults(owner: Owner, spec: StreamReplaySpec, image: str) -> str:
    """``spark-defaults.conf`` of ``spark.mode: kubernetes``: the executors (count, cores, memory, image, pod
    template, name prefix, labels), the driver's fixed ports (the executors connect back to them), and no
    cleanup of PersistentVolumeClaims or Services the client-mode driver never made (its Role allows neither)."""
    executor = spec.spark.executor
    settings = {
        "spark.kubernetes.namespace": owner.namespace,
        "spark.kubernetes.container.image": image,
        "spark.kubernetes.container.image.pullPolicy": "IfNotPresent",
        "spark.kubernetes.executor.podTemplateFile": f"{PLAN_DIR}/{EXECUTOR_TEMPLATE_FILE}",
        "spark.kubernetes.executor.podNamePrefix": owner.name,
        f"spark.kubernetes.executor.label.{REPLAY_LABEL}": owner.name,
        "spark.kubernetes.driver.ownPersistentVolumeClaim": "false",
        "spark.kubernetes.driver.reusePersistentVolumeClaim": "false",
        # a client-mode driver has no Service (spark-submit makes one in cluster mode only): without this, Spark's
        # stop() deletes the Services labelled with its app id, a call the driver's Role does not allow
        "spark.kubernetes.driver.service.deleteOnTermination": "false",
        "spark.executor.instances": str(executor.instances),
        "spark.executor.cores": str(executor.cores),
        "spark.kubernetes.executor.request.cores": str(executor.cores),
        "spark.executor.memory": executor.memory,
        "spark.executorEnv.SPARK_HOME": SPARK_HOME,
        "spark.executorEnv.PYSPARK_PYTHON": f"{VENV}/bin/python",
        "spark.driver.port": "7078",
        "spark.blockManager.port": "7079",
        "spark.scheduler.minRegisteredResourcesRatio": "1.0",
        "spark.scheduler.maxRegisteredResourcesWaitingTime": "300s",
    }
    return "".join(f"{key} {value}\n" for key, value in settings.items())


@dataclass(frozen=True)
class JobState:
    """The Job's outcome: ``phase`` is Running, Succeeded or Failed; ``reason`` and ``message`` say why."""

    phase: str
    reason: str = ""
    message: str = ""


def job_state(job: Mapping[str, Any] | None) -> JobState:
    """The replay's phase from its Job's status conditions (``Complete`` / ``Failed``)."""
    if job is None:
        return JobState("Pending", "JobMissing", "the Job does not exist yet")
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("status") != "True":
            continue
        if condition.get("type") == "Complete":
            return JobState("Succeeded", "JobComplete", "the Spark job finished")
        if condition.get("type") == "Failed":
            return JobState("Failed", str(condition.get("reason") or "JobFailed"), str(condition.get("message") or ""))
    status = job.get("status") or {}
    if status.get("active"):
        return JobState("Running", "JobRunning", f"{status['active']} pod(s) running")
    return JobState("Running", "JobStarting", "waiting for the Job's pod")


def replay_result(log: str) -> dict[str, Any] | None:
    """The JSON line ``streamapp replay run`` prints last (records read and written, seconds), if any."""
    for line in reversed(log.strip().splitlines()):
        line = line.strip()
        if line.startswith("{") and '"records_written"' in line:
            try:
                found: dict[str, Any] = json.loads(line)
            except ValueError:
                return None
            return found
    return None


def dropped_records(result: Mapping[str, Any] | None) -> dict[str, int] | None:
    """``status.droppedRecords`` from a replay's result (``dropped_records``: ``{reason: records}``, the
    ``streamapp.drop_reasons`` names), every reason under its status key; None without a result or from a runtime
    that does not report drops."""
    reported = result.get("dropped_records") if result is not None else None
    if not isinstance(reported, dict):
        return None
    return status_counts({str(k): v for k, v in reported.items() if type(v) is int and v >= 0})


def records_in_markers(values: Sequence[bytes]) -> int:
    """Records a replay wrote, from its done markers (``{"topic", "partition", "chunk", "records"}`` each,
    ``streamapp.replay.output``; a compacted topic may still hold a chunk's marker twice: counted once)."""
    chunks: dict[tuple[str, int, int], int] = {}
    for value in values:
        marker = json.loads(value)
        chunks[(str(marker["topic"]), int(marker["partition"]), int(marker["chunk"]))] = int(marker["records"])
    return sum(chunks.values())


def failure_detail(log: str, limit: int = 600) -> str:
    """The end of the replay pod's log that says why it failed (a click error, a Python exception)."""
    lines = [line for line in log.strip().splitlines() if line.strip()]
    for line in reversed(lines):
        if line.startswith(("Error:", "ERROR")) or "Error" in line.split(":")[0]:
            return line[:limit]
    return " | ".join(lines[-3:])[-limit:]


def termination_message(pods: Sequence[Mapping[str, Any]], container: str = "replay") -> str:
    """The termination message of ``container`` in the last of ``pods`` (``state``, else ``lastState``,
    ``.terminated.message``: what the container wrote to ``/dev/termination-log``), or "": the cause when the API
    cannot serve the pod's log."""
    for pod in reversed(pods):
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            if status.get("name") != container:
                continue
            for state in (status.get("state") or {}, status.get("lastState") or {}):
                message = str((state.get("terminated") or {}).get("message") or "").strip()
                if message:
                    return message
    return ""


@dataclass(frozen=True)
class NewVersion:
    """The new version of a handover: its StreamApp's name, ``application.id`` and topology, and the image and
    replicas it runs with (None: the app's)."""

    name: str
    application_id: str
    topology: Mapping[str, Any]
    image: str | None = None
    replicas: int | None = None


def new_version(app: Mapping[str, Any], version: NewVersion, replay: str, replay_uid: str) -> dict[str, Any]:
    """The new version's StreamApp: the app's spec with the replay's topology and ``application.id``, and
    ``image`` and ``replicas`` when given (``handover.image``, else the StreamReplay's ``spec.image``;
    ``handover.replicas``; else the app's). Not owned by the StreamReplay (it outlives it: no owner reference);
    labelled with the replay's name and annotated with its uid (``streamapp.io/replay-uid``), which
    :func:`made_by` requires."""
    name, application_id, topology = version.name, version.application_id, version.topology
    image, replicas = version.image, version.replicas
    spec = {key: value for key, value in (app.get("spec") or {}).items()}
    spec["topology"] = dict(topology)
    spec["applicationId"] = application_id
    if image is not None:
        spec["image"] = image
    if replicas is not None:
        spec["replicas"] = replicas
    metadata = app.get("metadata") or {}
    return {
        "apiVersion": API_VERSION,
        "kind": "StreamApp",
        "metadata": {
            "name": name,
            "namespace": metadata.get("namespace"),
            "labels": {**(metadata.get("labels") or {}), REPLAY_LABEL: replay},
            "annotations": {REPLAY_UID_ANNOTATION: replay_uid},
        },
        "spec": spec,
    }


NEW_VERSION_IS_THE_APP = "NewVersionIsTheApp"
NEW_VERSION_NAME_IN_USE = "NewVersionNameInUse"


def not_made_by(
    app: Mapping[str, Any] | None,
    replay: str,
    replay_uid: str,
    recorded_uid: str | None = None,
    created_unannotated: bool = False,
) -> str | None:
    """Why StreamApp ``app`` is not the new version this StreamReplay (name ``replay``, uid ``replay_uid``)
    created, or None when it is. The label ``streamapp.io/replay=<replay>`` is not enough (a later StreamReplay
    may reuse the name, and anyone who can edit a StreamApp can label it): the annotation
    ``streamapp.io/replay-uid`` must be this replay's uid, and once the replay recorded the uid of the StreamApp it
    created (``status.newVersionUid``) it must be that StreamApp, not one made again under its name.
    ``created_unannotated``: this very StreamReplay's status says it created the new version (``createNewVersion``
    Done) but recorded no uid, as an operator before the annotation did; its label is then enough (an upgrade in
    the middle of a handover resumes). A StreamReplay of a reused name has no such status."""
    if app is None:
        return "it does not exist"
    metadata = app.get("metadata") or {}
    labelled = (metadata.get("labels") or {}).get(REPLAY_LABEL)
    if labelled != replay:
        return f"it was not created by this replay (no label {REPLAY_LABEL}={replay})"
    made_by_uid = (metadata.get("annotations") or {}).get(REPLAY_UID_ANNOTATION)
    if made_by_uid is None and created_unannotated and not recorded_uid:
        return None
    if made_by_uid != replay_uid:
        earlier = f"uid {made_by_uid}" if made_by_uid else f"no annotation {REPLAY_UID_ANNOTATION}"
        return (
            f"it was made by an earlier StreamReplay named {replay} ({earlier}), not by this one (uid {replay_uid}); "
            "a reused replay name never adopts, rewinds or deletes it"
        )
    if recorded_uid and metadata.get("uid") != recorded_uid:
        return (
            f"it is not the StreamApp this replay created (uid {metadata.get('uid')}, created uid {recorded_uid}): "
            "deleted and made again since"
        )
    return None


def made_by(app: Mapping[str, Any] | None, replay: str, replay_uid: str, recorded_uid: str | None = None) -> bool:
    """Whether StreamApp ``app`` is the new version this StreamReplay created (:func:`not_made_by`)."""
    return not_made_by(app, replay, replay_uid, recorded_uid) is None


@dataclass(frozen=True)
class Claimant:
    """The replay that would take a StreamApp as its new version: its name and uid, the uid recorded in status
    when it created one (None: not yet), and whether it created one before the uid annotation existed."""

    replay: str
    replay_uid: str
    recorded_uid: str | None = None
    created_unannotated: bool = False


def new_version_conflict(
    new_name: str, app_name: str, existing: Mapping[str, Any] | None, claimant: Claimant
) -> tuple[str, str] | None:
    """Why the new version's name cannot be used (``(reason, message)``), or None.

    The new version must not be the app it replaces (``handover.name``, by default the StreamReplay's own
    name, equal to ``appRef.name``: the handover would wait on the old app itself, then delete the only
    app), and a StreamApp already named like it is taken as the new version only when this replay created
    it (:func:`not_made_by`: its name label, its uid annotation, the uid recorded at creation): anyone else's,
    including an earlier StreamReplay's of the same name, is never adopted, rewound or deleted."""
    if new_name == app_name:
        return NEW_VERSION_IS_THE_APP, (
            f"the new version's name {new_name!r} (handover.name, by default the StreamReplay's name) is "
            f"appRef.name: the handover would replace StreamApp {app_name} by itself and delete it; set "
            "handover.name to another name"
        )
    if existing is not None:
        why = not_made_by(
            existing, claimant.replay, claimant.replay_uid, claimant.recorded_uid, claimant.created_unannotated
        )
        if why is not None:
            return NEW_VERSION_NAME_IN_USE, (
                f"StreamApp {new_name} exists and {why}; it is left untouched: set handover.name to an unused name"
            )
    return None


def caught_up(app: Mapping[str, Any] | None, max_lag: int) -> tuple[bool, str]:
    """Whether the new version is Ready, with at least one ready pod, and at most ``max_lag`` records of lag; and
    what it waits for. A version of 0 pods is Ready with lag 0 and would run nothing once the old one is gone."""
    if app is None:
        return False, "the new version does not exist yet"
    status = app.get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    lag = status.get("lag")
    if not ready:
        return False, f"the new version is not Ready yet ({status.get('ready') or '0/?'} pods)"
    if int(status.get("readyReplicas") or 0) < 1:
        return False, f"the new version has no ready pod ({status.get('ready') or '0/0'} pods)"
    if lag is None or lag > max_lag:
        return False, f"the new version's lag is {lag if lag is not None else 'unknown'} (at most {max_lag})"
    return True, f"the new version is Ready with lag {lag}"


def deletion_event(app: str, status: Mapping[str, Any]) -> tuple[str, str, str]:
    """``(type, reason, message)`` of the event a deleted StreamReplay leaves: what still runs and what is
    left. The deletion touches no StreamApp: the Job and its ConfigMap go with the StreamReplay (owner
    references: a running Spark job stops), the new
    version is not owned by it, the old one is deleted only by the handover's last step, after the new version
    caught up. So a handover cut short leaves the old version, or both versions, running, never neither."""
    phase = status.get("phase")
    steps = {str(s.get("name")): s.get("state") for s in status.get("handover") or []}
    new, group = status.get("newVersion") or "", status.get("applicationId") or ""
    if phase != "HandingOver":
        if phase in ("Succeeded", "Failed"):
            return "Normal", "ReplayDeleted", f"the replay had finished ({phase}); nothing else changes"
        return (
            "Normal",
            "ReplayDeleted",
            (
                f"a Spark job still running stops with its Job (its output keeps what it committed); StreamApp {app} "
                "is untouched"
            ),
        )
    if steps.get("removeOldVersion") is not None:
        return "Normal", "HandoverDeleted", f"the new version {new} runs; StreamApp {app} is being removed by policy"
    if steps.get("createNewVersion") is not None:
        return (
            "Warning",
            "HandoverAbandoned",
            (
                f"deleted in the middle of the handover: StreamApp {app} (old version) and {new or 'the new version'} "
                "both keep running and writing their outputs; delete the one you do not want"
            ),
        )
    return (
        "Warning",
        "HandoverAbandoned",
        (
            f"deleted before the new version was created: StreamApp {app} keeps running; the replay's consumer group "
            f"{group} and its changelog topics ({group}-*-changelog) are left for a new StreamReplay or for cleanup"
        ),
    )


def next_step(recorded: Sequence[Mapping[str, Any]] | None) -> str | None:
    """The first handover step not Done (None: the handover is complete)."""
    done = {step.get("name") for step in recorded or [] if step.get("state") == StepState.DONE}
    return next((step for step in HANDOVER_STEPS if step not in done), None)


def record_step(
    recorded: Sequence[Mapping[str, Any]] | None, name: str, state: StepState, now: str, message: str = ""
) -> list[dict[str, Any]]:
    """``status.handover`` with step ``name`` set to ``state``, steps in HANDOVER_STEPS order."""
    steps = {str(step["name"]): dict(step) for step in recorded or []}
    entry = HandoverStep(name=name, state=state, time=now, message=message or None)
    steps[name] = entry.model_dump(mode="json", by_alias=True, exclude_none=True)
    return [steps[s] for s in HANDOVER_STEPS if s in steps]


def to_wire(offsets: Offsets) -> PerPartition:
    """Offsets with string partition keys (status, JSON)."""
    return {t: {str(p): o for p, o in sorted(parts.items())} for t, parts in sorted(offsets.items())}


def from_wire(offsets: Mapping[str, Mapping[str, int]]) -> Offsets:
    return {t: {int(p): int(o) for p, o in parts.items()} for t, parts in offsets.items()}


def latest_progress(log: str) -> ReplayProgress | None:
    """The last progress report in the replay pod's log (``streamapp replay run`` writes one line
    ``replay-progress {json}`` per report, ``streamapp.replay.progress``); None when there is none yet."""
    for line in reversed(log.splitlines()):
        report = parse_progress(line)
        if report is not None:
            return report
    return None


def progress_fields(report: ReplayProgress) -> dict[str, Any]:
    """Status fields of a progress report: input records processed, the percent of them (an integer: Kubernetes
    API conventions avoid floats in status) and the job's phase (``stages``: reading and processing the input,
    ``write``: the transactional output, ``done``; ``streamapp.replay.progress.ReplayProgress``)."""
    return {
        "recordsProcessed": report.records_processed,
        "percentProcessed": _percent(report),
        "jobPhase": report.phase,
    }


def _percent(report: ReplayProgress) -> int:
    return int(report.fraction * 100)


def progress_text(
    phase: str,
    *,
    seconds: int | None = None,
    step: str | None = None,
    written: int | None = None,
    report: ReplayProgress | None = None,
) -> str:
    """The printer column's progress, e.g. ``spark job running 40s, stages: 1200/5000 records processed (24%)``."""
    if phase == "Starting":  # the Job's pod has no started container yet (``step``: Kubernetes' reason, if any)
        waited = f"spark job not started after {seconds}s" if seconds is not None else "spark job starting"
        return f"{waited}: {step}" if step else waited
    if phase == "Running":
        running = f"spark job running {seconds}s" if seconds is not None else "spark job starting"
        if report is not None:
            done = f"{report.records_processed}/{report.records_total} records processed ({_percent(report)}%)"
            running += f", {report.phase}: {done}"
        return f"{running}, {written} records written" if written else running
    if phase == "HandingOver" and step is not None:
        return f"handover {HANDOVER_STEPS.index(step) + 1}/{len(HANDOVER_STEPS)}: {step}"
    if phase == "Succeeded":
        return f"done, {written} records written" if written is not None else "done"
    return phase.lower()


def sink_retention_ms(source_retention_ms: Mapping[str, int]) -> int | None:
    """``retention.ms`` of an output topic the replay creates: the longest of its source topics' (-1, kept for ever,
    when any source keeps its records for ever); None (the broker's default) when none is known.

    A replay writes output records with their input records' timestamps, often older than the broker's default
    retention (7 days): a topic created with that default would have them deleted at the next retention check."""
    if not source_retention_ms:
        return None
    values = list(source_retention_ms.values())
    return -1 if any(v < 0 for v in values) else max(values)


@dataclass(frozen=True)
class ReplayClaim:
    """A StreamReplay that has not finished, as kopf's ``replay_claims`` index knows it: the app it replays
    (``<namespace>/<appRef.name>``) and the output topics its topology writes."""

    namespace: str
    name: str
    uid: str
    created: str
    """``metadata.creationTimestamp`` (RFC 3339): the older replay goes on, the newer one is refused."""
    app: str
    sinks: frozenset[str]
    phase: str


def sink_topics_of(topology: Mapping[str, Any] | None) -> frozenset[str]:
    """The ``topic`` of every sink node of a topology document (``spec.topology``); malformed nodes are ignored."""
    nodes = (topology or {}).get("nodes") if isinstance(topology, Mapping) else None
    return frozenset(
        str(node["topic"])
        for node in nodes or []
        if isinstance(node, Mapping) and node.get("type") == "sink" and node.get("topic")
    )


def replay_conflicts(me: ReplayClaim, others: Iterable[ReplayClaim]) -> list[Problem]:
    """Two replays at once must never write the same history twice: an unfinished replay created before ``me``
    (ties: namespace/name) that replays the same app or writes one of ``me``'s output topics refuses ``me``
    (reason ``ReplayInProgress``), naming it. Both would succeed with every record twice in a shared topic, or two
    handovers would each claim to be the app's new version."""
    problems = []
    for other in sorted(others, key=lambda o: (o.created, o.namespace, o.name)):
        if other.uid == me.uid or (other.created, other.namespace, other.name) >= (me.created, me.namespace, me.name):
            continue
        if other.phase in (Phase.SUCCEEDED.value, Phase.FAILED.value):
            continue
        shared = sorted(me.sinks & other.sinks)
        if other.app == me.app:
            why = f"replays StreamApp {me.app} already"
        elif shared:
            why = f"writes {', '.join(shared)} already"
        else:
            continue
        problems.append(
            Problem(
                "ReplayInProgress",
                f"StreamReplay {other.namespace}/{other.name} ({other.phase or 'Pending'}) {why}: one replay of an "
                "app, and one writer of an output topic, at a time; delete it or wait until it has finished",
            )
        )
    return problems
