"""Kafka Streams' sensors (``streamapp.sensors``): avg / min / max over Kafka's two 30 s samples, and each level
puts its wrappers in place only where it records (INFO costs nothing at non-terminal nodes and stores)."""

from __future__ import annotations

import math

from streamapp.sensors import NODE_GROUP, STATE_GROUP, MeteredKeyValueStore, RecordingLevel, TaskSensors, WindowedStat


def test_a_windowed_stat_is_over_the_current_and_the_previous_sample_then_nan() -> None:
    stat = WindowedStat(window_ms=1_000)
    stat.record(10, now_ms=0)
    stat.record(30, now_ms=500)
    stat.record(2, now_ms=1_200)  # a new sample; the first is still in the two-window horizon

    assert (stat.avg(1_200), stat.minimum(1_200), stat.maximum(1_200)) == (14, 2, 30)
    assert (stat.avg(2_100), stat.maximum(2_100)) == (2, 2)  # the first sample (started at 0) is older than 2 s
    assert math.isnan(stat.avg(3_300)) and math.isnan(stat.minimum(3_300)) and math.isnan(stat.maximum(3_300))


class _Store:
    cached = False

    def __init__(self) -> None:
        self.data: dict[object, object] = {}

    def put(self, key: object, value: object, timestamp: int = -1) -> None:
        self.data[key] = value

    def get(self, key: object) -> object:
        return self.data.get(key)


class _Node:
    def __init__(self) -> None:
        self.seen: list[int] = []

    def process(self, key: object, value: object, timestamp: int) -> None:
        self.seen.append(timestamp)


def test_info_wraps_only_terminal_nodes_and_no_store() -> None:
    sensors = TaskSensors(RecordingLevel.INFO)
    node, store = _Node(), _Store()

    assert sensors.node("map", node, terminal=False) is node
    assert sensors.store("rocksdb", "counts", store) is store
    sink = sensors.node("out", node, terminal=True)
    sensors.now_ms = 5_000
    sink.process("k", "v", 4_000)

    assert node.seen == [4_000]
    samples = {
        (g, n, tuple(tags.values())): v
        for g, n, tags, v in sensors.samples("t-1", "0_0", 5_000, processed=1, dropped=0, lateness={})
    }
    assert samples[(NODE_GROUP, "record-e2e-latency-max", ("t-1", "0_0", "out"))] == 1_000
    assert not any(n == "process-total" and g == NODE_GROUP for g, n, _ in samples)


def test_debug_meters_store_puts_and_gets_and_trace_adds_their_e2e_latency() -> None:
    for level in (RecordingLevel.DEBUG, RecordingLevel.TRACE):
        sensors = TaskSensors(level)
        sensors.now_ms, sensors.timestamp = 9_000, lambda: 8_000
        store = sensors.store("rocksdb", "counts", _Store())
        assert isinstance(store, MeteredKeyValueStore)

        store.put("a", 1)
        assert store.get("a") == 1 and store.get("b") is None and store.cached is False

        samples = {
            (g, n): v for g, n, _, v in sensors.samples("t-1", "0_0", 9_000, processed=0, dropped=0, lateness={})
        }
        assert samples[(STATE_GROUP, "put-total")] == 1 and samples[(STATE_GROUP, "get-total")] == 2
        assert samples[(STATE_GROUP, "get-latency-max")] > 0
        assert samples.get((STATE_GROUP, "record-e2e-latency-max")) == (
            1_000 if level is RecordingLevel.TRACE else None
        )
