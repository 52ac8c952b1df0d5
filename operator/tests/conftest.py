"""Fixtures of the operator tests; the fakes themselves live in ``operator_fakes``."""

from __future__ import annotations

import pytest
from operator_fakes import TestingCluster, TestingKafka


@pytest.fixture
def cluster() -> TestingCluster:
    return TestingCluster()


@pytest.fixture
def kafka() -> TestingKafka:
    return TestingKafka({"flights": 4})
