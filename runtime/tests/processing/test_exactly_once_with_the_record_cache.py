"""Exactly-once with the record cache on (KIP-63 under ``exactly_once_v2``): a transaction that fails at its commit
takes the cache's work with it.

Under exactly-once the commit flushes the cache inside the transaction (the counts go downstream and into the
changelog, then the input offsets join the transaction). When that transaction is aborted, or the producer is
fenced by a newer one with the same ``transactional.id``, Kafka Streams drops the cache's entries and the stores'
uncommitted writes with the transaction and reprocesses from the committed offsets (``TaskCorruptedException`` /
``TaskMigratedException``). Were a cached count of the aborted attempt kept (dirty, or flushed into the aborted
transaction and kept as a clean entry), the reprocessing would count its records a second time, or a later commit
would forward it: the committed counts would come out doubled or go backwards.

A real ``StreamThread`` runs the count topology of ``harness`` (events -> even -> re-key by colour -> repartition
-> count in ``counts`` -> ``color-counts``) over the in-memory transactional Kafka of ``streamapp.testing``
(``read_committed`` readers: aborted records are never read), with RocksDB stores, both with Kafka's default cache
(everything stays cached until the commit) and with a cache of two entries (every put evicts and flushes, so the
aborted transaction also carries the evicted updates).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from harness import (
    APP,
    CHANGELOG,
    COUNT_TOPOLOGY,
    EVENTS,
    OUTPUT,
    PARTITIONS,
    REPARTITION,
    in_memory_thread,
    latest_counts,
    produce_events,
)
from streamapp.config import StreamsConfig
from streamapp.kafka.types import TransactionAbortedError
from streamapp.processing.stream_thread import StreamThread
from streamapp.processing.task import TaskId
from streamapp.serdes import serde_for
from streamapp.state.stores import decode_timestamped
from streamapp.testing.cluster import InMemoryCluster, InMemoryProducer
from streamapp.topology import TopologyDescription

TRANSACTIONAL_ID = f"{APP}-eos-cache-0"
COLORS = ("red", "blue", "green", "yellow")
FIRST = [(2 * i, COLORS[i % 4]) for i in range(40)]  # 10 of each colour, all counted (even n)
SECOND = [(2 * i, COLORS[i % 3]) for i in range(30)] + [(1, "red"), (3, "blue")]  # 10 each but yellow; 2 odd
AFTER_FIRST = {"red": 10, "blue": 10, "green": 10, "yellow": 10}
AFTER_SECOND = {"red": 20, "blue": 20, "green": 20, "yellow": 10}
DEFAULT_CACHE = None
TWO_ENTRIES = 500
"""Bytes: two cached counts (an entry counts its key, 8 value bytes and 200 bytes of overhead), so with four
colours every put evicts and flushes its task's cache in the middle of the transaction."""


@dataclass
class Faults:
    """What the next ``commit_transaction`` of the thread's producer (the first one or its replacement) does:
    ``None`` commits; ``"abort"`` fails as an abortable error (Kafka's ``TransactionAbortedError``: the producer
    then aborts the transaction); ``"fence"`` lets a newer producer with the same ``transactional.id`` register
    first, which aborts the open transaction (as the broker does), so the commit raises ``ProducerFencedError``."""

    next_commit: str | None = None


class FaultyTransactionalProducer(InMemoryProducer):
    def __init__(self, cluster: InMemoryCluster, faults: Faults) -> None:
        super().__init__(cluster, TRANSACTIONAL_ID)
        self.faults = faults

    def commit_transaction(self, timeout_s: float) -> None:
        fault, self.faults.next_commit = self.faults.next_commit, None
        if fault == "abort":
            raise TransactionAbortedError("the transaction was aborted (in-memory fault)")
        if fault == "fence":
            self.cluster.init_producer(TRANSACTIONAL_ID)  # a newer incarnation's init_transactions
        super().commit_transaction(timeout_s)


def new_cluster() -> InMemoryCluster:
    cluster = InMemoryCluster()
    for topic in (EVENTS, REPARTITION, CHANGELOG, OUTPUT):
        cluster.create_topic(topic, PARTITIONS)
    return cluster


def eos_thread(cluster: InMemoryCluster, state_dir: Path, faults: Faults, cache_max_bytes: int | None) -> StreamThread:
    """A subscribed ``exactly_once_v2`` stream thread that commits only when told (commit interval 1 h), with the
    default record cache unless ``cache_max_bytes`` says otherwise; a fenced producer is replaced by a new one."""
    settings: dict[str, object] = {
        "application.id": APP,
        "bootstrap.servers": "in-memory:9092",
        "state.dir": str(state_dir),
        "processing.guarantee": "exactly_once_v2",
        "commit.interval.ms": 3_600_000,
    }
    if cache_max_bytes is not None:
        settings["statestore.cache.max.bytes"] = cache_max_bytes
    config = StreamsConfig.from_mapping(settings)
    description = TopologyDescription.from_dict(COUNT_TOPOLOGY)
    return in_memory_thread(cluster, config, description, lambda: FaultyTransactionalProducer(cluster, faults))


def run(thread: StreamThread, iterations: int = 10) -> None:
    for _ in range(iterations):
        thread.run_once()


def process_and_commit(thread: StreamThread) -> None:
    """Run and commit twice: the first commit makes the repartition records readable (``read_committed``), the
    second commits their counts."""
    for _ in range(2):
        run(thread)
        thread.commit()


def counting_up_to_the_failed_commit(cluster: InMemoryCluster, thread: StreamThread) -> None:
    """Commit the counts of ``FIRST``; then count ``SECOND`` (its repartition records committed) without
    committing the counts: they wait in the cache, or were evicted into the open transaction."""
    produce_events(cluster, FIRST)
    process_and_commit(thread)
    assert latest_counts(cluster) == AFTER_FIRST
    produce_events(cluster, SECOND)
    run(thread)
    thread.commit()  # the repartition records of SECOND become readable; nothing counted them yet
    run(thread)
    assert any(task.has_pending_writes() for task in thread.tasks.tasks.values())


def committed_updates(cluster: InMemoryCluster, topic: str) -> dict[str, list[int]]:
    """The committed values of each key of a long-valued ``topic``, in the order they became visible."""
    longs = serde_for("long")
    updates: dict[str, list[int]] = {}
    for record in cluster.records(topic):
        assert record.key is not None
        updates.setdefault(record.key.decode(), []).append(longs.deserialize(record.value))
    return updates


def stored_counts(thread: StreamThread) -> dict[str, int]:
    """What the counting tasks' RocksDB stores hold (the writes applied by successful commits)."""
    longs = serde_for("long")
    counts: dict[str, int] = {}
    for partition in range(PARTITIONS):
        task = thread.tasks.tasks[TaskId(1, partition)]
        for key, raw in task.stores["counts"].inner.items():
            counts[key.decode()] = longs.deserialize(decode_timestamped(raw)[0])
    return counts


def assert_each_record_counted_once(cluster: InMemoryCluster, expected: Mapping[str, int]) -> None:
    """The committed output and changelog end at ``expected`` per key, and every key's committed output only
    grows (a doubled count would overshoot; a stale cached count forwarded after the reprocessing would go back)."""
    output = committed_updates(cluster, OUTPUT)
    assert {key: values[-1] for key, values in output.items()} == expected
    for key, values in output.items():
        assert values == sorted(set(values)), f"{key}: committed updates {values} do not strictly grow"
    assert latest_counts(cluster, CHANGELOG) == expected


@pytest.mark.parametrize("fault", ["abort", "fence"])
@pytest.mark.parametrize("cache_max_bytes", [DEFAULT_CACHE, TWO_ENTRIES], ids=["default-cache", "evicting-cache"])
def test_a_failed_exactly_once_commit_drops_the_cached_counts_and_reprocessing_counts_each_record_once(
    tmp_path: Path, fault: str, cache_max_bytes: int | None
) -> None:
    cluster, faults = new_cluster(), Faults()
    thread = eos_thread(cluster, tmp_path, faults, cache_max_bytes)
    counting_up_to_the_failed_commit(cluster, thread)
    cache = thread.tasks.tasks[TaskId(1, 0)].record_cache
    assert cache is not None and (cache.evictions > 0) == (cache_max_bytes == TWO_ENTRIES)

    faults.next_commit = fault
    thread.commit()  # flushes the cache into the transaction, which then fails: the tasks are closed and revived

    assert faults.next_commit is None, "the commit never reached commit_transaction"
    assert latest_counts(cluster) == AFTER_FIRST  # nothing of the failed attempt is visible
    assert latest_counts(cluster, CHANGELOG) == AFTER_FIRST
    assert thread.tasks.tasks and all(not task.has_pending_writes() for task in thread.tasks.tasks.values())

    process_and_commit(thread)  # restore, reprocess SECOND from the committed offsets, commit

    assert_each_record_counted_once(cluster, AFTER_SECOND)
    assert stored_counts(thread) == AFTER_SECOND


def test_a_failed_exactly_once_commit_discards_every_cached_and_buffered_write_of_its_tasks(tmp_path: Path) -> None:
    """``commit_tasks`` itself, before the thread closes the tasks: the failed commit's ``discard_pending`` leaves no
    entry in the thread's cache (not the dirty ones, and not those the commit flushed into the aborted
    transaction, which hold uncommitted counts), no buffered store write and no uncommitted input offset."""
    cluster, faults = new_cluster(), Faults()
    thread = eos_thread(cluster, tmp_path, faults, DEFAULT_CACHE)
    counting_up_to_the_failed_commit(cluster, thread)
    counting = [thread.tasks.tasks[TaskId(1, partition)] for partition in range(PARTITIONS)]
    cache = counting[0].record_cache
    assert cache is not None and cache.size_bytes > 0
    assert any(task.consumed_offsets != task.committed_offsets for task in counting)

    faults.next_commit = "abort"
    with pytest.raises(TransactionAbortedError):
        thread.tasks.commit()

    assert cache.size_bytes == 0
    for task in counting:
        assert not task.has_pending_writes() and not task.commit_needed()
        assert task.consumed_offsets == task.committed_offsets
    assert stored_counts(thread) == AFTER_FIRST
    thread.tasks.handle_commit_failure()  # what the thread does next: close dirty, revive, reprocess
    process_and_commit(thread)
    assert_each_record_counted_once(cluster, AFTER_SECOND)
