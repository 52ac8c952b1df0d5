"""Grouped-stream aggregations on both engines: reduce and aggregate (Kafka's KStreamReduce /
KStreamAggregate), after a re-keying group_by, with records of null key or value dropped and counted."""

from __future__ import annotations

from streamapp import StreamsBuilder
from streamapp.testing import TopologyTestDriver

from conformance import dsl_functions as fn
from conformance.harness import Engine, final_values

S, L, J = "string", "long", "json"


def sums() -> StreamsBuilder:
    builder = StreamsBuilder()
    (
        builder.stream("amounts", key_serde=S, value_serde=L, name="amounts")
        .group_by_key()
        .reduce(fn.add, name="sum", store="sums")
        .to_stream(name="changes")
        .to("sums", name="out")
    )
    return builder


AMOUNTS = [
    ("amounts", "a", 3, 1_000),
    ("amounts", "b", 4, 2_000),
    ("amounts", "a", None, 3_000),  # null value: dropped
    ("amounts", None, 9, 4_000),  # null key: dropped
    ("amounts", "a", 5, 5_000),
]


def test_reduce_emits_every_updated_sum_and_drops_null_keys_and_values(engine: Engine) -> None:
    out = engine.run(sums(), AMOUNTS, ["sums", "{application_id}-sums-changelog"])

    assert out["sums"] == [("a", 3, 1_000), ("b", 4, 2_000), ("a", 8, 5_000)]
    assert final_values(out["{application_id}-sums-changelog"]) == {"a": 8, "b": 4}


def test_dropped_records_are_counted_in_the_metric() -> None:
    with TopologyTestDriver(sums(), {"application.id": "drops"}) as driver:
        source = driver.create_input_topic("amounts")
        for _, key, value, ts in AMOUNTS:
            source.pipe_input(key, value, ts)
        assert driver.metrics().dropped_records_total == 2


def test_aggregate_folds_values_from_the_initializer_into_a_json_aggregate(engine: Engine) -> None:
    builder = StreamsBuilder()
    (
        builder.stream("events", key_serde=S, value_serde=S, name="events")
        .group_by_key()
        .aggregate(fn.empty_list, fn.append_value, value_serde=J, name="history", store="history-store")
        .to_stream(name="changes")
        .to("history", name="out")
    )
    inputs = [("events", "u1", "login", 1_000), ("events", "u2", "login", 2_000), ("events", "u1", "buy", 3_000)]

    out = engine.run(builder, inputs, ["history"])

    assert out["history"] == [("u1", ["login"], 1_000), ("u2", ["login"], 2_000), ("u1", ["login", "buy"], 3_000)]


def test_reduce_after_a_re_keying_group_by_sums_per_new_key_over_partitions(engine: Engine) -> None:
    builder = StreamsBuilder()
    (
        builder.stream("numbers", key_serde=S, value_serde=L, name="numbers")
        .group_by(fn.swap_key_parity, name="by-parity", key_serde=S)
        .reduce(fn.add, name="parity-sum", store="parity-sums")
        .to_stream(name="changes")
        .to("parity-sums", name="out")
    )
    inputs = [("numbers", f"k{i}", i, 1_000 + i) for i in range(1, 11)]

    out = engine.run(builder, inputs, ["parity-sums"], partitions={"numbers": 3})

    assert final_values(out["parity-sums"]) == {"even": 30, "odd": 25}
