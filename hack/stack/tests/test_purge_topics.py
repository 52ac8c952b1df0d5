"""make purge-topics never deletes Kafka's internal topics nor the benchmark's cached datasets."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_SPEC = importlib.util.spec_from_file_location("purge_topics", Path(__file__).parents[1] / "purge_topics.py")
assert _SPEC is not None and _SPEC.loader is not None
purge_topics = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(purge_topics)


def test_purge_keeps_internal_topics_and_benchmark_datasets() -> None:
    names = ["__consumer_offsets", "__transaction_state", "bench-flights-v2", "conf-ab12-in", "app-1-store-changelog"]
    assert purge_topics.topics_to_purge(names) == ["app-1-store-changelog", "conf-ab12-in"]


def test_purge_deletes_topics_that_merely_contain_a_kept_prefix() -> None:
    assert purge_topics.topics_to_purge(["x__y", "my-bench-out"]) == ["my-bench-out", "x__y"]


def test_purge_refuses_brokers_off_the_loopback_interface_by_default() -> None:
    assert purge_topics.is_loopback("127.0.0.1:9092")
    assert purge_topics.is_loopback("localhost:9092,[::1]:9093")
    assert not purge_topics.is_loopback("127.0.0.1:9092,kafka.prod.example:9092")
    assert not purge_topics.is_loopback("10.0.0.5:9092")
    assert not purge_topics.is_loopback("")
