"""A poison record under the default ``log_and_fail`` handler, on the real broker: the stream thread fails on it
at every restart, the supervisor replaces it 5 times, then gives up: ``/status`` shows phase ``failed`` and the
record's task, topic, partition and offset in ``last_failure``, and ``streamapp run`` exits 1 (issue 9: the crash
loop was invisible to Kubernetes and to the operator)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from streamapp_harness import KafkaTestClient, StreamAppInstance, count_by_key_topology, unique

pytestmark = pytest.mark.integration


def _statuses_until_exit(instance: StreamAppInstance, timeout_s: float) -> tuple[int, list[dict[str, Any]]]:
    """Poll ``/status`` until the process exits; returns its exit code and every document read."""
    assert instance.process is not None
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        code, body = instance.get("/status")
        if code == 200:
            seen.append(json.loads(body))
        exit_code = instance.process.poll()
        if exit_code is not None:
            return exit_code, seen
        time.sleep(0.3)
    raise AssertionError(f"streamapp did not give up within {timeout_s:.0f}s; log:\n{instance.log_tail()}")


def test_a_poison_record_under_log_and_fail_ends_in_phase_failed_naming_its_task_and_offset(
    kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance]
) -> None:
    app, source, output = unique("poison-app"), unique("events"), unique("counts")
    kafka.create_topics({source: 2, output: 2})
    kafka.produce(source, [(f"k{n}", {"n": n}) for n in range(10)], partition=1)
    kafka.producer.produce(source, key=b"poison", value=b"{not json", partition=1)  # offset 10 of partition 1
    assert kafka.producer.flush(30) == 0
    config = {"application.id": app, "bootstrap.servers": kafka.bootstrap, "state.dir": str(workdir / "state")}
    instance = StreamAppInstance(workdir, count_by_key_topology([source], output), config)
    instances.append(instance.start())

    exit_code, statuses = _statuses_until_exit(instance, 180)

    assert exit_code == 1, instance.log_tail()
    last = statuses[-1]
    assert last["phase"] == "failed" and not last["ready"]
    (worker,) = last["workers"]
    assert worker["restarts"] == 5 and not worker["alive"] and worker["exit_code"] == 1
    failure = worker["last_failure"]
    located = (failure["task"], failure["topic"], failure["partition"], failure["offset"])
    assert located == ("0_1", source, 1, 10), f"{failure}\n{instance.log_tail()}"
    assert failure["error"].startswith("DeserializationError: task 0_1: deserialization of record")
    assert worker["error"] == failure["error"] and len(failure["error"].encode()) <= 1024
    assert last["last_failure"] == failure
    # while it was still restarting, the failure was already visible with phase running
    assert any(s["phase"] == "running" and s["workers"][0]["last_failure"] for s in statuses)
