"""The record cache on the real broker (KIP-63, docs/record-cache.md): with Kafka's default size a hot key's count,
a window's count (Kafka's CachingWindowStore, sliding windows included) and a session's count (Kafka's
CachingSessionStore) reach the output once per commit, not once per record, and the final counts stay exact;
``statestore.cache.max.bytes: 0`` forwards one update per record. (The changelog gets a key's last value per
commit either way: the logged store's write buffer, ADR 0002.)"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from streamapp.serdes import serde_for
from streamapp.windowed import Windowed
from streamapp_harness import (
    KafkaTestClient,
    StreamAppInstance,
    color_events,
    count_by_color_topology,
    expected_color_counts,
    expected_windowed_color_counts,
    timed_color_events,
    unique,
    wait_for,
    windowed_count_by_color_topology,
)

pytestmark = pytest.mark.integration

PARTITIONS = 2
EVENTS = 6000
COLORS = 3


def run_app(
    kafka: KafkaTestClient,
    workdir: Path,
    instances: list[StreamAppInstance],
    topology: Callable[[list[str], str], dict[str, Any]],
    events: list[tuple[str, dict[str, Any]]],
    expected: dict[Any, int],
    output_key: Callable[[bytes], Any],
    **config: object,
) -> tuple[int, int]:
    """Run ``topology`` over ``events`` produced before the app starts; returns the number of output records other
    than tombstones once the latest long value per output key (``output_key`` of its bytes) is ``expected``, and
    the updates counted (the sum of ``expected``)."""
    app, source, output = unique("cache"), unique("events"), unique("counts")
    kafka.create_topics({source: PARTITIONS, output: PARTITIONS})
    kafka.produce(source, events)
    settings = {
        "application.id": app,
        "bootstrap.servers": kafka.bootstrap,
        "commit.interval.ms": 5000,
        "state.dir": str(workdir / app),
        **config,
    }
    instance = StreamAppInstance(workdir, topology([source], output), settings)
    instances.append(instance.start())

    def exact() -> bool:
        latest: dict[bytes, bytes] = {}
        for _, _, key, value in kafka.read_all(output):
            if key is not None and value is None:
                latest.pop(key, None)  # a tombstone (a session merged away)
            elif key is not None:
                latest[key] = value
        return {output_key(key): int.from_bytes(value, "big", signed=True) for key, value in latest.items()} == (
            expected
        )

    wait_for(exact, 120, "exact counts", 1.0)
    instance.stop()
    return sum(1 for _, _, _, value in kafka.read_all(output) if value is not None), sum(expected.values())


def run_count(
    kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance], **config: object
) -> tuple[int, int]:
    """Count EVENTS records of COLORS hot keys; returns the number of output records and of updates counted."""
    events = color_events(0, EVENTS, colors=COLORS)
    expected = expected_color_counts(events)
    return run_app(kafka, workdir, instances, count_by_color_topology, events, expected, bytes.decode, **config)


def run_windowed_count(
    kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance], **config: object
) -> tuple[int, int]:
    """Count EVENTS timed records per colour and 1 s window; returns the number of output records and of updates
    counted."""
    events = timed_color_events(0, EVENTS, colors=COLORS)
    expected = expected_windowed_color_counts(events)
    topology = windowed_count_by_color_topology
    return run_app(kafka, workdir, instances, topology, events, expected, lambda key: key, **config)


def test_a_hot_key_reaches_output_and_changelog_once_per_commit_with_the_default_cache(
    kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance]
) -> None:
    outputs, counted = run_count(kafka, workdir, instances)
    assert outputs < counted / 10, f"{outputs} output records for {counted} counted: the cache did not merge updates"


def test_a_cache_of_zero_bytes_forwards_every_update(
    kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance]
) -> None:
    outputs, counted = run_count(kafka, workdir, instances, **{"statestore.cache.max.bytes": 0})
    assert outputs == counted


def test_a_windows_count_reaches_output_once_per_commit_with_the_default_cache(
    kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance]
) -> None:
    outputs, counted = run_windowed_count(kafka, workdir, instances)
    assert outputs < counted / 10, f"{outputs} output records for {counted} counted: the cache did not merge updates"


def test_a_cache_of_zero_bytes_forwards_every_window_update(
    kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance]
) -> None:
    outputs, counted = run_windowed_count(kafka, workdir, instances, **{"statestore.cache.max.bytes": 0})
    assert outputs == counted


SESSION_GAP_MS = 1_000


def counted_times(events: list[tuple[str, dict[str, Any]]]) -> dict[str, list[int]]:
    """The event times (ms) of the records each colour counts (``n % 3 != 0``), by colour."""
    times: dict[str, list[int]] = {}
    for _, value in events:
        if value["n"] % 3 != 0:
            times.setdefault(value["color"], []).append(value["ts"])
    return times


def session_count_by_color_topology(sources: list[str], output: str) -> dict[str, Any]:
    """``windowed_count_by_color_topology`` with session windows (gap 1 s, grace 1 h) in session store
    ``session-counts``; output key: colour + end + start (Kafka's SessionWindowedSerializer)."""
    topology = windowed_count_by_color_topology(sources, output)
    for node in topology["nodes"]:
        if node["type"] == "windowed_count":
            node["store"] = "session-counts"
            node["windows"] = {"type": "session", "gapMs": SESSION_GAP_MS, "graceMs": 3_600_000}
        elif node["type"] == "sink":
            node["keySerde"] = "session_windowed:string"
    topology["stores"] = [
        {
            "name": "session-counts",
            "type": "session",
            "keySerde": "string",
            "valueSerde": "long",
            "retentionMs": 3_600_000 + SESSION_GAP_MS,
        }
    ]
    return topology


def run_session_count(
    kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance], **config: object
) -> tuple[int, int]:
    """Count EVENTS timed records per colour and session (each colour's records are 21 or 42 ms apart: one
    session per colour); returns the number of output records other than tombstones and of updates counted."""
    events = timed_color_events(0, EVENTS, colors=COLORS)
    times = counted_times(events)
    expected = {Windowed(color, min(ts), max(ts)): len(ts) for color, ts in times.items()}
    sessions = serde_for("session_windowed:string")
    topology = session_count_by_color_topology
    return run_app(kafka, workdir, instances, topology, events, expected, sessions.deserialize, **config)


def test_a_sessions_count_reaches_output_once_per_commit_with_the_default_cache(
    kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance]
) -> None:
    outputs, counted = run_session_count(kafka, workdir, instances)
    assert outputs < counted / 10, f"{outputs} output records for {counted} counted: the cache did not merge updates"


def test_a_cache_of_zero_bytes_forwards_every_session_update(
    kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance]
) -> None:
    outputs, counted = run_session_count(kafka, workdir, instances, **{"statestore.cache.max.bytes": 0})
    assert outputs == counted


SLIDING_DIFFERENCE_MS = 1_000


def sliding_count_by_color_topology(sources: list[str], output: str) -> dict[str, Any]:
    """``windowed_count_by_color_topology`` with sliding windows (time difference 1 s, grace 1 h) in window store
    ``sliding-counts``; output key: colour + window start (Kafka's TimeWindowedSerializer)."""
    topology = windowed_count_by_color_topology(sources, output)
    for node in topology["nodes"]:
        if node["type"] == "windowed_count":
            node["store"] = "sliding-counts"
            node["windows"] = {"type": "sliding", "timeDifferenceMs": SLIDING_DIFFERENCE_MS, "graceMs": 3_600_000}
        elif node["type"] == "sink":
            node["keySerde"] = f"windowed:string:{SLIDING_DIFFERENCE_MS}"
    topology["stores"] = [
        {
            "name": "sliding-counts",
            "type": "window",
            "keySerde": "string",
            "valueSerde": "long",
            "retentionMs": 3_600_000 + 2 * SLIDING_DIFFERENCE_MS,
            "windowSizeMs": SLIDING_DIFFERENCE_MS,
        }
    ]
    return topology


def sliding_counts(times: list[int], difference: int) -> dict[tuple[int, int], int]:
    """Kafka's sliding windows of records at ``times`` (ms, none late, all >= ``difference``) and their counts:
    each record's left window ``[t - d, t]``, and its right window ``[t + 1, t + 1 + d]`` when a record follows
    within ``d``; a window counts the records in it (both bounds inclusive)."""
    times = sorted(times)

    def records_in(start: int, end: int) -> int:
        return bisect.bisect_right(times, end) - bisect.bisect_left(times, start)

    windows: dict[tuple[int, int], int] = {}
    for t in times:
        windows[(t - difference, t)] = records_in(t - difference, t)
        if records_in(t + 1, t + difference):
            windows[(t + 1, t + 1 + difference)] = records_in(t + 1, t + 1 + difference)
    return windows


def test_a_sliding_windows_count_reaches_output_once_per_commit_with_the_default_cache(
    kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance]
) -> None:
    events = timed_color_events(0, EVENTS, colors=COLORS)
    times = counted_times(events)
    expected = {
        Windowed(color, start, end): count
        for color, ts in times.items()
        for (start, end), count in sliding_counts(ts, SLIDING_DIFFERENCE_MS).items()
    }
    keys = serde_for(f"windowed:string:{SLIDING_DIFFERENCE_MS}")
    topology = sliding_count_by_color_topology
    outputs, counted = run_app(kafka, workdir, instances, topology, events, expected, keys.deserialize)
    assert outputs < counted / 10, f"{outputs} output records for {counted} counted: the cache did not merge updates"
