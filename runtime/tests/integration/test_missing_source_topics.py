"""Missing source topics on the real broker: the instance is not ready with a named reason in /readyz and
/status (Kafka's INCOMPLETE_SOURCE_TOPIC_METADATA / MissingSourceTopicException), says so once rather than
every retry, and runs as soon as the topic exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from streamapp_harness import KafkaTestClient, StreamAppInstance, count_by_color_topology, unique, wait_for

pytestmark = pytest.mark.integration


def test_a_missing_source_topic_is_a_named_readiness_reason_until_it_exists(
    kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance]
) -> None:
    app, source, output = unique("missing"), unique("events"), unique("counts")
    kafka.create_topics({output: 1})
    config = {"application.id": app, "bootstrap.servers": kafka.bootstrap, "state.dir": str(workdir / "state")}
    instance = StreamAppInstance(workdir, count_by_color_topology([source], output), config)
    instances.append(instance.start())

    wait_for(lambda: instance.get("/status")[0] == 200 and bool(instance.status()["missing_topics"]), 60, "status")
    code, reason = instance.get("/readyz")
    status = instance.status()
    assert code == 503
    assert f"INCOMPLETE_SOURCE_TOPIC_METADATA: source topics missing: {source}" in reason
    assert status["missing_topics"]["sources"] == [source] and status["missing_topics"]["sinks"] == []
    assert status["reason"].startswith("INCOMPLETE_SOURCE_TOPIC_METADATA")

    wait_for(lambda: waited_s(instance) > 11, 60, "two retries of the topic check (5 s apart)")
    assert instance.log_file.read_text().count("Not ready: INCOMPLETE") == 1
    kafka.create_topics({source: 1})
    instance.wait_ready()

    assert instance.status()["missing_topics"] is None
    assert instance.stop() == 0


def waited_s(instance: StreamAppInstance) -> int:
    """How long the instance says it has waited for the topics (its readiness reason's ``waiting for Ns``)."""
    found = re.search(r"waiting for (\d+)s", instance.status()["reason"])
    return int(found.group(1)) if found else 0
