"""A stream-table join sees every table update its task processed, also one the record cache has not flushed yet
(issue 22): Kafka's ``KStreamKTableJoinProcessor`` reads the table through its ``KTableValueGetter``, i.e. through
the cache (``streamapp.processing.table_value_getters``). Joining only what the cache flushed dropped the stream
records of a new table key until the next commit."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from join_helpers import JOIN_STORE_CHANGELOG, OUTPUT, STREAM, TABLE, stream_table_join_task
from kafka_fakes import FakeCluster, FakeProducer
from streamapp.kafka.types import ConsumerRecord, TopicPartition
from streamapp.processing.task import StreamTask
from streamapp.state.record_cache import ThreadCache

Shape = Callable[[Any], Any]
"""What the test does to the table before the join (``KTable`` -> ``KTable``)."""


def as_is(table: Any) -> Any:
    return table


def upper_names(table: Any) -> Any:
    return table.map_values(str.upper, name="upper")


def without_b6(table: Any) -> Any:
    return table.filter(lambda key, name: key != "B6", name="not-b6")


def new_task(tmp_path: Path, cache: ThreadCache | None, shape: Shape = as_is, join: str = "join") -> tuple[
    StreamTask, FakeCluster, FakeProducer
]:  # fmt: skip
    return stream_table_join_task(tmp_path, cache, shape, join)


def pipe(task: StreamTask, topic: str, key: str, value: str, timestamp: int) -> None:
    offset = task.consumed_offsets.get(TopicPartition(topic, 0), 0)
    record = ConsumerRecord(topic, 0, offset, key.encode(), value.encode(), timestamp)
    task.process(record, TopicPartition(topic, 0))


def joined(cluster: FakeCluster, producer: FakeProducer) -> list[tuple[str, str]]:
    producer.flush(1)
    return [(r.key.decode(), r.value.decode()) for r in cluster.records(OUTPUT) if r.key and r.value]


def commit(task: StreamTask, producer: FakeProducer) -> None:
    task.flush_cache()
    task.send_changelog()
    producer.flush(1)
    task.complete_commit()


@pytest.mark.parametrize("cache", [ThreadCache(10 << 20), None], ids=["default cache", "cache off"])
def test_a_stream_record_joins_the_table_update_processed_before_it_without_a_commit_between(
    tmp_path: Path, cache: ThreadCache | None
) -> None:
    task, cluster, producer = new_task(tmp_path, cache)

    pipe(task, TABLE, "UA", "United", 1_000)
    pipe(task, STREAM, "UA", "UA1545", 2_000)
    pipe(task, TABLE, "UA", "United Airlines", 3_000)
    pipe(task, STREAM, "UA", "UA1714", 4_000)

    assert joined(cluster, producer) == [("UA", "UA1545 by United"), ("UA", "UA1714 by United Airlines")]


def test_a_left_join_gets_the_cached_table_value_instead_of_none(tmp_path: Path) -> None:
    task, cluster, producer = new_task(tmp_path, ThreadCache(10 << 20), join="left_join")

    pipe(task, TABLE, "AA", "American", 1_000)
    pipe(task, STREAM, "AA", "AA1141", 2_000)
    pipe(task, STREAM, "DL", "DL461", 3_000)

    assert joined(cluster, producer) == [("AA", "AA1141 by American"), ("DL", "DL461 by None")]


@pytest.mark.parametrize(
    ("shape", "expected"),
    [
        (upper_names, [("UA", "UA1545 by UNITED"), ("B6", "B6725 by JETBLUE")]),
        (without_b6, [("UA", "UA1545 by United")]),
    ],
    ids=["map_values", "filter"],
)
def test_the_join_reads_a_derived_table_through_its_parents_cache(
    tmp_path: Path, shape: Shape, expected: list[tuple[str, str]]
) -> None:
    task, cluster, producer = new_task(tmp_path, ThreadCache(10 << 20), shape)

    pipe(task, TABLE, "UA", "United", 1_000)
    pipe(task, TABLE, "B6", "JetBlue", 1_000)
    pipe(task, STREAM, "UA", "UA1545", 2_000)
    pipe(task, STREAM, "B6", "B6725", 2_000)

    assert joined(cluster, producer) == expected


def test_the_joins_own_store_still_gets_the_flushed_table_values(tmp_path: Path) -> None:
    task, cluster, producer = new_task(tmp_path, ThreadCache(10 << 20))
    pipe(task, TABLE, "UA", "United", 1_000)
    pipe(task, TABLE, "UA", "United Airlines", 1_500)

    commit(task, producer)

    assert [(r.key, r.value) for r in cluster.records(JOIN_STORE_CHANGELOG)] == [(b"UA", b"United Airlines")]
