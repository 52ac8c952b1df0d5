"""Window and session stores on the real broker: changelogs with Kafka's windowed topic configs, and windows
rebuilt from them after the local state is deleted (a late record then still lands in its restored window)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import ConfigResource
from streamapp.serdes import serde_for
from streamapp.windowed import Windowed
from streamapp_harness import KafkaTestClient, StreamAppInstance, unique, wait_for

pytestmark = pytest.mark.integration

SECOND = 1_000
WINDOW = 10 * SECOND
BASE = (int(time.time() * 1000) - 120 * SECOND) // WINDOW * WINDOW  # recent, so the broker keeps the records


def topology(source: str, windows_out: str, sessions_out: str) -> dict[str, Any]:
    """``source`` → tumbling 10 s count (grace 5 s) → ``windows_out``; → session count (gap 5 s, grace 10 s) →
    ``sessions_out``."""
    return {
        "nodes": [
            {"name": "events", "type": "source", "topics": [source], "keySerde": "string", "valueSerde": "json"},
            {
                "name": "per-window",
                "type": "windowed_count",
                "input": "events",
                "store": "window-counts",
                "windows": {"type": "tumbling", "sizeMs": WINDOW, "graceMs": 5 * SECOND},
            },
            {"name": "window-changes", "type": "to_stream", "input": "per-window"},
            {
                "name": "windows-out",
                "type": "sink",
                "input": "window-changes",
                "topic": windows_out,
                "keySerde": f"windowed:string:{WINDOW}",
                "valueSerde": "long",
            },
            {
                "name": "per-session",
                "type": "windowed_count",
                "input": "events",
                "store": "session-counts",
                "windows": {"type": "session", "gapMs": 5 * SECOND, "graceMs": 10 * SECOND},
            },
            {"name": "session-changes", "type": "to_stream", "input": "per-session"},
            {
                "name": "sessions-out",
                "type": "sink",
                "input": "session-changes",
                "topic": sessions_out,
                "keySerde": "session_windowed:string",
                "valueSerde": "long",
            },
        ],
        "stores": [
            {
                "name": "window-counts",
                "type": "window",
                "keySerde": "string",
                "valueSerde": "long",
                "retentionMs": 60 * SECOND,
                "windowSizeMs": WINDOW,
            },
            {
                "name": "session-counts",
                "type": "session",
                "keySerde": "string",
                "valueSerde": "long",
                "retentionMs": 15 * SECOND,
            },
        ],
    }


def produce(bootstrap: str, topic: str, records: list[tuple[str, int]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random"})
    for key, seconds in records:
        producer.produce(topic, key=key.encode(), value=b'{"at": %d}' % seconds, timestamp=BASE + seconds * SECOND)
    producer.flush(30)


def final_table(kafka: KafkaTestClient, topic: str, key_serde: str) -> dict[Windowed, int | None]:
    keys, longs = serde_for(key_serde), serde_for("long")
    table: dict[Windowed, int | None] = {}
    for _, _, key, value in sorted(kafka.read_all(topic), key=lambda r: (r[0], r[1])):
        table[keys.deserialize(key)] = longs.deserialize(value)
    return {k: v for k, v in table.items() if v is not None}


def at(key: str, start_s: int, end_s: int) -> Windowed:
    return Windowed(key, BASE + start_s * SECOND, BASE + end_s * SECOND)


def test_windows_and_sessions_are_restored_from_their_changelogs(
    kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance]
) -> None:
    app, source = unique("window-restore"), unique("events")
    windows_out, sessions_out = unique("window-counts"), unique("session-counts")
    kafka.create_topics({source: 2, windows_out: 2, sessions_out: 2})
    config = {
        "application.id": app,
        "bootstrap.servers": kafka.bootstrap,
        "commit.interval.ms": 200,
        "state.dir": str(workdir / "state"),
    }
    desc = topology(source, windows_out, sessions_out)

    produce(kafka.bootstrap, source, [("a", 1), ("b", 1), ("a", 2), ("a", 12)])
    first = StreamAppInstance(workdir / "run1", desc, config)
    instances.append(first)
    first.start()
    first.wait_ready()
    expected_windows = {at("a", 0, 10): 2, at("b", 0, 10): 1, at("a", 10, 20): 1}
    wait_for(lambda: final_table(kafka, windows_out, f"windowed:string:{WINDOW}") == expected_windows, 90, "windows")
    assert first.stop() == 0

    configs = _topic_configs(kafka, f"{app}-window-counts-changelog", f"{app}-session-counts-changelog")
    assert configs[f"{app}-window-counts-changelog"] == ("compact,delete", str(60 * SECOND + 86_400_000))
    assert configs[f"{app}-session-counts-changelog"] == ("compact,delete", str(15 * SECOND + 86_400_000))

    shutil.rmtree(workdir / "state")
    # 13 s moves stream time; 4 s is late but within the window's grace (10 + 5 > 13) and the session's
    # (2 + 5 + 10 > 13), and within the gap of the restored session [1 s, 2 s]
    produce(kafka.bootstrap, source, [("a", 13), ("a", 4)])
    second = StreamAppInstance(workdir / "run2", desc, config)
    instances.append(second)
    second.start()
    second.wait_ready()
    expected_windows = {at("a", 0, 10): 3, at("b", 0, 10): 1, at("a", 10, 20): 2}
    wait_for(lambda: final_table(kafka, windows_out, f"windowed:string:{WINDOW}") == expected_windows, 90, "windows")
    expected_sessions = {at("a", 1, 4): 3, at("b", 1, 1): 1, at("a", 12, 13): 2}
    wait_for(lambda: final_table(kafka, sessions_out, "session_windowed:string") == expected_sessions, 30, "sessions")
    assert second.metric("streamapp_restore_records_total") > 0
    assert second.stop() == 0


def _topic_configs(kafka: KafkaTestClient, *topics: str) -> dict[str, tuple[str, str]]:
    resources = [ConfigResource(ConfigResource.Type.TOPIC, topic) for topic in topics]
    result: dict[str, tuple[str, str]] = {}
    for resource, future in kafka.admin.describe_configs(resources).items():
        entries = future.result(30)
        result[resource.name] = (entries["cleanup.policy"].value, entries["retention.ms"].value)
    return result
