"""Smoke tests of the replay benchmark (``bench.replay``): it runs end to end on a tiny input, and its readers of
Spark's event log and of py-spy's stacks attribute time as documented. Not about anyone's speed."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest

from bench.replay import (
    SparkStage,
    classify,
    read_event_log,
    render,
    run_benchmark,
    sample_dataset,
    worker_profile,
)

BOOTSTRAP = os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:9092")


@pytest.mark.integration
def test_replay_benchmark_runs_both_engines_on_a_tiny_input(tmp_path: Path) -> None:
    from bench.data import delete_topics

    topic = f"bench-smoke-replay-{uuid.uuid4().hex[:6]}"
    try:
        dataset = sample_dataset(BOOTSTRAP, topic, 2_000, partitions=2)

        streaming, replays, failed = run_benchmark(
            BOOTSTRAP, dataset, ["count"], [1], work_dir=tmp_path, timeout_s=300, driver_memory="1g"
        )

        assert failed == {}
        assert streaming[("count", 1)].status == "ok"
        assert streaming[("count", 1)].measurement.records == 2_000
        replay = replays["count"]
        assert replay.records == 2_000
        out = next(topic for topic in replay.job["records_written"] if topic.endswith("-out"))
        assert replay.job["records_written"][out] == dataset.keyed  # every keyed flight's new count
        # the reads run in the stages' Python workers (streamapp.replay.spark.source): part of *process*
        assert {s.phase for s in replay.stages} >= {"process (tasks)", "write: produce (Python)"}
        assert sum(replay.phases.values()) == pytest.approx(replay.seconds, rel=0.2)
        assert replay.peak_tree_rss_mib > replay.peak_rss_mib["jvm"] > 0
        report = render(dataset, streaming, replays, (0.0, 0.0))
        assert "replay/this" in report
        assert "streaming, 1 thread" in report
    finally:
        delete_topics(BOOTSTRAP, [topic])


def _stage(stage_id: int, job_id: int, rdds: list[str], python_s: float = 0.0) -> SparkStage:
    return SparkStage(stage_id, job_id, "collect", 2, 1.0, 2.0, 1.0, 0.0, python_s, 0.0, rdds, 0, 0.0)


def test_stages_are_attributed_to_read_process_and_write() -> None:
    stages = [
        _stage(0, 0, ["MapPartitionsRDD", "kafka"]),
        _stage(2, 1, ["Scan KafkaRelation(...)", "ShuffledRowRDD"], python_s=5.0),
        _stage(4, 2, ["ShuffledRowRDD"]),
        _stage(9, 4, ["ShuffledRowRDD"]),
        _stage(12, 5, ["ShuffledRowRDD"], python_s=3.0),
    ]

    classify(stages)

    assert [s.phase for s in stages] == [
        "read (Kafka -> shuffle)",
        "process (tasks)",
        "write: prepare (no Python)",
        "write: prepare (no Python)",
        "write: produce (Python)",
    ]


def test_a_spark_native_stage_without_python_counts_as_processing_when_the_engine_names_its_jobs() -> None:
    stages = [
        _stage(0, 0, ["MapPartitionsRDD", "kafka"], python_s=4.0),
        _stage(3, 1, ["ShuffledRowRDD"]),  # window functions: no Python
        _stage(5, 2, ["ShuffledRowRDD"]),
        _stage(8, 3, ["ShuffledRowRDD"], python_s=3.0),
    ]
    for stage, description in zip(stages, ["stage 0", "stage 0", "write", "write"], strict=True):
        stage.job_description = f"streamapp-replay {description}"

    classify(stages)

    assert [s.phase for s in stages] == [
        "read (Kafka -> shuffle)",
        "process (tasks)",
        "write: prepare (no Python)",
        "write: produce (Python)",
    ]


def test_event_log_stages_carry_spark_task_metrics(tmp_path: Path) -> None:
    events = [
        {"Event": "SparkListenerJobStart", "Job ID": 0, "Stage IDs": [0]},
        {
            "Event": "SparkListenerStageCompleted",
            "Stage Info": {
                "Stage ID": 0,
                "Stage Name": "collect at engine.py",
                "Number of Tasks": 4,
                "Submission Time": 1_000,
                "Completion Time": 3_500,
                "RDD Info": [{"Name": "kafka"}],
                "Accumulables": [
                    {"Name": "internal.metrics.executorRunTime", "Value": 4_000},
                    {"Name": "internal.metrics.executorCpuTime", "Value": 1_500_000_000},
                    {"Name": "time to execute Python code", "Value": "0"},
                    {"Name": "internal.metrics.input.recordsRead", "Value": 1_000},
                ],
            },
        },
    ]
    folder = tmp_path / "eventlog_v2_local-1"
    folder.mkdir()
    (folder / "events_1_local-1").write_text("\n".join(json.dumps(e) for e in events))

    [stage] = read_event_log(folder)

    assert (stage.wall_s, stage.run_s, stage.cpu_s, stage.input_records) == (2.5, 4.0, 1.5, 1_000)
    assert stage.phase == "read (Kafka -> shuffle)"


def test_worker_profile_buckets_by_the_innermost_known_frame(tmp_path: Path) -> None:
    worker = 'process 1:"python -m bench.replay job";process 2:"python -m pyspark.daemon pyspark.worker"'
    (tmp_path / "stacks.txt").write_text(
        f"{worker};main (worker.py:1);StageFunction.__call__ (streamapp/replay/spark/task_stage.py:2);"
        "deserialize (streamapp/serdes.py:3);loads (json/__init__.py:4) 30\n"
        f"{worker};main (worker.py:1);_find_and_load (<frozen importlib._bootstrap>:5) 10\n"
        'process 1:"python -m bench.replay job";main (replay.py:1) 60\n'
    )

    shares = worker_profile(tmp_path / "stacks.txt")

    assert shares == {"task: serdes (JSON, long, windowed keys)": 75.0, "imports (each new Python worker)": 25.0}
