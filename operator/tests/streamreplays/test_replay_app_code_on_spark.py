"""A replay runs a user function that only the app image's copied code holds: the Job container's own command
(``job_manifests.job_manifests``: the version check, then ``streamapp replay run``) with ``PYTHONPATH`` as the pod sets
it, over a folder the in-pod script copied from an "app image" site-packages, on local Spark and the local broker.

This is the path the Job's pod takes, outside Kubernetes: the init container's copy, the check, and Spark's Python
workers importing ``<module>:<function>`` from ``PYTHONPATH`` (the driver's environment, which
``PythonWorkerFactory`` hands on). Needs the broker and Spark.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from importlib import metadata
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from replay_fakes import NS
from streamapp_operator.kinds import Owner
from streamapp_operator.streamreplays import app_code, app_code_script, job_manifests, replay_plan
from streamapp_operator.streamreplays.resources import StreamReplaySpec

pytestmark = pytest.mark.integration

BOOTSTRAP = os.environ.get("STREAMAPP_TEST_BOOTSTRAP", "127.0.0.1:9092")


def _app_site(root: Path, module: str) -> Path:
    """An app image's site-packages: the runtime (this interpreter's version: the check passes) and the user's
    module, copied in without a wheel."""
    site = root / "app-site-packages"
    version = metadata.version("streamapp-runtime")
    info = site / f"streamapp_runtime-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: streamapp-runtime\nVersion: {version}\n")
    (info / "RECORD").write_text(f"{info.name}/METADATA,,\n")
    (site / module).mkdir()
    (site / module / "__init__.py").write_text("def shout(value):\n    return value.upper() + '!'\n")
    return site


def _container_command(plan_dir: Path, code_dir: Path) -> list[str]:
    """The Job container's command as the operator writes it, with the pod's paths made the test's."""
    spec = StreamReplaySpec.parse({"appRef": {"name": "app"}})
    code = app_code.CodeImage("apps/app:1")
    *_, job = job_manifests.job_manifests(
        Owner("StreamReplay", "r", NS, "u"), spec, {}, job_manifests.JobImages("replay:1", code)
    )
    command = job["spec"]["template"]["spec"]["containers"][0]["command"]
    paths = {job_manifests.PLAN_DIR: str(plan_dir), app_code.CODE_DIR: str(code_dir)}
    out = []
    for part in command:
        for pod_path, here in paths.items():
            part = part.replace(pod_path, here)
        out.append(part)
    return out


def test_the_replay_runs_a_function_only_the_copied_app_code_holds(tmp_path: Path) -> None:
    prefix = f"appcode-{uuid.uuid4().hex[:8]}"
    module = prefix.replace("-", "_")
    source, sink = f"{prefix}.in", f"{prefix}.out"
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    for future in admin.create_topics([NewTopic(t, 1, 1) for t in (source, sink)]).values():
        future.result()
    try:
        producer = Producer({"bootstrap.servers": BOOTSTRAP})
        for i in range(5):
            producer.produce(source, key=f"k{i}".encode(), value=f"v{i}".encode(), timestamp=1_000 + i)
        assert producer.flush(30) == 0

        code_dir, plan_dir = tmp_path / "app", tmp_path / "plan"
        plan_dir.mkdir()
        manifest = app_code_script.copy(code_dir, _app_site(tmp_path, module))
        assert manifest["copied"] == [module]
        (plan_dir / app_code.SCRIPT_FILE).write_text(app_code.script_text())
        topology = {
            "nodes": [
                {"name": "in", "type": "source", "topics": [source], "keySerde": "string", "valueSerde": "string"},
                {"name": "shout", "type": "map_values", "input": "in", "mapper": f"{module}:shout"},
                {
                    "name": "out",
                    "type": "sink",
                    "input": "shout",
                    "topic": sink,
                    "keySerde": "string",
                    "valueSerde": "string",
                },
            ]
        }
        plan = replay_plan.plan_document(
            replay_plan.PlanInputs(
                replay_id=prefix,
                topology=topology,
                config={"application.id": f"{prefix}-v2"},
                bootstrap_servers=BOOTSTRAP,
                start={source: {0: 0}},
                end={source: {0: 5}},
                sink_partitions={sink: 1},
            )
        )
        (plan_dir / job_manifests.PLAN_FILE).write_text(yaml.safe_dump(plan))
        env = {**os.environ, "PYTHONPATH": app_code.CODE_SITE.replace(app_code.CODE_DIR, str(code_dir))}
        env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
        alone = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, env=os.environ.copy())
        assert alone.returncode != 0  # the function is nowhere but in the copied code

        command = _container_command(plan_dir, code_dir)
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
        assert f"app code: 1 entries of {tmp_path / 'app-site-packages'} on PYTHONPATH" in done.stderr

        consumer = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": prefix, "isolation.level": "read_committed"})
        consumer.assign([TopicPartition(sink, 0, 0)])
        values = []
        for _ in range(60):
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                values.append(message.value())
            if len(values) == 5:
                break
        consumer.close()
        assert values == [f"V{i}!".encode() for i in range(5)]
    finally:
        admin.delete_topics([source, sink, f"streamapp-replay-{prefix}-markers"])
