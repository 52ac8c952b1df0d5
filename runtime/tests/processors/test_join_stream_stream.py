"""Windowed stream-stream joins (Kafka's KStreamKStreamJoin): window bounds per side, timestamps of results,
unmatched records emitted once their window and grace have passed, null handling."""

from __future__ import annotations

from join_helpers import Collect, committer, pair, stream_stream_join
from streamapp.processors.base import ProcessorMetrics
from streamapp.processors.joins.stream_stream import StreamStreamJoinProcessor
from streamapp.state.changelogging import ChangeLoggingKeyValueStore


def test_inner_join_matches_within_before_and_after_and_stamps_the_later_timestamp() -> None:
    join, out, _ = stream_stream_join("inner", before=10, after=5)
    left, right = join.for_input("l"), join.for_input("r")
    left.process("k", "A", 100)
    right.process("k", "b-early", 89)  # left at 100 reaches back to 90: no match
    right.process("k", "b-before", 90)  # 100 - 10
    right.process("k", "b-after", 105)  # 100 + 5
    right.process("k", "b-late", 106)
    right.process("other", "x", 100)  # another key never joins
    assert out.records == [("k", ["A", "b-before"], 100), ("k", ["A", "b-after"], 105)]


def test_right_records_see_the_mirrored_window() -> None:
    join, out, _ = stream_stream_join("inner", before=10, after=5)
    left, right = join.for_input("l"), join.for_input("r")
    right.process("k", "B", 100)  # joins left records in [100 - after, 100 + before] = [95, 110]
    left.process("k", "a94", 94)
    left.process("k", "a95", 95)
    left.process("k", "a110", 110)
    left.process("k", "a111", 111)
    assert out.records == [("k", ["a95", "B"], 100), ("k", ["a110", "B"], 110)]


def test_duplicates_on_both_sides_all_join() -> None:
    join, out, _ = stream_stream_join("inner", before=0, after=0)
    left, right = join.for_input("l"), join.for_input("r")
    left.process("k", "A1", 7)
    left.process("k", "A2", 7)
    right.process("k", "B", 7)
    assert sorted(v for _, v, _ in out.records) == [["A1", "B"], ["A2", "B"]]


def test_left_join_emits_an_unmatched_left_record_only_after_its_window_and_grace_closed() -> None:
    join, out, _ = stream_stream_join("left", before=5, after=5, grace=3)
    left, right = join.for_input("l"), join.for_input("r")
    left.process("k", "A", 100)
    right.process("z", "tick", 108)  # stream time 108: window end 105 + grace 3 = 108 is not behind it yet
    assert out.records == []
    right.process("z", "tick", 109)
    assert out.records == [("k", ["A", None], 100)]


def test_left_join_never_emits_a_matched_record_as_unmatched() -> None:
    join, out, _ = stream_stream_join("left", before=5, after=5, grace=10)
    left, right = join.for_input("l"), join.for_input("r")
    left.process("k", "A", 100)
    right.process("z", "tick", 109)  # past the window end, within grace
    right.process("k", "B", 104)  # out of order but within grace: still joins
    right.process("z", "tick", 200)
    assert out.records == [("k", ["A", "B"], 104)]


def test_left_join_ignores_unmatched_right_records_and_outer_join_emits_them() -> None:
    left_join, left_out, _ = stream_stream_join("left", before=1, after=1)
    outer_join, outer_out, _ = stream_stream_join("outer", before=1, after=1)
    for join in (left_join, outer_join):
        join.for_input("r").process("k", "B", 10)
        join.for_input("l").process("z", "tick", 50)
    assert left_out.records == []
    assert outer_out.records == [("k", [None, "B"], 10)]


def test_unmatched_records_are_emitted_oldest_first_right_before_left_at_equal_times() -> None:
    join, out, _ = stream_stream_join("outer", before=0, after=0)
    join.for_input("l").process("b", "L1", 5)
    join.for_input("r").process("a", "R1", 5)
    join.for_input("l").process("a", "L0", 3)
    join.for_input("l").process("z", "tick", 20)
    assert out.records == [("a", ["L0", None], 3), ("a", [None, "R1"], 5), ("b", ["L1", None], 5)]


def test_a_record_older_than_window_and_grace_is_emitted_unmatched_at_once() -> None:
    join, out, _ = stream_stream_join("left", before=2, after=2, grace=1)
    left = join.for_input("l")
    left.process("z", "tick", 100)
    left.process("k", "OLD", 10)  # window end 12 + grace 1 is far behind stream time 100
    assert out.records == [("k", ["OLD", None], 10)]


def test_null_keys_and_values() -> None:
    join, out, metrics = stream_stream_join("left", before=1, after=1)
    join.for_input("l").process(None, "A", 1)  # preserved side: emitted at once
    join.for_input("r").process(None, "B", 1)  # not preserved in a left join: dropped
    join.for_input("l").process("k", None, 1)  # null value: dropped
    assert out.records == [(None, ["A", None], 1)]
    assert metrics.dropped_records == 2


def test_an_out_of_order_record_within_grace_waits_for_a_partner_instead_of_being_emitted_unmatched() -> None:
    """KAFKA-19536: Kafka 4.0 would emit ``A+null`` at once here (window end 100 < stream time 105) and then
    ``A+B`` as well; within grace the record waits, so only the final result appears."""
    join, out, _ = stream_stream_join("left", before=0, after=0, grace=10)
    left, right = join.for_input("l"), join.for_input("r")
    left.process("z", "tick", 105)
    left.process("k", "A", 100)
    right.process("k", "B", 100)
    left.process("z", "tick", 200)
    assert out.records == [("k", ["A", "B"], 100), ("z", ["tick", None], 105)]


def test_records_waiting_in_the_outer_buffer_are_emitted_after_a_restart() -> None:
    """The buffer lives in a (changelogged) store: a new processor over the same stores, as after a task is
    closed and reopened, still emits the waiting record once its window closes."""
    first, _, _ = stream_stream_join("left", before=5, after=5, grace=0)
    first.for_input("l").process("k", "A", 100)
    restarted = StreamStreamJoinProcessor(
        "l",
        "r",
        pair,
        "left",
        first._windows,
        (first._left.this_store, first._right.this_store),
        first._outer,
        [out := Collect()],
        ProcessorMetrics(),
    )
    restarted.for_input("r").process("z", "tick", 200)
    assert out.records == [("k", ["A", None], 100)]


def test_a_buffered_record_matched_after_a_commit_is_not_emitted_unmatched() -> None:
    """The buffer entry was committed to the persistent store, then removed by a match in the next commit
    interval: the removal (still only buffered) must hide the persisted entry."""
    stores: list[ChangeLoggingKeyValueStore] = []
    join, out, _ = stream_stream_join("left", before=5, after=5, grace=0, logged_stores=stores)
    commit = committer(stores)
    join.for_input("l").process("k", "A", 100)
    commit()
    join.for_input("r").process("k", "B", 103)
    join.for_input("r").process("z", "tick", 200)
    assert out.records == [("k", ["A", "B"], 103)]


def test_a_self_join_pairs_every_record_with_itself_and_both_orders_of_earlier_ones() -> None:
    """Kafka feeds a self-joined stream to both sides, left first: a record meets itself once (as the right
    side finds it in the left store) and every earlier record in both orders."""
    join, out, _ = stream_stream_join("inner", before=5, after=5)
    self_join = StreamStreamJoinProcessor(
        "s",
        "s",
        pair,
        "inner",
        join._windows,
        (join._left.this_store, join._right.this_store),
        None,
        [collected := Collect()],
        ProcessorMetrics(),
    )
    self_join.for_input("s").process("k", "A", 1)
    self_join.for_input("s").process("k", "B", 2)
    assert collected.records == [("k", ["A", "A"], 1), ("k", ["B", "A"], 2), ("k", ["A", "B"], 2), ("k", ["B", "B"], 2)]
    assert out.records == []
