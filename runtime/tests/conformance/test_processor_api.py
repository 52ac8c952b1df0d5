"""The Processor API on both engines: a processor with a state store, stream-time punctuation (aligned to
0, once per advance), a key-changing processor before a grouping; wall-clock punctuation on the driver's
controlled clock."""

from __future__ import annotations

import pytest
from streamapp import StreamsBuilder
from streamapp.testing import TopologyTestDriver

from conformance import dsl_functions as fn
from conformance.harness import Engine, final_values

S, L = "string", "long"


def test_a_processor_with_a_store_forwards_each_keys_first_record(engine: Engine) -> None:
    builder = StreamsBuilder()
    builder.add_state_store("seen", key_serde=S, value_serde=L)
    (
        builder.stream("clicks", key_serde=S, value_serde=L, name="clicks")
        .process(fn.Dedupe, stores=["seen"], name="dedupe")
        .to("first-clicks", name="out")
    )
    inputs = [("clicks", "a", 1, 10), ("clicks", "b", 2, 20), ("clicks", "a", 3, 30), ("clicks", "c", 4, 40)]

    out = engine.run(builder, inputs, ["first-clicks", "{application_id}-seen-changelog"])

    assert out["first-clicks"] == [("a", 1, 10), ("b", 2, 20), ("c", 4, 40)]
    assert final_values(out["{application_id}-seen-changelog"]) == {"a": 10, "b": 20, "c": 40}


def test_stream_time_punctuation_fires_when_stream_time_reaches_each_interval(engine: Engine) -> None:
    builder = StreamsBuilder()
    builder.add_state_store("totals", key_serde=S, value_serde=L)
    (
        builder.stream("amounts", key_serde=S, value_serde=L, name="amounts")
        .process(fn.StreamTimeTotals, stores=["totals"], name="totals")
        .to("totals", name="out")
    )
    inputs = [
        ("amounts", "a", 1, 3),  # first punctuation at once (schedule aligned to 0): a=1 @3
        ("amounts", "a", 2, 5),
        ("amounts", "b", 5, 12),  # stream time 12 >= 10: a=3, b=5 @12
        ("amounts", "a", 1, 25),  # 25 >= 20: a=4 @25 (next due 30, the missed 20 is skipped)
        ("amounts", "b", 1, 26),
    ]

    out = engine.run(builder, inputs, ["totals"])

    assert out["totals"] == [("a", 1, 3), ("a", 3, 12), ("b", 5, 12), ("a", 4, 25)]


def test_a_processor_may_change_keys_and_a_grouping_repartitions_after_it(engine: Engine) -> None:
    builder = StreamsBuilder()
    (
        builder.stream("pairs", key_serde=S, value_serde=L, name="pairs")
        .process(fn.KeyByValue, name="key-by-value", value_serde=S)
        .group_by_key(name="by-value")
        .count(name="count", store="count-store")
        .to_stream(name="changes")
        .to("counts", name="out", value_serde=L)
    )
    inputs = [("pairs", f"k{i}", i % 3, 100 + i) for i in range(9)]

    out = engine.run(builder, inputs, ["counts"], partitions={"pairs": 2})

    assert final_values(out["counts"]) == {"0": 3, "1": 3, "2": 3}


def test_wall_clock_punctuation_follows_the_drivers_clock_and_can_be_cancelled() -> None:
    builder = StreamsBuilder()
    (
        builder.stream("events", key_serde=S, value_serde=L, name="events")
        .process(fn.WallClockTicks, name="ticks")
        .to("ticks", name="out")
    )
    with TopologyTestDriver(builder, {"application.id": "ticks"}, initial_wall_clock_ms=10_000) as driver:
        events, ticks = driver.create_input_topic("events"), driver.create_output_topic("ticks")
        events.pipe_input("e", 1, 1)
        events.pipe_input("e", 1, 2)
        driver.advance_wall_clock_time(999)
        assert ticks.is_empty()
        driver.advance_wall_clock_time(1)  # first due at init time + 1 s
        driver.advance_wall_clock_time(5_000)  # one punctuation, missed intervals skipped
        driver.advance_wall_clock_time(1_000)  # third tick cancels the schedule
        driver.advance_wall_clock_time(1_000)
        assert [(r.key, r.value, r.timestamp_ms) for r in ticks.read_records_to_list()] == [
            ("tick", 2, 11_000),
            ("tick", 0, 16_000),
            ("tick", 0, 17_000),
        ]


def test_process_values_keeps_keys_so_a_grouping_after_it_needs_no_repartition(engine: Engine) -> None:
    """Kafka's ``KStreamImpl#processValues`` with a ``FixedKeyProcessor`` (KIP-820): the processor sees each record
    with its store, forwards ``record.withValue(...)``, and the stream keeps its partitioning, so
    ``groupByKey().count()`` reads it in the same sub-topology (no repartition topic)."""
    builder = StreamsBuilder()
    builder.add_state_store("totals", key_serde=S, value_serde=L)
    totals = builder.stream("amounts", key_serde=S, value_serde=L, name="amounts").process_values(
        fn.RunningTotal, stores=["totals"], name="running-total"
    )
    totals.to("running-totals", name="out")
    totals.group_by_key(name="by-key").count(name="count", store="count-store").to_stream(name="changes").to(
        "counts", name="counts-out"
    )
    inputs = [("amounts", "a", 1, 10), ("amounts", "b", 5, 20), ("amounts", "a", 2, 30), ("amounts", "a", 4, 40)]

    out = engine.run(builder, inputs, ["running-totals", "counts"], partitions={"amounts": 2})

    assert sorted(out["running-totals"], key=lambda r: r[2]) == [("a", 1, 10), ("b", 5, 20), ("a", 3, 30), ("a", 7, 40)]
    assert final_values(out["counts"]) == {"a": 3, "b": 1}
    assert len(builder.build().subtopologies()) == 1, "process_values keeps keys: the count needs no repartition"


def test_a_process_values_processor_cannot_forward_another_key() -> None:
    """Kafka's ``FixedKeyProcessorContext.forward`` takes only a ``FixedKeyRecord`` (made from an input record, it
    has no ``withKey``): forwarding a plain ``Record`` with another key fails the record, naming the node."""
    builder = StreamsBuilder()
    builder.stream("events", key_serde=S, value_serde=L, name="events").process_values(
        fn.ForwardsANewKey, name="rekey"
    ).to("out", name="out")
    with TopologyTestDriver(builder, {"application.id": "fixed-key"}) as driver:
        events = driver.create_input_topic("events")
        with pytest.raises(Exception, match="node 'rekey': a FixedKeyProcessor forwards FixedKeyRecord objects"):
            events.pipe_input("e", 1, 1)
