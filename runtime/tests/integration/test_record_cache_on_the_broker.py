"""The record cache on the real broker (KIP-63, docs/record-cache.md): with Kafka's default size a hot key's count
reaches the output once per commit, not once per record, and the final counts stay exact;
``statestore.cache.max.bytes: 0`` forwards one update per record. (The changelog gets a key's last value per
commit either way: the logged store's write buffer, ADR 0002.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from streamapp_harness import (
    KafkaTestClient,
    StreamAppInstance,
    color_events,
    count_by_color_topology,
    expected_color_counts,
    unique,
    wait_for,
)

pytestmark = pytest.mark.integration

PARTITIONS = 2
EVENTS = 6000
COLORS = 3


def run_count(
    kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance], **config: object
) -> tuple[int, int]:
    """Count EVENTS records of COLORS hot keys produced before the app starts; returns the number of output
    records once the counts are exact."""
    app, source, output = unique("cache"), unique("events"), unique("counts")
    kafka.create_topics({source: PARTITIONS, output: PARTITIONS})
    events = color_events(0, EVENTS, colors=COLORS)
    kafka.produce(source, events)
    settings = {
        "application.id": app,
        "bootstrap.servers": kafka.bootstrap,
        "commit.interval.ms": 5000,
        "state.dir": str(workdir / app),
        **config,
    }
    instance = StreamAppInstance(workdir, count_by_color_topology([source], output), settings)
    instances.append(instance.start())
    expected = expected_color_counts(events)
    wait_for(lambda: kafka.latest_longs(output) == expected, 120, "exact counts", 1.0)
    instance.stop()
    return len(kafka.read_all(output))


def test_a_hot_key_reaches_output_and_changelog_once_per_commit_with_the_default_cache(
    kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance]
) -> None:
    counted = sum(expected_color_counts(color_events(0, EVENTS, colors=COLORS)).values())
    outputs = run_count(kafka, workdir, instances)
    assert outputs < counted / 10, f"{outputs} output records for {counted} counted: the cache did not merge updates"


def test_a_cache_of_zero_bytes_forwards_every_update(
    kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance]
) -> None:
    counted = sum(expected_color_counts(color_events(0, EVENTS, colors=COLORS)).values())
    assert run_count(kafka, workdir, instances, **{"statestore.cache.max.bytes": 0}) == counted
