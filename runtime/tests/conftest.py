"""Shared test setup of the runtime.

This folder is on ``sys.path`` (pytest inserts a rootless conftest's folder), so tests import the shared
helpers ``kafka_fakes`` (hand-written fakes of the Kafka seam) by name. The integration fixtures (real
broker) live in ``integration/conftest.py``.
"""
