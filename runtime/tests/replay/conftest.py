"""Fixtures of the replay tests: the streaming runtime on the broker and the Spark replay, as the conformance
harness's ``BrokerEngine`` and ``SparkEngine``. Everything here needs the local broker (``integration``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from conformance.conftest import conformance_bootstrap  # noqa: F401  (fixture)
from conformance.harness import BrokerEngine, SparkEngine


@pytest.fixture(scope="session")
def spark_session(conformance_bootstrap: str) -> Iterator[object]:  # noqa: F811
    from spark_fixtures import replay_spark_session

    yield from replay_spark_session()


@pytest.fixture
def broker(conformance_bootstrap: str, tmp_path: Path) -> BrokerEngine:  # noqa: F811
    return BrokerEngine(conformance_bootstrap, tmp_path / "broker", timeout_s=600.0)


@pytest.fixture
def replay(spark_session: object, conformance_bootstrap: str, tmp_path: Path) -> SparkEngine:  # noqa: F811
    return SparkEngine(spark_session, conformance_bootstrap, tmp_path / "spark")
