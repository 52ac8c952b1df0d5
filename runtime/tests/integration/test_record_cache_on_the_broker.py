"""The record cache on the real broker (KIP-63, docs/record-cache.md): with Kafka's default size a hot key's count,
and a window's count (Kafka's CachingWindowStore), reaches the output once per commit, not once per record, and the
final counts stay exact; ``statestore.cache.max.bytes: 0`` forwards one update per record. (The changelog gets a
key's last value per commit either way: the logged store's write buffer, ADR 0002.)"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
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
    """Run ``topology`` over ``events`` produced before the app starts; returns the number of output records once
    the latest long value per output key (``output_key`` of its bytes) is ``expected``, and the updates counted
    (the sum of ``expected``)."""
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
        latest = {key: value for _, _, key, value in kafka.read_all(output) if key is not None}
        return {output_key(key): int.from_bytes(value or b"", "big", signed=True) for key, value in latest.items()} == (
            expected
        )

    wait_for(exact, 120, "exact counts", 1.0)
    instance.stop()
    return len(kafka.read_all(output)), sum(expected.values())


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
