"""A stream thread catching up lets its tasks take turns (Kafka's ``TaskExecutor``: a bounded slice per task per
pass, round-robin), paced by stream time within a sub-topology, so the tasks writing one repartition topic stay
close in event time even though a poll returns one partition's backlog before the next one's."""

from __future__ import annotations

import json
from pathlib import Path

from harness import EVENTS, PARTITIONS, REPARTITION, ThreadHarness, new_cluster
from kafka_fakes import FakeCluster
from streamapp.processing.stream_thread import MAX_TASK_SLICE

BACKLOG = 400
"""Even events per input partition; partition p's event i is at ``1000 + 2 * i + p`` ms (the partitions interleave)."""


def produce_backlog(cluster: FakeCluster) -> None:
    for p in range(PARTITIONS):
        for i in range(BACKLOG):
            value = json.dumps({"n": 2 * i, "color": "red"}).encode()
            cluster.append(EVENTS, p, f"p{p}-{i}".encode(), value, timestamp=1_000 + 2 * i + p)


def largest_step_back(timestamps: list[int]) -> int:
    """How far (ms) a timestamp lies behind the largest one before it, at most."""
    highest, back = -1, 0
    for timestamp in timestamps:
        back = max(back, highest - timestamp)
        highest = max(highest, timestamp)
    return back


def test_the_tasks_writing_a_repartition_topic_stay_within_a_slice_of_each_other_in_a_catch_up(tmp_path: Path) -> None:
    cluster = new_cluster()
    produce_backlog(cluster)
    harness = ThreadHarness(cluster, tmp_path, **{"commit.interval.ms": 3_600_000})
    thread = harness.start()
    harness.assign_all()

    harness.run(200, until=lambda: len(cluster.records(REPARTITION)) == PARTITIONS * BACKLOG)
    thread.commit()

    assert len(cluster.records(REPARTITION)) == PARTITIONS * BACKLOG
    for p in range(PARTITIONS):
        written = [record.timestamp for record in cluster.topics[REPARTITION][p]]
        # one task's slice ahead at most (2 ms per event), where one task's whole backlog first is 800 ms
        assert largest_step_back(written) <= 2 * MAX_TASK_SLICE + 2, f"repartition partition {p}"


def test_a_poll_takes_no_more_than_the_room_left_in_the_threads_buffer(tmp_path: Path) -> None:
    cluster = new_cluster()
    produce_backlog(cluster)
    harness = ThreadHarness(cluster, tmp_path, **{"buffered.records.per.partition": 100})
    thread = harness.start()
    harness.assign_all()  # 4 input partitions: the thread buffers at most 400 records
    taken: list[int] = []
    poll = harness.consumer.poll

    def recording_poll(max_records: int, timeout_s: float) -> list[object]:
        records = poll(max_records, timeout_s)
        taken.append(len(records))
        return records  # type: ignore[return-value]

    harness.consumer.poll = recording_poll  # type: ignore[method-assign]
    harness.run(5)

    buffered = sum(task.input.buffered() for task in thread.tasks.tasks.values())
    assert taken and max(taken) <= 4 * 100 and buffered <= 4 * 100
