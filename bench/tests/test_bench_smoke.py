"""Smoke tests of the benchmark harness itself (not of anyone's speed)."""

from __future__ import annotations

import os
import uuid

import pytest

from bench.data import delete_topics, produce_all, recreate_topic, topic_records
from bench.profile import summarize
from bench.raw_loop import copy_loop

BOOTSTRAP = os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:9092")


@pytest.mark.integration
def test_raw_loop_copies_every_record_once() -> None:
    tag = f"bench-smoke-{uuid.uuid4().hex[:6]}"
    source, sink = f"{tag}-in", f"{tag}-out"
    try:
        recreate_topic(BOOTSTRAP, source, 2)
        recreate_topic(BOOTSTRAP, sink, 2)
        records = ((f"k{i}".encode(), b"v" * 100, 1_700_000_000_000 + i) for i in range(10_000))
        assert produce_all(BOOTSTRAP, source, records) == 10_000

        copied = copy_loop(BOOTSTRAP, tag, source, sink, commit_interval_ms=200, max_records=10_000)

        assert copied == 10_000
        assert topic_records(BOOTSTRAP, sink) == (2, 10_000)
    finally:
        delete_topics(BOOTSTRAP, [source, sink])


def test_profile_summary_counts_only_worker_samples() -> None:
    lines = [
        'process 1:"streamapp run";main (cli.py:1);wait (threading.py:2) 50',
        'process 1:"streamapp run";process 2:"python -c from multiprocessing.spawn import spawn_main";'
        "run (stream_thread.py:10);loads (json/__init__.py:3) 30",
        'process 1:"streamapp run";process 2:"python -c from multiprocessing.spawn import spawn_main";'
        "run (stream_thread.py:10) 10",
    ]

    top = summarize(lines)

    assert top.samples == 40
    assert top.self_counts["loads (json/__init__.py)"] == 30
    assert top.total_counts["run (stream_thread.py)"] == 40
