"""The ``engine`` fixture: every conformance test runs on the driver, on the real broker and as a Spark replay.

The broker and Spark runs are marked ``integration`` (``-m "not integration"`` keeps only the driver run).
Selecting them without a reachable broker is a failure, not a skip, like the other integration tests. The Spark
runs share one SparkSession (``local[2]``, started once per test session); tests the replay does not support are
listed by name in ``SPARK_UNSUPPORTED`` (and in docs/replay.md) and run as strict expected failures.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from conformance.harness import BrokerEngine, DriverEngine, Engine, SparkEngine
from conformance.spark_unsupported import SPARK_UNSUPPORTED

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


@pytest.fixture(scope="session")
def spark_session(conformance_bootstrap: str) -> Iterator[object]:
    """One local SparkSession for the test session (``streamapp.replay.build_session``, ``local[2]``)."""
    from spark_fixtures import replay_spark_session

    yield from replay_spark_session()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Spark runs of the tests in ``SPARK_UNSUPPORTED`` are strict expected failures, with the reason."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.params.get("engine") == "spark":
            reason = SPARK_UNSUPPORTED.get(item.originalname)
            if reason is not None:
                item.add_marker(pytest.mark.xfail(reason=f"replay: {reason}", strict=True))


@pytest.fixture(
    params=[
        "driver",
        pytest.param("broker", marks=pytest.mark.integration),
        pytest.param("spark", marks=pytest.mark.integration),
    ]
)
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    """The engine a conformance test runs on: ``DriverEngine``, ``BrokerEngine`` or ``SparkEngine`` (module
    ``harness``).

    When a broker test fails, the end of each ``streamapp run`` log it produced is printed.
    """
    if request.param == "driver":
        yield DriverEngine()
        return
    if request.param == "spark":
        yield SparkEngine(
            request.getfixturevalue("spark_session"), request.getfixturevalue("conformance_bootstrap"), tmp_path
        )
        return
    bootstrap: str = request.getfixturevalue("conformance_bootstrap")
    broker = BrokerEngine(bootstrap, tmp_path)
    yield broker
    if request.node.stash.get(_CALL_FAILED, False):
        for log in broker.logs:
            lines = log.read_text(errors="replace").splitlines()[-60:] if log.exists() else ["(no log)"]
            print(f"--- {log} (last {len(lines)} lines) ---", *lines, sep="\n")
