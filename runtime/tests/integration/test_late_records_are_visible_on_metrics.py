"""A late record is visible on a real ``streamapp run`` over the broker: ``/metrics`` counts it per task and reason
(Kafka's task-level dropped-records) with the window processor's record lateness, also in Kafka Streams' names
(``kafka_streams_*`` at ``metrics.recording.level: DEBUG``, reported by the worker process), ``/status`` has it by
reason for the operator, and the log names its topic, partition, offset, window and stream time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from streamapp_harness import KafkaTestClient, StreamAppInstance, unique, wait_for

pytestmark = pytest.mark.integration

WINDOW_MS = 10_000


def late_topology(source: str, output: str) -> dict[str, Any]:
    """``source`` (JSON with event time ``ts``) → count per key and 10 s tumbling window, no grace → ``output``."""
    return {
        "nodes": [
            {
                "name": "events",
                "type": "source",
                "topics": [source],
                "keySerde": "string",
                "valueSerde": "json",
                "timestampExtractor": {"type": "field", "field": "ts"},
            },
            {
                "name": "count",
                "type": "windowed_count",
                "input": "events",
                "store": "late-counts",
                "windows": {"type": "tumbling", "sizeMs": WINDOW_MS, "graceMs": 0},
            },
            {"name": "changes", "type": "to_stream", "input": "count"},
            {
                "name": "out",
                "type": "sink",
                "input": "changes",
                "topic": output,
                "keySerde": f"windowed:string:{WINDOW_MS}",
                "valueSerde": "long",
            },
        ],
        "stores": [
            {
                "name": "late-counts",
                "type": "window",
                "keySerde": "string",
                "valueSerde": "long",
                "retentionMs": 60_000,
                "windowSizeMs": WINDOW_MS,
            }
        ],
    }


def test_a_late_record_is_counted_per_task_and_reason_with_its_lateness_and_logged(
    kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance]
) -> None:
    app, source, output = unique("late"), unique("late-events"), unique("late-counts")
    kafka.create_topics({source: 1, output: 1})
    config = {
        "application.id": app,
        "bootstrap.servers": kafka.bootstrap,
        "commit.interval.ms": 200,
        "state.dir": str(workdir / "state"),
        "metrics.recording.level": "DEBUG",
    }
    instance = StreamAppInstance(workdir / "app", late_topology(source, output), config)
    instances.append(instance.start())
    instance.wait_ready()
    # 105 s is in [100 s, 110 s), which closed when stream time reached 200 s (end + grace <= stream time)
    kafka.produce(source, [("k", {"ts": 100_000}), ("k", {"ts": 200_000}), ("k", {"ts": 105_000})], partition=0)

    wait_for(lambda: len(kafka.read_all(output)) == 2, 60, "the two open windows counted")
    wait_for(lambda: instance.metric("streamapp_dropped_records_total") == 1, 30, "the drop reported")
    task = 'processor="count",task="0_0",thread="0"'
    assert instance.metric_samples("streamapp_task_dropped_records_total") == {
        'streamapp_task_dropped_records_total{reason="late",task="0_0",thread="0"}': 1.0
    }
    assert instance.metric_samples("streamapp_record_lateness") == {
        f"streamapp_record_lateness_avg_ms{{{task}}}": 31666.7,  # (0 + 0 + 95,000) / 3
        f"streamapp_record_lateness_max_ms{{{task}}}": 95000.0,
    }
    kafka_task = instance.metric_samples("kafka_streams_stream_task_metrics_")
    (dropped,) = [v for k, v in kafka_task.items() if k.startswith("kafka_streams_stream_task_metrics_dropped_records")]
    (lateness,) = [
        v for k, v in kafka_task.items() if k.startswith("kafka_streams_stream_task_metrics_record_lateness_max")
    ]
    (processed,) = [v for k, v in kafka_task.items() if k.startswith("kafka_streams_stream_task_metrics_process_total")]
    assert (dropped, lateness, processed) == (1, 95_000, 3)
    thread_id = f'thread_id="{app}-'
    assert all(thread_id in k and 'task_id="0_0"' in k for k in kafka_task)
    e2e = instance.metric_samples("kafka_streams_stream_processor_node_metrics_record_e2e_latency_max")
    assert {k.split('processor_node_id="')[1].split('"')[0] for k in e2e} == {"events", "out"}
    assert instance.metric("kafka_streams_stream_state_metrics_put_total") == 0  # a window store: not metered yet
    (worker,) = instance.status()["workers"]
    assert worker["metrics"]["dropped_records_by_reason"] == {"late": 1}
    assert "kafka_metrics" not in worker
    assert (
        f"Skipping record for expired window in count: task=[0_0] topic=[{source}] partition=[0] offset=[2] "
        "timestamp=[105000] window=[100000,110000) expiration=[200000] streamTime=[200000]"
    ) in instance.log_file.read_text()
    assert instance.stop() == 0
