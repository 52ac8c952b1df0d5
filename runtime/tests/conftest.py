"""Shared test setup of the runtime.

This folder is on ``sys.path`` (pytest inserts a rootless conftest's folder), so tests import the shared
helpers ``kafka_fakes`` (hand-written fakes of the Kafka seam) by name. The integration fixtures (real
broker) live in ``integration/conftest.py``.
"""

from collections.abc import Iterator

import pytest
from streamapp import skips


@pytest.fixture(autouse=True)
def fresh_skip_logs(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts with empty process-wide skip logs (``streamapp.skips``): their WARN lines are rate-limited
    per reason for a minute per process, so a test that asserts a line was logged would otherwise pass or fail by
    which test ran before it in the same worker."""
    monkeypatch.setattr(skips, "_LOGS", {})
    yield
