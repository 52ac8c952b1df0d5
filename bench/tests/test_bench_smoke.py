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


def test_cpu_score_is_deterministic_and_keeps_the_summary() -> None:
    from bench.functions import SCORE_ROUNDS, score, summarize

    flight = {"carrier": "UA", "flight": 1545, "tailnum": "N14228", "origin": "EWR", "dest": "IAH", "dep_delay": 2.0}

    first, second = score(dict(flight)), score(dict(flight))

    assert first == second
    assert {k: v for k, v in first.items() if k != "score"} == summarize(flight)
    assert 0 <= first["score"] <= 255 * SCORE_ROUNDS
    assert score({**flight, "dep_delay": 3.0})["score"] != first["score"]


def test_scaling_summary_divides_two_threads_by_one() -> None:
    from bench.engines import Result, Scenario
    from bench.measure import RunMeasurement
    from bench.run import render_scaling

    def result(threads: int, seconds: float, cpu_s: float) -> Result:
        m = RunMeasurement(records=1000, seconds=seconds, startup_s=0.0, output_records=1000)
        m.worker_cpu_s = {1: cpu_s}
        return Result(Scenario("streamapp", "cpu", "at_least_once", threads), "ok", m)

    text = render_scaling([result(1, 10.0, 10.0), result(2, 5.0, 10.0)])

    assert "cpu at_least_once: 2.00x records/s excl. startup, 1.00x records per worker CPU-second" in text
    assert render_scaling([result(1, 10.0, 10.0)]) == ""
