"""``streamapp.replay.spark.source.splits``: a topic's plan range cut into the Spark tasks that read it covers every
offset of every partition exactly once, in partition and offset order, with at least as many splits as asked when
the ranges are long enough (more read tasks than the topic has partitions), and no split for an empty range."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from streamapp.replay.spark.source import Split, splits


def test_one_split_per_partition_when_the_topic_has_enough_partitions() -> None:
    assert splits("t", {0: 0, 1: 5}, {0: 10, 1: 5}, min_splits=2) == [Split("t", 0, 0, 10)]


def test_a_one_partition_topic_is_cut_into_as_many_nearly_equal_ranges_as_asked() -> None:
    assert splits("t", {0: 100}, {0: 110}, min_splits=3) == [
        Split("t", 0, 100, 103),
        Split("t", 0, 103, 106),
        Split("t", 0, 106, 110),
    ]


@given(
    ranges=st.lists(st.tuples(st.integers(0, 1_000), st.integers(0, 50)), min_size=1, max_size=5),
    min_splits=st.integers(1, 12),
)
def test_the_splits_cover_every_offset_once_in_order(ranges: list[tuple[int, int]], min_splits: int) -> None:
    start = {p: first for p, (first, _) in enumerate(ranges)}
    end = {p: first + size for p, (first, size) in enumerate(ranges)}

    found = splits("t", start, end, min_splits)

    covered = [(s.partition, o) for s in found for o in range(s.start, s.end)]
    assert covered == [(p, o) for p in sorted(end) for o in range(start[p], end[p])]
    assert all(s.start < s.end for s in found)
    total = sum(size for _, size in ranges)
    if all(size >= -(-min_splits // len(ranges)) for _, size in ranges):
        assert len(found) >= min(min_splits, total)
