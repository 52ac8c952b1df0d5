"""The purge of consumed repartition records (``repartition.purge.interval.ms``) on the real broker.

A ``streamapp run`` instance counts events per colour through a repartition topic (``select_key`` → repartition
→ ``count``) with a short purge interval. While input is produced, the repartition topic's low watermark (its
earliest offset) is sampled together with the group's committed offset: it must never pass it (no record is
deleted before the commit that consumed it). In the end the low watermark reached the committed offset, the
counts are exact, and a restarted instance resumes from the committed offsets and stays exact (nothing it
needed was deleted). Under both processing guarantees (under ``exactly_once_v2`` the offsets are committed in
transactions).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient
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


class Offsets:
    """Low watermarks of a topic and a group's committed offsets on it, read from the broker."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self.topic = topic
        self.group = group
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.probe = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("probe")})

    def low_watermarks(self) -> dict[int, int]:
        return {
            p: self.probe.get_watermark_offsets(KafkaTopicPartition(self.topic, p), timeout=10)[0]
            for p in range(PARTITIONS)
        }

    def committed(self) -> dict[int, int]:
        request = ConsumerGroupTopicPartitions(
            self.group, [KafkaTopicPartition(self.topic, p) for p in range(PARTITIONS)]
        )
        result = self.admin.list_consumer_group_offsets([request])[self.group].result(timeout=10)
        return {tp.partition: tp.offset for tp in result.topic_partitions if tp.offset >= 0}

    def check_never_beyond_committed(self) -> tuple[dict[int, int], dict[int, int]]:
        """Low watermarks, then committed offsets (read after: committed offsets only grow, so ``low <=
        committed`` here means no record was deleted before its commit)."""
        low = self.low_watermarks()
        committed = self.committed()
        for p, mark in low.items():
            assert mark <= committed.get(p, 0), f"{self.topic}-{p}: low watermark {mark} > committed {committed}"
        return low, committed

    def close(self) -> None:
        self.probe.close()


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_repartition_records_are_purged_up_to_the_committed_offsets_and_counts_stay_exact(
    kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance], guarantee: str
) -> None:
    app, source, output = unique("purge"), unique("events"), unique("counts")
    kafka.create_topics({source: PARTITIONS, output: PARTITIONS})
    config = {
        "application.id": app,
        "bootstrap.servers": kafka.bootstrap,
        "processing.guarantee": guarantee,
        "commit.interval.ms": 200,
        "repartition.purge.interval.ms": 500,
        "state.dir": str(workdir / "state"),
    }
    topology = count_by_color_topology([source], output)
    instance = StreamAppInstance(workdir / "first", topology, config)
    instances.append(instance.start())
    instance.wait_ready()
    offsets = Offsets(kafka.bootstrap, f"{app}-by-color-repartition", app)
    try:
        events = color_events(0, 6000, colors=11)
        samples = 0
        for start in range(0, 4000, 500):
            kafka.produce(source, events[start : start + 500])
            offsets.check_never_beyond_committed()
            samples += 1
            time.sleep(0.3)
        first = events[:4000]
        wait_for(lambda: kafka.latest_longs(output) == expected_color_counts(first), 120, "exact counts", 1.0)

        def purged_to_committed() -> bool:
            nonlocal samples
            low, committed = offsets.check_never_beyond_committed()
            samples += 1
            return all(0 < low[p] == committed.get(p) for p in range(PARTITIONS))

        wait_for(purged_to_committed, 60, "the low watermarks to reach the committed offsets", 0.5)
        low = offsets.low_watermarks()
        ends = kafka.end_offsets(f"{app}-by-color-repartition")
        print(f"{guarantee}: low watermarks {low}, end offsets {ends}, {samples} samples low <= committed")
        assert instance.stop() == 0

        # a restarted instance starts at the committed offsets, which the purge never passed
        restarted = StreamAppInstance(workdir / "second", topology, config)
        instances.append(restarted.start())
        restarted.wait_ready()
        kafka.produce(source, events[4000:])
        wait_for(lambda: kafka.latest_longs(output) == expected_color_counts(events), 120, "exact counts", 1.0)
        offsets.check_never_beyond_committed()
        assert restarted.stop() == 0
    finally:
        offsets.close()
