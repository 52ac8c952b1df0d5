"""KStream record-at-a-time operators follow their Kafka Streams processors (KStreamFilter, KStreamMap,
KStreamFlatMap, KStreamFlatMapValues, KStreamPeek, KStreamBranch, TopicNameExtractor sinks)."""

from __future__ import annotations

from typing import Any

import pytest
from streamapp.processors.base import ToPartition
from streamapp.processors.io import SinkProcessor, TopicExtractorSinkProcessor
from streamapp.processors.stateless import (
    BranchProcessor,
    FilterProcessor,
    FlatMapProcessor,
    FlatMapValuesProcessor,
    MapProcessor,
    PeekProcessor,
    SplitProcessor,
)
from streamapp.serdes import serde_for


class Collect:
    def __init__(self) -> None:
        self.records: list[tuple[Any, Any, int]] = []

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        self.records.append((key, value, timestamp))


def test_filter_not_forwards_only_records_failing_the_predicate() -> None:
    out = Collect()
    p = FilterProcessor(lambda k, v: v > 1, [out], negate=True)
    for v in (1, 2, 0):
        p.process("k", v, 3)
    assert out.records == [("k", 1, 3), ("k", 0, 3)]


def test_map_replaces_key_and_value_and_keeps_the_timestamp() -> None:
    out = Collect()
    MapProcessor(lambda k, v: (v, k), [out]).process("a", "b", 9)
    assert out.records == [("b", "a", 9)]


def test_map_that_does_not_return_a_pair_is_an_error_naming_the_result() -> None:
    with pytest.raises(TypeError, match="map mapper must return a \\(key, value\\) pair, got 'x'"):
        MapProcessor(lambda k, v: "x", [Collect()]).process("a", "b", 1)


def test_flat_map_forwards_every_pair_in_order_and_none_as_nothing() -> None:
    out = Collect()
    p = FlatMapProcessor(lambda k, v: [(k, c) for c in v] if v else None, [out])
    p.process("k", "ab", 1)
    p.process("k", "", 2)
    p.process("k", None, 3)
    assert out.records == [("k", "a", 1), ("k", "b", 1)]


def test_flat_map_values_keeps_the_key_for_every_value() -> None:
    out = Collect()
    FlatMapValuesProcessor(lambda v: v.split(), [out]).process("k", "x y", 4)
    assert out.records == [("k", "x", 4), ("k", "y", 4)]


def test_peek_calls_the_action_and_forwards_the_record_unchanged() -> None:
    seen: list[tuple[Any, Any]] = []
    out = Collect()
    PeekProcessor(lambda k, v: seen.append((k, v)), [out]).process("k", 1, 2)
    assert seen == [("k", 1)]
    assert out.records == [("k", 1, 2)]


def test_foreach_is_a_peek_without_children() -> None:
    seen: list[tuple[Any, Any]] = []
    PeekProcessor(lambda k, v: seen.append((k, v)), []).process("k", 1, 2)
    assert seen == [("k", 1)]


def branches() -> tuple[SplitProcessor, Collect, Collect, Collect]:
    big, small, rest = Collect(), Collect(), Collect()
    split = SplitProcessor(
        [
            BranchProcessor(lambda k, v: v >= 10, [big]),
            BranchProcessor(lambda k, v: v >= 1, [small]),
            BranchProcessor(None, [rest]),
        ]
    )
    return split, big, small, rest


def test_split_sends_each_record_to_the_first_matching_branch_only() -> None:
    split, big, small, rest = branches()
    for v in (20, 5, 0):
        split.process("k", v, 1)
    assert big.records == [("k", 20, 1)]
    assert small.records == [("k", 5, 1)]
    assert rest.records == [("k", 0, 1)]


def test_split_without_a_default_branch_drops_records_no_branch_takes() -> None:
    taken = Collect()
    split = SplitProcessor([BranchProcessor(lambda k, v: v > 0, [taken])])
    split.process("k", 0, 1)
    split.process("k", 1, 2)
    assert taken.records == [("k", 1, 2)]


def test_topic_extractor_sink_sends_each_record_to_the_topic_the_function_names() -> None:
    sent: list[tuple[str, bytes | None, bytes | None, int]] = []
    sink = TopicExtractorSinkProcessor(
        lambda k, v: f"out-{v % 2}",
        serde_for("string"),
        serde_for("long"),
        lambda topic, key, value, ts: sent.append((topic, key, value, ts)),
    )
    sink.process("a", 3, 5)
    sink.process("b", 4, 6)
    assert [(t, k, ts) for t, k, _, ts in sent] == [("out-1", b"a", 5), ("out-0", b"b", 6)]


def test_a_sink_sends_a_to_partition_value_to_the_partition_it_names_and_others_by_key() -> None:
    """The foreign-key join's responses go back to the left record's task (``ToPartition``); every other record
    leaves the partition to the producer (murmur2 of the key)."""
    sent: list[tuple[str, bytes | None, bytes | None, int, Any]] = []

    def send(topic: str, key: bytes | None, value: bytes | None, ts: int, **options: Any) -> None:
        sent.append((topic, key, value, ts, options.get("partition")))

    sink = SinkProcessor("responses", serde_for("string"), serde_for("long"), send)
    sink.process("a", ToPartition(3, 2), 5)
    sink.process("b", 4, 6)

    assert sent == [
        ("responses", b"a", (3).to_bytes(8, "big"), 5, 2),
        ("responses", b"b", (4).to_bytes(8, "big"), 6, None),
    ]


def test_topic_extractor_returning_no_topic_name_is_an_error() -> None:
    sink = TopicExtractorSinkProcessor(lambda k, v: None, serde_for("string"), serde_for("long"), lambda *a: None)
    with pytest.raises(ValueError, match="topic extractor returned None"):
        sink.process("a", 1, 1)
