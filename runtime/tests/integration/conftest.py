"""Fixtures of the integration tests: the REAL local Kafka broker (``hack/stack/up.sh kafka``).

Selecting these tests without a reachable broker is a failure, not a skip: ``make test`` starts the stack
first, and a silently skipped integration suite would prove nothing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from streamapp_harness import KafkaTestClient, StreamAppInstance

BOOTSTRAP = os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:9092")


@pytest.fixture(scope="session")
def bootstrap() -> str:
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP, "socket.connection.setup.timeout.ms": 5000})
    try:
        admin.list_topics(timeout=15)
    except Exception as exc:
        pytest.fail(
            f"the Kafka broker at {BOOTSTRAP} is not reachable ({exc}); start it with hack/stack/up.sh kafka",
            pytrace=False,
        )
    return BOOTSTRAP


@pytest.fixture
def kafka(bootstrap: str) -> KafkaTestClient:
    return KafkaTestClient(bootstrap)


@pytest.fixture
def instances() -> Iterator[list[StreamAppInstance]]:
    """Instances a test starts; any still running at the end are killed."""
    started: list[StreamAppInstance] = []
    yield started
    for instance in started:
        instance.kill()


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path
