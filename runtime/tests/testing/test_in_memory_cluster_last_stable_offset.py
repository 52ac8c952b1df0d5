"""The in-memory cluster's last stable offset: the first record of the oldest open transaction of a partition,
else the high watermark (what a ``read_committed`` reader and a task's readiness check see), found without
reading the partition's log: a readiness check that walked the log made every task with two input partitions
(a stream-table join) quadratic in the records piped into the TopologyTestDriver."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from streamapp import StreamsBuilder
from streamapp.kafka.types import TopicPartition
from streamapp.testing import TestRecord, TopologyTestDriver
from streamapp.testing import cluster as cluster_module
from streamapp.testing.cluster import InMemoryCluster, InMemoryProducer

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def transactional(cluster: InMemoryCluster, transactional_id: str) -> InMemoryProducer:
    producer = InMemoryProducer(cluster, transactional_id)
    producer.init_transactions(1.0)
    producer.begin_transaction()
    return producer


def test_last_stable_offset_stops_at_the_oldest_open_transaction_of_the_partition() -> None:
    cluster = InMemoryCluster()
    cluster.create_topic("t", 2)
    InMemoryProducer(cluster).send("t", b"k", b"plain", 1, partition=0)
    first = transactional(cluster, "first")
    first.send("t", b"k", b"first", 2, partition=0)  # offset 1
    second = transactional(cluster, "second")
    second.send("t", b"k", b"second", 3, partition=0)  # offset 2
    second.send("t", b"k", b"second", 3, partition=1)  # offset 0 of partition 1
    assert (cluster.last_stable_offset(T0), cluster.last_stable_offset(T1)) == (1, 0)

    first.commit_transaction(1.0)  # marker at offset 3 of partition 0
    assert (cluster.last_stable_offset(T0), cluster.last_stable_offset(T1)) == (2, 0)

    second.abort_transaction(1.0)  # markers: offset 4 of partition 0, offset 1 of partition 1
    assert (cluster.last_stable_offset(T0), cluster.last_stable_offset(T1)) == (5, 2)
    assert cluster.last_stable_offset(TopicPartition("missing", 0)) == 0


class CountingLog(list[Any]):
    """A partition's log that counts the entries read from it: by index or slice, by iteration (``enumerate``,
    ``for``, ``reversed``) and by a search (``in``, ``index``, ``count``, which read the whole log)."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def __getitem__(self, index: Any) -> Any:
        item = super().__getitem__(index)
        self.reads += len(item) if isinstance(index, slice) else 1
        return item

    def __iter__(self) -> Iterator[Any]:
        for entry in super().__iter__():
            self.reads += 1
            yield entry

    def __reversed__(self) -> Iterator[Any]:
        for entry in super().__reversed__():
            self.reads += 1
            yield entry

    def __contains__(self, entry: object) -> bool:
        self.reads += len(self)
        return super().__contains__(entry)

    def index(self, *args: Any) -> int:
        self.reads += len(self)
        return super().index(*args)

    def count(self, entry: Any) -> int:
        self.reads += len(self)
        return super().count(entry)


@pytest.fixture
def logs(monkeypatch: pytest.MonkeyPatch) -> list[CountingLog]:
    """Every partition created from now on keeps the transactions of its entries in a ``CountingLog``, listed
    here: a reader looks at an entry's transaction before anything else of it, so these reads count the entries
    read."""
    created: list[CountingLog] = []
    partition = cluster_module._Partition

    def counting_partition() -> Any:
        log = CountingLog()
        created.append(log)
        return partition(transactions=log)

    monkeypatch.setattr(cluster_module, "_Partition", counting_partition)
    return created


def test_the_last_stable_offset_of_a_long_partition_reads_none_of_its_entries(logs: list[CountingLog]) -> None:
    cluster = InMemoryCluster()
    cluster.create_topic("t", 1)
    plain = InMemoryProducer(cluster)
    for n in range(5_000):
        plain.send("t", b"k", b"before", n, partition=0)
    transactional(cluster, "open").send("t", b"k", b"open", 5_000, partition=0)  # offset 5,000
    for n in range(5_000):
        plain.send("t", b"k", b"after", n, partition=0)
    [log] = logs
    log.reads = 0

    stable = [cluster.last_stable_offset(T0) for _ in range(100)]

    assert stable == [5_000] * 100
    assert log.reads == 0


def with_plane(flight: str, plane: str) -> str:
    return f"{flight} on {plane}"


def test_the_driver_reads_each_input_log_entry_a_bounded_number_of_times_on_a_task_with_two_input_partitions(
    logs: list[CountingLog],
) -> None:
    builder = StreamsBuilder()
    planes = builder.table("planes", key_serde="string", value_serde="string", name="planes")
    flights = builder.stream("flights", key_serde="string", value_serde="string", name="flights")
    flights.join(planes, with_plane, name="with-plane").to("out", name="out")
    records = 400
    with TopologyTestDriver(builder) as driver:
        driver.create_input_topic("planes").pipe_input(TestRecord("p", "red", 0))
        source = driver.create_input_topic("flights")
        for n in range(records):
            source.pipe_input(TestRecord("p", f"f{n}", 1 + n))
        assert driver.create_output_topic("out").get_queue_size() == records

    # today each input entry is read once, by the poll; a walk of the log per readiness check read ~80,000
    assert sum(log.reads for log in logs) <= 3 * (records + 1)
