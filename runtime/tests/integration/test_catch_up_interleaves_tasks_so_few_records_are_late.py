"""A stream thread catching up interleaves its tasks, so the writers of a repartition topic stay close in event time
and a downstream window drops few records as late (Kafka Streams' ``TaskExecutor`` processes a bounded number of
records per task per pass, round-robin over the tasks; streamapp also paces the tasks of a sub-topology by stream
time, ``streamapp.processing.task_manager.TaskManager.process_buffered``).

Two days of page views (4 partitions, each in event-time order) are in the input before the application starts;
``group_by(country)`` repartitions them into an hourly tumbling count with one hour of grace. The upstream tasks write
the repartition topic in the order the thread processes them: a thread that runs one task's whole backlog before the
next one's puts a day or two between the writers, and the count then drops most of the later writers' records as late
(59% of 4,949 page views in the report). Interleaved, the writers stay within minutes of each other.
"""

from __future__ import annotations

import random
import struct
import time
from pathlib import Path
from typing import Any

import pytest
from streamapp_harness import KafkaTestClient, StreamAppInstance, unique, wait_for

pytestmark = pytest.mark.integration

PARTITIONS = 4
VIEWS = 4_949
HOUR_MS = 3_600_000
SPAN_MS = 48 * HOUR_MS
COUNTRIES = ["de", "fr", "nl", "pl", "se", "us"]
START_MS = (int(time.time() * 1000) - SPAN_MS - HOUR_MS) // HOUR_MS * HOUR_MS
"""Event times end near now: a topic's ``retention.ms`` (7 days by default) keeps every record while the test reads."""
MAX_LATE_FRACTION = 0.05


def page_views(seed: int = 22) -> list[tuple[str, dict[str, Any]]]:
    """``VIEWS`` page views spread evenly over ``SPAN_MS``, by user (the key), in event-time order."""
    rng = random.Random(seed)
    step = SPAN_MS // VIEWS
    return [
        (f"user-{rng.randrange(500)}", {"n": n, "country": rng.choice(COUNTRIES), "ts": START_MS + n * step})
        for n in range(VIEWS)
    ]


def hourly_views_topology(source: str, output: str) -> dict[str, Any]:
    """page views (event time from ``ts``) -> re-key by country -> repartition -> hourly tumbling count (grace 1 h)."""
    return {
        "nodes": [
            {"name": "views", "type": "source", "topics": [source], "keySerde": "string", "valueSerde": "json",
             "timestampExtractor": {"type": "field", "field": "ts"}},
            {"name": "by-country", "type": "select_key", "input": "views", "mapper": "integration_functions:country"},
            {"name": "per-country", "type": "repartition", "input": "by-country", "keySerde": "string",
             "valueSerde": "json"},
            {"name": "count", "type": "windowed_count", "input": "per-country", "store": "hourly-views",
             "windows": {"type": "tumbling", "sizeMs": HOUR_MS, "graceMs": HOUR_MS}},
            {"name": "changes", "type": "to_stream", "input": "count"},
            {"name": "out", "type": "sink", "input": "changes", "topic": output,
             "keySerde": f"windowed:string:{HOUR_MS}", "valueSerde": "long"},
        ],
        "stores": [
            {"name": "hourly-views", "type": "window", "keySerde": "string", "valueSerde": "long",
             "retentionMs": 2 * HOUR_MS, "windowSizeMs": HOUR_MS},
        ],
    }  # fmt: skip


def counted(kafka: KafkaTestClient, output: str) -> int:
    """The records the final counts hold: the last count of every (country, hour) window, summed."""
    latest: dict[bytes, int] = {}
    for _, _, key, value in sorted(kafka.read_all(output)):
        assert key is not None and value is not None
        latest[key] = struct.unpack(">q", value)[0]
    return sum(latest.values())


def test_a_catch_up_through_a_repartition_drops_few_records_as_late(
    kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance]
) -> None:
    app, source, output = unique("catch-up"), unique("page-views"), unique("hourly-views")
    kafka.create_topics({source: PARTITIONS, output: PARTITIONS})
    kafka.produce(source, page_views())
    config = {
        "application.id": app,
        "bootstrap.servers": kafka.bootstrap,
        "state.dir": str(workdir / "state"),
        "commit.interval.ms": 1000,
    }
    instance = StreamAppInstance(workdir, hourly_views_topology(source, output), config)
    instances.append(instance.start())
    instance.wait_ready()
    wait_for(lambda: instance.metric("streamapp_records_processed_total") >= 2 * VIEWS, 60, "the catch-up")
    time.sleep(2.0)  # the last commit's flush
    late = VIEWS - counted(kafka, output)
    print(f"catch-up: {late} of {VIEWS} page views dropped as late")
    assert late <= VIEWS * MAX_LATE_FRACTION, f"{late} of {VIEWS} page views dropped as late"
    assert instance.stop() == 0
