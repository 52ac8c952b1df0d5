"""The TopologyTestDriver with the record cache off and on (docs/record-cache.md, "The TopologyTestDriver").

The driver commits after every piped record, so a flush follows every record: with the cache on (Kafka's default
10 MiB) a piped record still reaches the output at once, but the updates it causes to one key inside one task
between two commits leave the cache as one record (Kafka's ``TopologyTestDriver`` with caching does the same).
With ``statestore.cache.max.bytes: 0`` the stores are not cached and every update is forwarded at once.
"""

from __future__ import annotations

from typing import Any

import pytest
from streamapp import StreamsBuilder
from streamapp.testing import TestRecord, TopologyTestDriver

CACHE_OFF = {"statestore.cache.max.bytes": 0}


def split_words(value: str) -> list[str]:
    return value.split()


def words_per_player() -> StreamsBuilder:
    """A count per key of the words of each line, in the line's own task (no repartition): a line of n words
    updates its key's count n times while one record is processed."""
    builder = StreamsBuilder()
    (
        builder.stream("lines", key_serde="string", value_serde="string", name="lines")
        .flat_map_values(split_words, name="words")
        .group_by_key()
        .count(name="count", store="words-store")
        .to_stream(name="changes")
        .to("word-counts", name="out", value_serde="long")
    )
    return builder


def pipe_and_read(config: dict[str, Any]) -> tuple[list[list[TestRecord]], list[TestRecord], bool]:
    """Pipe three lines and read the output after each; the changelog after all; whether the task is cached."""
    with TopologyTestDriver(words_per_player(), config) as driver:
        lines = driver.create_input_topic("lines")
        out = driver.create_output_topic("word-counts")
        after_each = []
        for key, line, timestamp in [("ann", "a", 1_000), ("bob", "b", 2_000), ("ann", "c d e", 3_000)]:
            lines.pipe_input(key, line, timestamp)
            after_each.append(out.read_records_to_list())
        changelog = driver.create_output_topic(f"{driver.application_id}-words-store-changelog").read_records_to_list()
        (task,) = driver.tasks()
        return after_each, changelog, task.record_cache is not None


def test_with_the_cache_off_the_driver_forwards_every_update_of_a_record_at_once() -> None:
    after_each, changelog, cached = pipe_and_read(CACHE_OFF)

    assert not cached
    assert after_each == [
        [TestRecord("ann", 1, 1_000)],
        [TestRecord("bob", 1, 2_000)],
        [TestRecord("ann", 2, 3_000), TestRecord("ann", 3, 3_000), TestRecord("ann", 4, 3_000)],
    ]
    # the changelogging store below logs each key's latest value per commit, cached or not
    assert [(r.key, r.value) for r in changelog] == [("ann", 1), ("bob", 1), ("ann", 4)]


@pytest.mark.parametrize("config", [{}, {"statestore.cache.max.bytes": 1_000_000}], ids=["default", "1MB"])
def test_with_the_cache_on_the_driver_flushes_after_every_piped_record_one_update_per_key(
    config: dict[str, Any],
) -> None:
    after_each, changelog, cached = pipe_and_read(config)

    assert cached
    assert after_each == [
        [TestRecord("ann", 1, 1_000)],
        [TestRecord("bob", 1, 2_000)],
        [TestRecord("ann", 4, 3_000)],  # the line's three updates of ann merged in the cache until the commit
    ]
    assert [(r.key, r.value) for r in changelog] == [("ann", 1), ("bob", 1), ("ann", 4)]
