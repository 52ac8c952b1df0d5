"""The purge of committed repartition records (Kafka Streams' ``repartition.purge.interval.ms``), over fakes.

The decision (``streamapp.processing.purge``): which offsets (committed ones of repartition partitions only),
when (more than the interval since the last purge), and how (one request in flight, failures ignored); and a
stream thread over the Kafka fakes that purges only what its group committed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness import EVENTS, PARTITIONS, REPARTITION, ThreadHarness, new_cluster, produce_events
from kafka_fakes import FakeCluster, FakeRecordsDeleter
from streamapp.kafka.types import KafkaClientError, TopicPartition
from streamapp.processing.purge import CommittedRecordsPurger, purge_due, purgeable_offsets, repartition_topics
from streamapp.processing.stream_thread import StreamThread
from streamapp.topology import TopologyDescription

REP0, REP1 = TopicPartition(REPARTITION, 0), TopicPartition(REPARTITION, 1)
EV0 = TopicPartition(EVENTS, 0)
EVENTS_1 = [(2, "red"), (4, "blue"), (6, "red"), (7, "red"), (8, "green"), (10, "red"), (11, "blue"), (12, "red")]


# -- which offsets ---------------------------------------------------------------------------------


def test_only_committed_offsets_of_repartition_partitions_are_purgeable() -> None:
    committed = {REP0: 7, EV0: 12, REP1: 0}
    assert purgeable_offsets(committed, {REP0, EV0, REP1}, {REPARTITION}) == {REP0: 7}


def test_a_partition_the_task_no_longer_reads_is_not_purged_by_it() -> None:
    assert purgeable_offsets({REP0: 7, REP1: 3}, {REP1}, {REPARTITION}) == {REP1: 3}


def test_repartition_topics_are_the_internal_source_topics_only(tmp_path: Path) -> None:
    description = ThreadHarness(new_cluster(), tmp_path).description
    assert repartition_topics(description, "app") == frozenset({REPARTITION})
    no_repartition = TopologyDescription.from_dict(
        {
            "nodes": [
                {"name": "in", "type": "source", "topics": ["a"], "keySerde": "string", "valueSerde": "string"},
                {
                    "name": "out",
                    "type": "sink",
                    "input": "in",
                    "topic": "b",
                    "keySerde": "string",
                    "valueSerde": "string",
                },
            ]
        }
    )
    assert repartition_topics(no_repartition, "app") == frozenset()


# -- when ------------------------------------------------------------------------------------------


def test_a_purge_is_due_only_after_more_than_the_interval() -> None:
    assert not purge_due(now_ms=31_000, last_purge_ms=1_000, interval_ms=30_000)
    assert purge_due(now_ms=31_001, last_purge_ms=1_000, interval_ms=30_000)
    assert purge_due(now_ms=1_700_000_000_000, last_purge_ms=0, interval_ms=30_000)  # the first check fires


# -- how -------------------------------------------------------------------------------------------


def test_one_delete_request_is_outstanding_at_a_time() -> None:
    deleter = FakeRecordsDeleter()
    deleter.hold = True
    purger = CommittedRecordsPurger(deleter)
    assert purger.maybe_purge({REP0: 5})
    assert purger.in_flight
    assert not purger.maybe_purge({REP0: 9})
    assert [r.offsets for r in deleter.requests] == [{REP0: 5}]
    deleter.answer()
    assert not purger.in_flight
    assert purger.maybe_purge({REP0: 9})
    assert [r.offsets for r in deleter.requests] == [{REP0: 5}, {REP0: 9}]
    deleter.answer()
    purger.maybe_purge({})
    assert purger.purged_offsets == {REP0: 9}


def test_a_failed_delete_request_is_ignored_and_newer_offsets_are_sent_next_time() -> None:
    deleter = FakeRecordsDeleter()
    deleter.fail_with = "Broker: Topic authorization failed"
    purger = CommittedRecordsPurger(deleter)
    assert purger.maybe_purge({REP0: 5})
    deleter.fail_with = None
    assert purger.maybe_purge({REP0: 8})
    assert purger.requests_failed == 1 and purger.requests_sent == 2
    assert deleter.low_watermarks == {REP0: 8}


def test_a_delete_request_that_cannot_be_sent_does_not_raise() -> None:
    deleter = FakeRecordsDeleter()
    deleter.raise_on_send = KafkaClientError("cannot send delete-records: all brokers down")
    purger = CommittedRecordsPurger(deleter)
    assert not purger.maybe_purge({REP0: 5})
    assert purger.requests_failed == 1 and not purger.in_flight
    assert purger.maybe_purge({REP0: 5})
    assert deleter.low_watermarks == {REP0: 5}


def test_nothing_to_purge_sends_no_request() -> None:
    deleter = FakeRecordsDeleter()
    assert not CommittedRecordsPurger(deleter).maybe_purge({})
    assert deleter.requests == []


# -- a stream thread -------------------------------------------------------------------------------


class Clock:
    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


class PurgingHarness(ThreadHarness):
    """The count topology's thread (harness.py) with a records deleter and a hand-driven wall clock."""

    def __init__(self, cluster: FakeCluster, state_dir: Path, **config: Any) -> None:
        super().__init__(cluster, state_dir, **config)
        self.deleter = FakeRecordsDeleter(cluster)
        self.clock = Clock(1_700_000_000_000)

    def start(self, **thread_options: Any) -> StreamThread:
        return super().start(clock_ms=self.clock, records_deleter=self.deleter, **thread_options)

    def repartition_committed(self) -> dict[TopicPartition, int]:
        return {tp: o for tp, o in self.cluster.committed.items() if tp.topic == REPARTITION and o > 0}


def test_committed_repartition_records_are_purged_once_the_interval_passed(tmp_path: Path) -> None:
    cluster = new_cluster()
    produce_events(cluster, EVENTS_1)
    h = PurgingHarness(cluster, tmp_path, **{"commit.interval.ms": 0, "repartition.purge.interval.ms": 1_000})
    h.start()
    h.assign_all()
    h.run(1)  # the first check fires at once, before any commit: nothing to send
    h.run(20)
    committed = h.repartition_committed()
    assert committed, "the count sub-topology committed repartition offsets"
    assert h.deleter.requests == []
    h.clock.now_ms += 1_000
    h.run(1)
    assert h.deleter.requests == [], "exactly the interval is not more than the interval"
    h.clock.now_ms += 1
    h.run(1)
    assert [r.offsets for r in h.deleter.requests] == [committed]
    assert h.deleter.low_watermarks == committed
    assert all(tp.topic == REPARTITION for tp in h.deleter.low_watermarks), "input topics are never purged"


def test_purged_offsets_never_pass_the_group_committed_offsets(tmp_path: Path) -> None:
    cluster = new_cluster()
    produce_events(cluster, EVENTS_1 * 2)
    config = {"commit.interval.ms": 3_600_000, "repartition.purge.interval.ms": 0, "max.poll.records": 2}
    h = PurgingHarness(cluster, tmp_path, **config)
    thread = h.start()
    h.assign_all()
    for i in range(40):
        h.clock.now_ms += 1
        thread.run_once()
        if i % 7 == 6:
            thread.commit()
    assert len(h.deleter.requests) >= 2, "purges ran between commits"
    for request in h.deleter.requests:
        for tp, offset in request.offsets.items():
            assert 0 < offset <= request.committed_when_sent[tp]
    thread.commit()
    h.clock.now_ms += 1
    thread.run_once()
    assert h.deleter.low_watermarks == h.repartition_committed()


def test_processed_but_uncommitted_records_are_never_purged(tmp_path: Path) -> None:
    cluster = new_cluster()
    produce_events(cluster, EVENTS_1)
    h = PurgingHarness(cluster, tmp_path, **{"commit.interval.ms": 3_600_000, "repartition.purge.interval.ms": 0})
    thread = h.start()
    h.assign_all()

    def run(iterations: int) -> None:
        for _ in range(iterations):
            h.clock.now_ms += 1
            thread.run_once()

    run(10)
    h.consumer.fail_next_commit = True
    thread.commit()  # the flush writes the repartition records, the offset commit fails: tasks revived
    run(10)
    processed = {tp: o for task in thread.tasks.tasks.values() for tp, o in task.consumed_offsets.items()}
    assert any(tp.topic == REPARTITION and o > 0 for tp, o in processed.items()), "repartition records processed"
    assert h.repartition_committed() == {}
    h.consumer.fail_next_commit = True
    thread.commit()
    run(10)
    assert h.deleter.requests == []
    thread.commit()
    run(1)
    assert h.repartition_committed()
    assert [r.offsets for r in h.deleter.requests] == [h.repartition_committed()]


def test_every_repartition_partition_is_purged_to_its_end_once_consumed_and_committed(tmp_path: Path) -> None:
    cluster = new_cluster()
    produce_events(cluster, EVENTS_1 * 3)
    h = PurgingHarness(cluster, tmp_path, **{"commit.interval.ms": 0, "repartition.purge.interval.ms": 0})
    h.start()
    h.assign_all()
    for _ in range(40):
        h.clock.now_ms += 1
        h.run(1)
    assert set(h.deleter.low_watermarks) == {TopicPartition(REPARTITION, p) for p in range(PARTITIONS)}
    assert h.deleter.low_watermarks == {tp: cluster.end_offset(tp) for tp in h.deleter.low_watermarks}, (
        "everything consumed and committed was purged"
    )
