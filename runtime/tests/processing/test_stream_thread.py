"""A stream thread over the Kafka fakes: processing, commits, restore and rebalances (no broker)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from harness import (
    CHANGELOG,
    EVENTS,
    OUTPUT,
    REPARTITION,
    ThreadHarness,
    latest_counts,
    new_cluster,
    produce_events,
)
from kafka_fakes import FakeCluster
from streamapp.kafka.types import DeliveryError, TopicPartition
from streamapp.processing.stream_thread import StreamThread
from streamapp.processing.task import ProcessingError, TaskId
from streamapp.state import timestamped
from streamapp.state.checkpoint import OffsetCheckpoint
from streamapp.state.rocksdb import StoreLockedError

EVENTS_1 = [(2, "red"), (4, "blue"), (6, "red"), (7, "red"), (8, "green"), (10, "red"), (11, "blue")]
EXPECTED_1 = {"red": 3, "blue": 1, "green": 1}


def test_counts_are_exact_through_the_repartition_topic(tmp_path: Path) -> None:
    cluster = new_cluster()
    produce_events(cluster, EVENTS_1)
    h = ThreadHarness(cluster, tmp_path, **{"commit.interval.ms": 0})
    h.start()
    h.assign_all()
    h.run(30)
    assert latest_counts(cluster) == EXPECTED_1
    assert latest_counts(cluster, CHANGELOG) == EXPECTED_1
    # every input record was committed
    assert cluster.committed[TopicPartition(EVENTS, 0)] == 4
    assert cluster.committed[TopicPartition(EVENTS, 1)] == 3


def test_repartition_records_land_on_the_murmur2_partition_of_the_new_key(tmp_path: Path) -> None:
    from streamapp.partitioner import partition_for_key

    cluster = new_cluster()
    produce_events(cluster, EVENTS_1)
    h = ThreadHarness(cluster, tmp_path, **{"commit.interval.ms": 0})
    h.start()
    h.assign_all()
    h.run(10)
    records = cluster.records(REPARTITION)
    assert records
    for record in records:
        assert record.key is not None
        assert record.partition == partition_for_key(record.key, 2)


def test_store_writes_reach_rocksdb_only_after_the_offsets_are_committed(tmp_path: Path) -> None:
    cluster = new_cluster()
    produce_events(cluster, EVENTS_1)
    h = ThreadHarness(cluster, tmp_path, **{"commit.interval.ms": 3_600_000})
    thread = h.start()
    h.assign_all()
    h.run(10)
    tasks = [t for t in thread.tasks.tasks.values() if t.stores]
    assert tasks and all(t.has_pending_writes() or not t.consumed_offsets for t in tasks)
    assert all(t.stores["counts"].inner.changelog_offset() is None for t in tasks)
    assert cluster.records(CHANGELOG) == []
    thread.commit()
    for task in tasks:
        store = task.stores["counts"]
        assert not store.has_pending
        if task.consumed_offsets:
            assert store.inner.changelog_offset() == cluster.end_offset(store.changelog) - 1
            assert OffsetCheckpoint(task.task_dir / ".checkpoint").read() == {
                store.changelog: store.inner.changelog_offset()
            }


def _count_after_one_commit(tmp_path: Path, cache_max_bytes: int) -> tuple[FakeCluster, StreamThread]:
    """A thread (commit interval 1 h) that committed once, so the counting task read the repartition records and
    ran; nothing it did since is committed unless the write buffer made it commit early."""
    cluster = new_cluster()
    produce_events(cluster, EVENTS_1)
    config = {"commit.interval.ms": 3_600_000, "statestore.cache.max.bytes": cache_max_bytes}
    h = ThreadHarness(cluster, tmp_path, **config)
    thread = h.start()
    h.assign_all()
    h.run(10)
    thread.commit()
    h.run(10)
    return cluster, thread


def test_with_the_record_cache_off_a_thread_still_commits_at_its_interval_not_after_every_poll(
    tmp_path: Path,
) -> None:
    """``statestore.cache.max.bytes=0`` turns the cache off; the write buffer then commits early only above Kafka's
    default 10 MiB, not whenever it holds a write (which flushed the producer and committed offsets synchronously
    after every poll: the windowed benchmark spent three quarters of its time there)."""
    cluster, thread = _count_after_one_commit(tmp_path, cache_max_bytes=0)
    assert thread.tasks.pending_bytes > 0
    assert cluster.records(CHANGELOG) == []
    thread.commit()
    assert latest_counts(cluster) == EXPECTED_1
    assert latest_counts(cluster, CHANGELOG) == EXPECTED_1


def test_buffered_writes_above_the_cache_size_make_the_thread_commit_early(tmp_path: Path) -> None:
    cluster, _ = _count_after_one_commit(tmp_path, cache_max_bytes=1)
    assert latest_counts(cluster, CHANGELOG) == EXPECTED_1


def test_new_task_restores_its_store_from_the_changelog_before_processing(tmp_path: Path) -> None:
    cluster = new_cluster()
    produce_events(cluster, EVENTS_1)
    first = ThreadHarness(cluster, tmp_path / "a", **{"commit.interval.ms": 0})
    first.start()
    first.assign_all()
    first.run(30)
    assert first.thread is not None
    first.thread.tasks.close_all(clean=True)

    # a second thread with an empty state dir takes over and continues the counts exactly
    produce_events(cluster, [(12, "red"), (14, "blue")], partition=0)
    second = ThreadHarness(cluster, tmp_path / "b", **{"commit.interval.ms": 0})
    second.start()
    second.assign_all()
    second.run(30)
    assert latest_counts(cluster) == {"red": 4, "blue": 2, "green": 1}
    assert second.restore_consumer.records_read == len(cluster.records(CHANGELOG)) - 2


def test_restore_reads_only_the_changelog_tail_after_the_local_checkpoint(tmp_path: Path) -> None:
    cluster = new_cluster()
    produce_events(cluster, EVENTS_1)
    h = ThreadHarness(cluster, tmp_path, **{"commit.interval.ms": 0})
    h.start()
    h.assign_all()
    h.run(30)
    assert h.thread is not None
    h.thread.tasks.close_all(clean=True)
    # another instance wrote two more changelog records meanwhile
    longs = b"\x00\x00\x00\x00\x00\x00\x00\x09"
    cluster.append(CHANGELOG, 0, b"red", longs)
    cluster.append(CHANGELOG, 1, b"blue", longs)

    again = ThreadHarness(cluster, tmp_path, **{"commit.interval.ms": 0})
    thread = again.start()
    again.assign_all()
    again.run(5)
    assert again.restore_consumer.records_read == 2
    store = thread.tasks.tasks[TaskId(1, 0)].stores["counts"]
    assert store.get(b"red") == timestamped.encode(longs, 0)  # the count's store keeps the record's timestamp (0)


def test_assigned_partitions_stay_paused_until_the_task_is_restored(tmp_path: Path) -> None:
    cluster = new_cluster()
    h = ThreadHarness(cluster, tmp_path)
    thread = h.start()
    h.assign_all()
    assert set(h.consumer.paused) == {TopicPartition(t, p) for t in (EVENTS, REPARTITION) for p in (0, 1)}
    thread.run_once()
    assert h.consumer.paused == set()
    assert thread.tasks.all_running()


def test_revocation_commits_then_closes_the_revoked_tasks(tmp_path: Path) -> None:
    cluster = new_cluster()
    produce_events(cluster, EVENTS_1)
    h = ThreadHarness(cluster, tmp_path, **{"commit.interval.ms": 3_600_000})
    thread = h.start()
    h.assign_all()
    h.run(10)
    h.consumer.revoke([TopicPartition(REPARTITION, 0), TopicPartition(EVENTS, 0)])
    assert TaskId(1, 0) not in thread.tasks.tasks and TaskId(0, 0) not in thread.tasks.tasks
    assert TaskId(1, 1) in thread.tasks.tasks
    # the commit on revocation covered every task, including the ones kept
    assert cluster.committed[TopicPartition(EVENTS, 0)] == 4
    assert cluster.committed[TopicPartition(EVENTS, 1)] == 3


def test_failed_commit_reprocesses_from_the_last_commit_without_loss(tmp_path: Path) -> None:
    cluster = new_cluster()
    produce_events(cluster, EVENTS_1)
    h = ThreadHarness(cluster, tmp_path, **{"commit.interval.ms": 3_600_000})
    thread = h.start()
    h.assign_all()
    h.run(10)
    h.consumer.fail_next_commit = True
    thread.commit()  # the group "rebalanced": tasks closed dirty and revived at the committed offsets
    assert cluster.committed == {}
    h.run(30)
    thread.commit()
    h.run(30)
    thread.commit()
    counts = latest_counts(cluster)
    # at-least-once: nothing lost; the changelog the flush made durable is restored, so counts may
    # include records counted twice, never fewer
    assert set(counts) == set(EXPECTED_1)
    assert all(counts[k] >= v for k, v in EXPECTED_1.items())
    assert cluster.committed[TopicPartition(EVENTS, 0)] == 4


def test_delivery_failure_commits_no_offsets(tmp_path: Path) -> None:
    cluster = new_cluster()
    produce_events(cluster, EVENTS_1)
    h = ThreadHarness(cluster, tmp_path, **{"commit.interval.ms": 3_600_000})
    thread = h.start()
    h.assign_all()
    h.run(10)
    h.producer.fail_next_flush = True
    with pytest.raises(DeliveryError):
        thread.commit()
    assert cluster.committed == {}


def test_a_locked_store_is_retried_until_its_previous_owner_releases_it(tmp_path: Path) -> None:
    cluster = new_cluster()
    h = ThreadHarness(cluster, tmp_path)
    attempts = {"n": 0}
    real = h.store_factory

    def locked_twice(name: str, path: Path):
        attempts["n"] += 1
        if attempts["n"] <= 2:
            raise StoreLockedError("locked (fake)")
        return real(name, path)

    h.store_factory = locked_twice
    thread = h.start()
    h.assign_all()
    deadline = time.monotonic() + 5
    while not thread.tasks.all_running() and time.monotonic() < deadline:
        thread.run_once()
        time.sleep(0.05)
    assert thread.tasks.all_running()
    assert attempts["n"] >= 3


def test_a_poison_record_stops_the_task_with_an_error_naming_the_task_and_record(tmp_path: Path) -> None:
    cluster = new_cluster()
    cluster.append(EVENTS, 0, b"k", b"not json")
    h = ThreadHarness(cluster, tmp_path)
    thread = h.start()
    h.assign_all()
    with pytest.raises(ProcessingError, match=r"task 0_0: deserialization of record events-0@0 failed: SerdeError"):
        h.run(5)
    del thread


def test_status_reports_readiness_only_when_all_tasks_run(tmp_path: Path) -> None:
    cluster = new_cluster()
    h = ThreadHarness(cluster, tmp_path)
    thread = h.start()
    thread.state = "running"
    h.assign_all()
    assert not thread.status().ready
    h.run(3)
    status = thread.status()
    assert status.ready
    assert sorted(t.task_id for t in status.tasks) == ["0_0", "0_1", "1_0", "1_1"]


def test_deleted_state_dir_is_rebuilt_from_the_changelog(tmp_path: Path) -> None:
    cluster = new_cluster()
    produce_events(cluster, EVENTS_1)
    h = ThreadHarness(cluster, tmp_path, **{"commit.interval.ms": 0})
    h.start()
    h.assign_all()
    h.run(30)
    assert h.thread is not None
    h.thread.tasks.close_all(clean=True)
    shutil.rmtree(tmp_path / "app")
    produce_events(cluster, [(2, "green")], partition=1)
    again = ThreadHarness(cluster, tmp_path, **{"commit.interval.ms": 0})
    again.start()
    again.assign_all()
    again.run(30)
    assert latest_counts(cluster) == {"red": 3, "blue": 1, "green": 2}
    assert (tmp_path / "app" / "1_0" / "rocksdb" / "counts").is_dir()
    assert cluster.records(OUTPUT)
    # /status names each restored store; the task's totals (what an older operator reads) are their sums
    assert again.thread is not None
    restored = [task for task in again.thread.status().tasks if task.restored_records]
    assert restored
    for task in restored:
        assert [(s.store, s.changelog, s.restore_remaining) for s in task.stores] == [
            ("counts", f"app-counts-changelog-{task.task_id[-1]}", 0)
        ]
        assert task.restored_records == sum(s.restored_records for s in task.stores)


def test_every_reader_of_a_repartition_topic_is_in_the_one_sub_topology_that_consumes_it() -> None:
    from streamapp.processing.stream_thread import source_topic_subtopologies
    from streamapp.topology import TopologyDescription

    description = TopologyDescription.from_dict(
        {
            "nodes": [
                {"name": "in", "type": "source", "topics": ["in"]},
                {"name": "re", "type": "repartition", "input": "in"},
                {"name": "a", "type": "sink", "input": "re", "topic": "a"},
                {"name": "b", "type": "sink", "input": "re", "topic": "b"},
            ]
        }
    )
    assert source_topic_subtopologies(description, "app") == {"in": 0, "app-re-repartition": 1}
