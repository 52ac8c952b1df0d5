"""The ``engine`` fixture: every conformance test runs on the driver and on the real broker.

The broker run is marked ``integration`` (``-m "not integration"`` keeps only the driver run). Selecting it
without a reachable broker is a failure, not a skip, like the other integration tests.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from conformance.harness import BrokerEngine, DriverEngine, Engine

BOOTSTRAP = os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:9092")


@pytest.fixture(scope="session")
def conformance_bootstrap() -> str:
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP, "socket.connection.setup.timeout.ms": 5000})
    try:
        admin.list_topics(timeout=15)
    except Exception as exc:
        pytest.fail(
            f"the Kafka broker at {BOOTSTRAP} is not reachable ({exc}); start it with hack/stack/up.sh kafka",
            pytrace=False,
        )
    return BOOTSTRAP


@pytest.fixture(params=["driver", pytest.param("broker", marks=pytest.mark.integration)])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Engine:
    """The engine a conformance test runs on: ``DriverEngine`` or ``BrokerEngine`` (module ``harness``)."""
    if request.param == "driver":
        return DriverEngine()
    bootstrap: str = request.getfixturevalue("conformance_bootstrap")
    return BrokerEngine(bootstrap, tmp_path)
