"""Thin helpers over the local stack for the demo and e2e tests: environment, kubectl, consumer-group lag.

Everything here talks to the real components started by ``hack/stack/up.sh``; nothing is faked.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parent.parent
ENV_FILE = ROOT / ".cache" / "run" / "env"


def stack_env() -> dict[str, str]:
    """The variables written by ``hack/stack/up.sh`` (KAFKA_BOOTSTRAP, KUBECONFIG, STACK_BIN, ...).

    Raises FileNotFoundError when the stack was never started.
    """
    env: dict[str, str] = {}
    for line in ENV_FILE.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        line = line.removeprefix("export ")
        key, _, value = line.partition("=")
        env[key] = os.path.expandvars(value.strip().strip('"').strip("'"))
    return env


def process_env() -> dict[str, str]:
    """``os.environ`` plus the stack's variables, with the stack's binaries first on PATH."""
    env = dict(os.environ)
    stack = stack_env()
    env.update({k: v for k, v in stack.items() if k != "PATH"})
    if "STACK_BIN" in stack:
        env["PATH"] = f"{stack['STACK_BIN']}:{ROOT / '.venv' / 'bin'}:{env.get('PATH', '')}"
    return env


def kubectl(*args: str, check: bool = True, input_text: str | None = None) -> str:
    """Run kubectl against the local API server; returns stdout. Raises CalledProcessError on failure."""
    done = subprocess.run(
        ["kubectl", *args], env=process_env(), capture_output=True, text=True, input=input_text, check=False
    )
    if check and done.returncode != 0:
        raise subprocess.CalledProcessError(done.returncode, done.args, done.stdout, done.stderr)
    return done.stdout


def get_json(kind: str, name: str, namespace: str = "default") -> dict[str, Any]:
    return dict(json.loads(kubectl("get", kind, name, "-n", namespace, "-o", "json")))


def group_lag(bootstrap: str, group_id: str, topics: list[str]) -> int:
    """Total lag of ``group_id`` over every partition of ``topics``: end offset minus committed offset.

    A partition without a committed offset counts its whole end offset (nothing was processed yet).
    """
    admin = AdminClient({"bootstrap.servers": bootstrap})
    from confluent_kafka import Consumer

    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{group_id}-lag-probe"})
    try:
        partitions = [
            TopicPartition(t, p) for t in topics for p in probe.list_topics(t, timeout=10).topics[t].partitions
        ]
        request = [ConsumerGroupTopicPartitions(group_id, partitions)]
        committed = admin.list_consumer_group_offsets(request)[group_id].result(30).topic_partitions
        offsets = {(tp.topic, tp.partition): tp.offset for tp in committed}
        lag = 0
        for tp in partitions:
            end = probe.get_watermark_offsets(tp, timeout=10)[1]
            done = offsets.get((tp.topic, tp.partition), -1)
            lag += end - max(done, 0)
        return lag
    finally:
        probe.close()


def pod_log_problems(app: str, namespace: str = "default", limit: int = 40) -> str:
    """The WARNING and ERROR lines of the pods of StreamApp ``app``, from the node agent's container log files
    (``.cache/run/pods/<namespace>/<pod>/``: every restart's output, with no API call on a failing path), the
    last ``limit`` of each pod: for assertion messages, so a failure on CI says what the pods saw."""
    parts = []
    for log_file in sorted((ENV_FILE.parent / "pods" / namespace).glob(f"{app}-*/*.log")):
        lines = [ln for ln in log_file.read_text(errors="replace").splitlines() if " WARNING " in ln or " ERROR " in ln]
        parts.append(f"{log_file.parent.name}: {len(lines)} warnings/errors\n" + "\n".join(lines[-limit:]))
    return "\n".join(parts) or f"no pod logs of {app} in {namespace}"


def wait_until(
    condition: Callable[[], bool],
    timeout_s: float,
    what: str,
    interval_s: float = 2.0,
    describe: Callable[[], str] = lambda: "",
) -> None:
    """Poll ``condition`` until it is true; raises TimeoutError naming ``what`` and the last state."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(interval_s)
    raise TimeoutError(f"timed out after {timeout_s:.0f}s waiting for {what}. {describe()}")


def streamapp_settled(name: str, replicas: int, namespace: str = "default") -> bool:
    """True when the StreamApp's status shows every replica ready, zero lag, for the current generation."""
    app = get_json("streamapp", name, namespace)
    status: Mapping[str, Any] = app.get("status") or {}
    return (
        status.get("observedGeneration") == app["metadata"]["generation"]
        and status.get("readyReplicas") == replicas
        and status.get("replicas") == replicas
        and status.get("lag") == 0
    )


def degraded_message(name: str, namespace: str = "default") -> str | None:
    """The message of the StreamApp's ``Degraded`` condition when it is True, else None."""
    status = get_json("streamapp", name, namespace).get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Degraded" and condition.get("status") == "True":
            return str(condition.get("message", ""))
    return None


# --- Scenario helpers of the operator's safety tests (unique namespaces and topics, cleaned up after) -------------


def passthrough_app(name: str, source: str, sink: str, **spec: Any) -> dict[str, Any]:
    """A StreamApp that copies JSON records from ``source`` to ``sink`` (no user code, so any image runs it)."""
    manifest: dict[str, Any] = {
        "apiVersion": "streamapp.io/v1alpha1",
        "kind": "StreamApp",
        "metadata": {"name": name},
        "spec": {
            "image": "localhost/streamapp:dev",
            "imagePullPolicy": "Never",
            "replicas": 1,
            "threads": 1,
            "kafka": {"bootstrapServers": stack_env()["KAFKA_BOOTSTRAP"]},
            "topology": {
                "nodes": [
                    {"name": "in", "type": "source", "topics": [source], "keySerde": "string", "valueSerde": "json"},
                    {"name": "out", "type": "sink", "input": "in", "topic": sink, "keySerde": "string",
                     "valueSerde": "json"},
                ],
            },
        },
    }  # fmt: skip
    manifest["spec"].update(spec)
    return manifest


def apply(manifest: Mapping[str, Any], namespace: str) -> None:
    """Server-side apply of ``manifest`` in ``namespace`` (no last-applied annotation, any size)."""
    kubectl("apply", "--server-side", "--force-conflicts", "-n", namespace, "-f", "-", input_text=json.dumps(manifest))


def create_namespace(prefix: str, labels: Mapping[str, str] | None = None) -> str:
    """A new namespace ``<prefix>-<random>``; delete it with ``delete_namespace``."""
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    manifest = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(labels or {})}}
    kubectl("create", "-f", "-", input_text=json.dumps(manifest))
    return name


def delete_namespace(namespace: str) -> None:
    """Delete the test's StreamApps first (their finalizer needs the operator), then the namespace."""
    kubectl("delete", "streamapps", "--all", "-n", namespace, "--wait=true", "--timeout=120s", check=False)
    kubectl("delete", "namespace", namespace, "--wait=false", check=False)


def condition(name: str, namespace: str, kind: str) -> dict[str, Any]:
    """The StreamApp's condition of type ``kind`` ({} when absent)."""
    status = get_json("streamapp", name, namespace).get("status") or {}
    return dict(next((c for c in status.get("conditions") or [] if c.get("type") == kind), {}))


def wait_condition(
    name: str, namespace: str, kind: str, status: str, reason: str | None = None, timeout_s: float = 90
) -> dict[str, Any]:
    """Wait until the StreamApp's ``kind`` condition has ``status`` (and ``reason``); returns it."""

    def matches() -> bool:
        found = condition(name, namespace, kind)
        return found.get("status") == status and (reason is None or found.get("reason") == reason)

    wait_until(matches, timeout_s, f"{kind}={status} ({reason}) on {namespace}/{name}",
               describe=lambda: str(get_json("streamapp", name, namespace).get("status")))  # fmt: skip
    return condition(name, namespace, kind)


def create_topics(partitions: Mapping[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": stack_env()["KAFKA_BOOTSTRAP"]})
    new = [NewTopic(topic, count, 1) for topic, count in partitions.items()]
    for future in admin.create_topics(new).values():
        future.result(30)


def topics(prefix: str) -> set[str]:
    admin = AdminClient({"bootstrap.servers": stack_env()["KAFKA_BOOTSTRAP"]})
    return {t for t in admin.list_topics(timeout=10).topics if t.startswith(prefix)}


def delete_topics(prefix: str) -> None:
    """Delete every topic whose name starts with ``prefix`` (the test's unique prefix) and its group."""
    admin = AdminClient({"bootstrap.servers": stack_env()["KAFKA_BOOTSTRAP"]})
    found = sorted(topics(prefix))
    for future in admin.delete_topics(found, operation_timeout=30).values() if found else []:
        future.result(60)
    groups = [g.group_id for g in admin.list_consumer_groups().result(30).valid if g.group_id.startswith(prefix)]
    for future in admin.delete_consumer_groups(groups).values() if groups else []:
        with contextlib.suppress(Exception):  # a group with members left is the test's failure, not cleanup's
            future.result(30)


def events(name: str, namespace: str) -> list[dict[str, Any]]:
    out = kubectl("get", "events", "-n", namespace, "-o", "json", "--field-selector", f"involvedObject.name={name}")
    return list(json.loads(out)["items"])


def count_records(topic: str, expected: int, timeout_s: float = 90) -> int:
    """Records on ``topic``, read from the start by a fresh group until ``expected`` arrived (or the timeout),
    then 3 s more: a count above ``expected`` is a duplicate."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": stack_env()["KAFKA_BOOTSTRAP"],
                         "group.id": f"probe-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest"})  # fmt: skip
    consumer.subscribe([topic])
    seen, deadline, settle = 0, time.monotonic() + timeout_s, None
    try:
        while time.monotonic() < deadline and (settle is None or time.monotonic() < settle):
            seen += sum(1 for m in consumer.consume(500, timeout=0.5) if m.error() is None)
            if seen >= expected and settle is None:
                settle = time.monotonic() + 3
    finally:
        consumer.close()
    return seen
