"""``streamapp replay run`` works from the installation it runs from: Spark's Python workers start the
interpreter that runs the command (``session.worker_python``), not the ``python3`` on the ``PATH``, when
neither ``PYSPARK_PYTHON`` nor ``spark.pyspark.python`` says otherwise. Real broker and Spark, the command in a
subprocess whose environment has neither ``PYSPARK_PYTHON``, the tests' ``PYTHONPATH`` nor the virtualenv's
``bin`` on the ``PATH``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from streamapp import StreamsBuilder
from streamapp.replay.output import markers_topic
from streamapp.serdes import serde_for

from replay.reading import read_committed

pytestmark = pytest.mark.integration

RECORDS = 400
KEYS = 8
STREAMAPP = Path(sys.executable).parent / "streamapp"


def counts_per_key(source: str, sink: str) -> dict[str, object]:
    builder = StreamsBuilder()
    (
        builder.stream(source, key_serde="string", value_serde="long", name="numbers")
        .group_by_key()
        .count(name="count", store="counts")
        .to_stream(name="changes")
        .to(sink, name="out")
    )
    return builder.build().to_dict()


def test_replay_run_without_pyspark_python_runs_its_spark_workers_on_the_commands_interpreter(
    conformance_bootstrap: str, tmp_path: Path
) -> None:
    prefix = f"run-{uuid.uuid4().hex[:8]}"
    source, sink = f"{prefix}.numbers", f"{prefix}.counts"
    admin = AdminClient({"bootstrap.servers": conformance_bootstrap})
    for future in admin.create_topics([NewTopic(source, 2, 1), NewTopic(sink, 2, 1)]).values():
        future.result()
    producer = Producer({"bootstrap.servers": conformance_bootstrap})
    for i in range(RECORDS):
        producer.produce(source, key=f"k{i % KEYS}".encode(), value=i.to_bytes(8, "big"), partition=i % 2, timestamp=i)
    assert producer.flush(30) == 0
    plan = {
        "replayId": prefix,
        "bootstrapServers": conformance_bootstrap,
        "topology": counts_per_key(source, sink),
        "config": {"application.id": f"{prefix}-v2"},
        "from": {source: {0: 0, 1: 0}},
        "to": {source: {0: RECORDS // 2, 1: RECORDS // 2}},
        "partitions": {sink: 2},
    }
    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text(yaml.safe_dump(plan))
    # as a user runs an installed command: the virtualenv not activated, so the `python3` on the PATH is another
    environment = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYTHONPATH", "VIRTUAL_ENV")}
    environment["PATH"] = os.pathsep.join(
        d
        for d in environment.get("PATH", "").split(os.pathsep)
        if d and Path(d).resolve() != STREAMAPP.parent.resolve()
    )

    run = subprocess.run(
        [str(STREAMAPP), "replay", "run", "--plan", str(plan_file)],
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )

    assert run.returncode == 0, run.stderr[-4000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["records_read"] == {source: RECORDS}
    assert result["records_written"][sink] == RECORDS
    key_serde, value_serde = serde_for("string", sink, is_key=True), serde_for("long", sink)
    per_key: dict[str, list[int]] = {}
    for _, key, value, _ in read_committed(conformance_bootstrap, sink, 2):
        per_key.setdefault(key_serde.deserialize(key), []).append(value_serde.deserialize(value))
    assert per_key == {f"k{k}": list(range(1, RECORDS // KEYS + 1)) for k in range(KEYS)}

    admin.delete_topics([source, sink, f"{prefix}-v2-counts-changelog", markers_topic(prefix)])
