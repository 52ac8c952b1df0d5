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
