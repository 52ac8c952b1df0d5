"""The ``engine`` fixture: every conformance test runs on the driver and on the real broker.

The broker run is marked ``integration`` (``-m "not integration"`` keeps only the driver run). Selecting it
without a reachable broker is a failure, not a skip, like the other integration tests.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator
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


_CALL_FAILED = pytest.StashKey[bool]()
"""Whether a test's call phase failed (set by the hook below, read by the ``engine`` fixture's teardown)."""


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, None, None]:
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item.stash[_CALL_FAILED] = report.failed


@pytest.fixture(params=["driver", pytest.param("broker", marks=pytest.mark.integration)])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    """The engine a conformance test runs on: ``DriverEngine`` or ``BrokerEngine`` (module ``harness``).

    When a broker test fails, the end of each ``streamapp run`` log it produced is printed.
    """
    if request.param == "driver":
        yield DriverEngine()
        return
    bootstrap: str = request.getfixturevalue("conformance_bootstrap")
    broker = BrokerEngine(bootstrap, tmp_path)
    yield broker
    if request.node.stash.get(_CALL_FAILED, False):
        for log in broker.logs:
            lines = log.read_text(errors="replace").splitlines()[-60:] if log.exists() else ["(no log)"]
            print(f"--- {log} (last {len(lines)} lines) ---", *lines, sep="\n")
