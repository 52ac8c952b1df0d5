"""The Spark side of a replay's pods: where the plan, the scratch space and Spark live in the image, the
``restricted`` pod security both the Job's pod and the executors run under, the Kafka CA's mount, and for
``spark.mode: kubernetes`` the executors' pod template and ``spark-defaults.conf`` (Spark's Kubernetes backend
starts the executors from them). Pure: manifests and settings as plain data.
"""

from __future__ import annotations

from typing import Any

from streamapp_operator.connection import CA_DIR, CA_FILE, SecretKeyRef
from streamapp_operator.kinds import Owner
from streamapp_operator.streamreplays import app_code
from streamapp_operator.streamreplays.resources import REPLAY_LABEL, StreamReplaySpec

PLAN_DIR = "/etc/streamapp-replay"
TMP_DIR = "/tmp"
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


def ca_mounts(ca: SecretKeyRef | None) -> list[dict[str, Any]]:
    """The Kafka CA Secret's mount (where the plan's ``ssl.ca.location`` points); [] without one."""
    return [] if ca is None else [{"name": "kafka-ca", "mountPath": CA_DIR, "readOnly": True}]


def ca_volumes(ca: SecretKeyRef | None) -> list[dict[str, Any]]:
    """The Kafka CA Secret as a volume holding its one key; [] without one."""
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
        "volumeMounts": [{"name": "tmp", "mountPath": TMP_DIR}, *ca_mounts(ca)],
    }
    pod: dict[str, Any] = {
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": dict(POD_SECURITY),
        "containers": [container],
        "volumes": [{"name": "tmp", "emptyDir": {}}, *ca_volumes(ca)],
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
