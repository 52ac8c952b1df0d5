"""A StreamApp whose broker cannot be reached costs the operator's log a dozen librdkafka lines a minute, not
hundreds (issue 19: the audit counted 639 FAIL lines a minute for one app, D-L1).

On the real stack: an app whose bootstrap server does not resolve is ``Degraded`` (``KafkaUnavailable``, naming the
host); over the next 30 s the installed operator's log holds at most ``LOG_BURST`` + 1 librdkafka lines about
that host (the burst and one line counting those left out).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e import cluster

pytestmark = pytest.mark.e2e

#: streamapp_operator.kafka.LOG_BURST: librdkafka lines let through per admin client a minute.
LOG_BURST = 10
WINDOW_S = 30.0  # before the limit: ~320 lines in 30 s (639 a minute)


@pytest.fixture
def namespace(operator_installed: None) -> Iterator[str]:
    name = cluster.create_namespace("oplog")
    yield name
    cluster.delete_namespace(name)


def _operator_log() -> str:
    logs = sorted((cluster.ROOT / ".cache" / "run" / "pods" / "streamapp-system").glob("streamapp-operator-*/*.log"))
    assert logs, "no operator log found (the node agent keeps the containers' logs there)"
    return "\n".join(Path(log).read_text(errors="replace") for log in logs)


def _librdkafka_lines(host: str) -> int:
    """Lines librdkafka wrote about ``host`` (its thread names carry it: ``[thrd:<host>:9092/bootstrap]``)."""
    return sum(1 for line in _operator_log().splitlines() if host in line and "rdkafka#" in line)


def test_an_unreachable_broker_costs_a_dozen_log_lines_a_minute_not_hundreds(namespace: str) -> None:
    name = f"nobroker-{uuid.uuid4().hex[:6]}"
    host = f"{name}.invalid"
    kafka = {"bootstrapServers": f"{host}:9092"}
    cluster.apply(cluster.passthrough_app(name, f"{name}-in", f"{name}-out", kafka=kafka), namespace)
    degraded = cluster.wait_condition(name, namespace, "Degraded", "True", "KafkaUnavailable", 120)
    assert f"{host}:9092" in degraded["message"], degraded["message"]

    before = _librdkafka_lines(host)
    time.sleep(WINDOW_S)
    during = _librdkafka_lines(host) - before
    assert during <= 2 * (LOG_BURST + 1), f"{during} librdkafka lines about {host} in {WINDOW_S:.0f}s"
    assert "left out" in _operator_log() or during <= LOG_BURST
    cluster.kubectl("delete", "streamapp", name, "-n", namespace, "--wait=true", "--timeout=60s")
