"""SASL/SCRAM-SHA-512 on the real broker's SASL_PLAINTEXT listener (``hack/stack/up.sh kafka``: 127.0.0.1:9094,
credentials in ``.cache/run/env``): an application configured with the credentials counts every record exactly;
with a wrong password (from ``STREAMAPP_KAFKA_SASL_PASSWORD``, which overrides the config file) the instance gives
up with the authentication failure in ``/status`` and exits 1, and the password appears nowhere."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from streamapp_harness import (
    STACK_ENV_FILE,
    KafkaTestClient,
    StreamAppInstance,
    color_events,
    count_by_color_topology,
    expected_color_counts,
    stack_env,
    unique,
    wait_for,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="session")
def sasl() -> dict[str, str]:
    """librdkafka settings of the SASL listener: the environment's ``KAFKA_SASL_*``, else the stack's env file
    (``make test`` does not source it)."""
    names = ("KAFKA_SASL_BOOTSTRAP", "KAFKA_SASL_USERNAME", "KAFKA_SASL_PASSWORD")
    found = {**stack_env(), **{v: os.environ[v] for v in names if os.environ.get(v)}}
    missing = [v for v in names if not found.get(v)]
    if missing:
        pytest.fail(f"{', '.join(missing)} not in {STACK_ENV_FILE} (hack/stack/up.sh kafka writes them)", pytrace=False)
    settings = {
        "bootstrap.servers": found["KAFKA_SASL_BOOTSTRAP"],
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": found["KAFKA_SASL_USERNAME"],
        "sasl.password": found["KAFKA_SASL_PASSWORD"],
    }
    try:
        AdminClient(settings).list_topics(timeout=15)
    except Exception as exc:
        pytest.fail(f"the SASL listener {settings['bootstrap.servers']} does not answer: {exc}", pytrace=False)
    return settings


def test_an_app_authenticating_with_scram_sha_512_counts_every_record_exactly(
    kafka: KafkaTestClient, sasl: dict[str, str], workdir: Path, instances: list[StreamAppInstance]
) -> None:
    app, source, output = unique("sasl-app"), unique("events"), unique("counts")
    kafka.create_topics({source: 2, output: 2})
    events = color_events(0, 300)
    kafka.produce(source, events)
    config = {"application.id": app, "commit.interval.ms": 200, "state.dir": str(workdir / "state"), **sasl}
    instance = StreamAppInstance(workdir, count_by_color_topology([source], output), config)
    instances.append(instance.start())
    instance.wait_ready()
    expected = expected_color_counts(events)
    wait_for(lambda: kafka.latest_longs(output) == expected, 60, "exact counts through the SASL listener", 1.0)
    assert instance.stop() == 0


def test_a_wrong_password_from_the_environment_fails_the_instance_with_the_cause_in_status(
    kafka: KafkaTestClient,
    sasl: dict[str, str],
    workdir: Path,
    instances: list[StreamAppInstance],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app, source, output = unique("sasl-wrong"), unique("events"), unique("counts")
    kafka.create_topics({source: 1, output: 1})
    wrong = f"not-{unique('the-password')}"
    monkeypatch.setenv("STREAMAPP_KAFKA_SASL_PASSWORD", wrong)  # overrides the right one in the config file
    config = {"application.id": app, "state.dir": str(workdir / "state"), **sasl}
    instance = StreamAppInstance(workdir, count_by_color_topology([source], output), config)
    instances.append(instance.start())
    assert instance.process is not None

    last: dict[str, Any] = {}
    bodies: list[str] = []
    deadline = time.monotonic() + 120
    while instance.process.poll() is None and time.monotonic() < deadline:
        code, body = instance.get("/status")
        if code == 200:
            bodies.append(body)
            last = json.loads(body)
        time.sleep(0.5)

    assert instance.process.poll() == 1, instance.log_tail()
    assert last["phase"] == "failed", last
    failure = last["last_failure"]
    assert failure["error"].startswith("KafkaAuthenticationError: ") and "SASL authentication" in failure["error"]
    assert failure["task"] is None and len(failure["error"].encode()) <= 1024
    assert all(w["last_failure"] == failure and w["error"] == failure["error"] for w in last["workers"])
    for text in (*bodies, instance.log_file.read_text(errors="replace")):
        assert wrong not in text and sasl["sasl.password"] not in text
