"""A stream thread records Kafka Streams' metrics as ``metrics.recording.level`` asks (``streamapp.sensors``): INFO
has the thread metrics, the task's dropped records and the source and terminal nodes' end-to-end latency; DEBUG
adds the task and node process counts and the stores' put and get; TRACE adds the stores' end-to-end latency.
The level never changes what the application computes."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from harness import OUTPUT, ThreadHarness, latest_counts, new_cluster, produce_events
from streamapp.processing.status import WorkerStatus
from streamapp.sensors import NODE_GROUP, STATE_GROUP, TASK_GROUP, THREAD_GROUP

EVENTS = [(n, color) for n, color in zip(range(20), ["red", "blue"] * 10, strict=True)]  # 10 even, all "red"
NOW_MS = 10_000
"""The thread's wall clock; the events have timestamps 1000 + i."""


def _run(tmp_path: Path, level: str | None) -> tuple[ThreadHarness, WorkerStatus]:
    cluster = new_cluster()
    produce_events(cluster, EVENTS)
    config = {"commit.interval.ms": 0, **({"metrics.recording.level": level} if level else {})}
    harness = ThreadHarness(cluster, tmp_path, **config)
    thread = harness.start(clock_ms=lambda: NOW_MS)
    harness.assign_all()
    harness.run(20)
    return harness, thread.status()


def _names(status: WorkerStatus) -> set[tuple[str, str]]:
    return {(group, name) for group, name, _, _ in status.kafka_metrics}


def _values(status: WorkerStatus, group: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {tuple(sorted(tags.items())): value for g, n, tags, value in status.kafka_metrics if (g, n) == (group, name)}


def _by_node(status: WorkerStatus, name: str) -> dict[str, list[float]]:
    """The values of a node-level metric per node, over the tasks."""
    nodes: dict[str, list[float]] = {}
    for tags, value in _values(status, NODE_GROUP, name).items():
        nodes.setdefault(dict(tags)["processor-node-id"], []).append(value)
    return nodes


def test_info_records_thread_metrics_drops_and_e2e_latency_at_source_and_terminal_nodes_only(tmp_path: Path) -> None:
    harness, status = _run(tmp_path, None)

    assert latest_counts(harness.cluster) == {"red": 10}
    names = _names(status)
    assert {(THREAD_GROUP, "process-total"), (THREAD_GROUP, "commit-latency-max")} <= names
    assert (TASK_GROUP, "dropped-records-total") in names
    assert not any(group == STATE_GROUP for group, _ in names)
    assert (NODE_GROUP, "process-total") not in names and (TASK_GROUP, "process-total") not in names
    (processed,) = _values(status, THREAD_GROUP, "process-total").values()
    assert processed == 20 + 10  # the events, then the repartitioned even ones
    assert list(_values(status, THREAD_GROUP, "task-created-total").values()) == [4]  # 2 sub-topologies x 2 partitions
    e2e_max = _by_node(status, "record-e2e-latency-max")
    assert set(e2e_max) == {"events", "per-color", "out"}  # sources and terminal nodes (a repartition writes and reads)
    assert max(e2e_max["events"]) == NOW_MS - 1_000  # wall clock minus the oldest record's timestamp
    assert min(_by_node(status, "record-e2e-latency-min")["events"]) == NOW_MS - 1_019
    out = [v for v in e2e_max["out"] if not math.isnan(v)]  # NaN: the task (partition) that had no record
    assert len(out) == 1 and NOW_MS - 1_019 <= out[0] <= NOW_MS - 1_000  # an update has a counted record's timestamp


@pytest.mark.parametrize("level", ["DEBUG", "TRACE"])
def test_debug_adds_process_counts_per_task_and_node_and_store_puts_and_gets(tmp_path: Path, level: str) -> None:
    harness, status = _run(tmp_path, level)

    assert latest_counts(harness.cluster) == {"red": 10}
    node_counts = {node: sum(values) for node, values in _by_node(status, "process-total").items()}
    assert node_counts["events"] == 20 and node_counts["even"] == 20 and node_counts["by-color"] == 10
    assert node_counts["count"] == 10
    assert node_counts["out"] == len(harness.cluster.records(OUTPUT))  # the cache's flushes, not every update
    assert sum(_values(status, TASK_GROUP, "process-total").values()) == 30
    puts = _values(status, STATE_GROUP, "put-total")
    assert {dict(tags)["rocksdb-state-id"] for tags in puts} == {"counts"}  # only the sub-topology that owns it
    assert sum(puts.values()) == 10 and sum(_values(status, STATE_GROUP, "get-total").values()) == 10
    assert max(v for v in _values(status, STATE_GROUP, "put-latency-max").values() if not math.isnan(v)) > 0  # ns
    store_e2e = _values(status, STATE_GROUP, "record-e2e-latency-max")
    if level == "TRACE":
        assert [v for v in store_e2e.values() if not math.isnan(v)] == [NOW_MS - 1_000]
    else:
        assert store_e2e == {}


def test_the_output_is_the_same_at_every_level(tmp_path: Path) -> None:
    outputs = []
    for level in ("INFO", "DEBUG", "TRACE"):
        harness, _ = _run(tmp_path / level, level)
        outputs.append([(r.key, r.value, r.timestamp) for r in harness.cluster.records(OUTPUT)])
    assert outputs[0] == outputs[1] == outputs[2]
