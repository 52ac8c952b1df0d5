"""KStream operators on both engines (driver and real broker): filter_not, map_values, flat_map(_values),
map + grouping through a repartition topic, split/branch, merge, a user-requested repartition, and a
topic extractor (driver only: extracted topics are not renamed by the broker harness)."""

from __future__ import annotations

from streamapp import StreamsBuilder
from streamapp.testing import TopologyTestDriver

from conformance import dsl_functions as fn
from conformance.harness import Engine, final_values

S, L = "string", "long"


def test_filter_not_and_map_values_keep_keys_and_timestamps(engine: Engine) -> None:
    builder = StreamsBuilder()
    (
        builder.stream("numbers", key_serde=S, value_serde=L, name="numbers")
        .filter_not(fn.is_even, name="odd")
        .map_values(fn.times_ten, name="x10")
        .to("odd-x10", name="out")
    )
    inputs = [("numbers", f"k{v}", v, 1_000 + v) for v in (1, 2, 3, 4, 5)]

    out = engine.run(builder, inputs, ["odd-x10"])

    assert out["odd-x10"] == [("k1", 10, 1_001), ("k3", 30, 1_003), ("k5", 50, 1_005)]


def test_word_count_flat_maps_re_keys_and_counts_through_a_repartition_topic(engine: Engine) -> None:
    builder = StreamsBuilder()
    (
        builder.stream("lines", key_serde=S, value_serde=S, name="lines")
        .flat_map(fn.words, name="words", value_serde=L)
        .group_by_key(name="by-word")
        .count(name="word-count", store="word-counts")
        .to_stream(name="changes")
        .to("word-counts", name="out", value_serde=L)
    )
    inputs = [
        ("lines", "l1", "the quick fox", 1_000),
        ("lines", "l2", "the lazy dog", 2_000),
        ("lines", "l3", "the fox", 3_000),
    ]

    out = engine.run(builder, inputs, ["word-counts", "{application_id}-by-word-repartition"], partitions={"lines": 2})

    assert final_values(out["word-counts"]) == {"the": 3, "quick": 1, "fox": 2, "lazy": 1, "dog": 1}
    assert len(out["{application_id}-by-word-repartition"]) == 8


def test_flat_map_values_emits_every_value_under_the_same_key(engine: Engine) -> None:
    builder = StreamsBuilder()
    (
        builder.stream("lines", key_serde=S, value_serde=S, name="lines")
        .flat_map_values(fn.split_words, name="parts")
        .map_values(fn.upper, name="upper")
        .to("parts", name="out")
    )

    out = engine.run(builder, [("lines", "l1", "a b", 5), ("lines", "l2", "", 6)], ["parts"])

    assert out["parts"] == [("l1", "A", 5), ("l1", "B", 5)]


def test_split_routes_each_record_to_its_first_matching_branch(engine: Engine) -> None:
    builder = StreamsBuilder()
    branches = (
        builder.stream("numbers", key_serde=S, value_serde=L, name="numbers")
        .split(name="size-")
        .branch(fn.is_large, name="large")
        .branch(fn.is_even, name="even")
        .default_branch(name="rest")
    )
    for name, stream in branches.items():
        stream.to(name, name=f"{name}-out")
    inputs = [("numbers", f"k{v}", v, 10 + i) for i, v in enumerate((100, 2, 3, 101, 4))]

    out = engine.run(builder, inputs, ["size-large", "size-even", "size-rest"])

    assert out == {
        "size-large": [("k100", 100, 10), ("k101", 101, 13)],
        "size-even": [("k2", 2, 11), ("k4", 4, 14)],
        "size-rest": [("k3", 3, 12)],
    }


def test_merge_forwards_the_records_of_both_streams(engine: Engine) -> None:
    builder = StreamsBuilder()
    left = builder.stream("left", key_serde=S, value_serde=L, name="left")
    right = builder.stream("right", key_serde=S, value_serde=L, name="right").map_values(fn.times_ten, name="x10")
    left.merge(right, name="both").to("merged", name="out")
    inputs = [("left", "a", 1, 100), ("right", "b", 2, 200), ("left", "c", 3, 300)]

    out = engine.run(builder, inputs, ["merged"], one_at_a_time=True)

    assert out["merged"] == [("a", 1, 100), ("b", 20, 200), ("c", 3, 300)]


def test_repartition_with_a_partition_count_moves_records_by_their_new_key(engine: Engine) -> None:
    builder = StreamsBuilder()
    (
        builder.stream("numbers", key_serde=S, value_serde=L, name="numbers")
        .map(fn.swap, name="by-value", key_serde=S, value_serde=S)
        .repartition(name="rekeyed", partitions=3)
        .group_by_key()
        .count(name="per-value", store="per-value-store")
        .to_stream(name="changes")
        .to("per-value", name="out", value_serde=L)
    )
    inputs = [("numbers", f"k{i}", i % 4, 1_000 + i) for i in range(12)]

    out = engine.run(builder, inputs, ["per-value", "{application_id}-rekeyed-repartition"])

    assert final_values(out["per-value"]) == {"0": 3, "1": 3, "2": 3, "3": 3}
    assert sorted(value for _, value, _ in out["{application_id}-rekeyed-repartition"]) == sorted(
        f"k{i}" for i in range(12)
    )


def test_a_topic_extractor_sends_each_record_to_the_topic_it_names() -> None:
    builder = StreamsBuilder()
    builder.stream("numbers", key_serde=S, value_serde=L, name="numbers").to(fn.parity_topic, name="route")
    with TopologyTestDriver(builder, {"application.id": "route"}) as driver:
        source = driver.create_input_topic("numbers")
        for i in range(4):
            source.pipe_input(f"nums:{i}", i, 10 + i)
        assert driver.create_output_topic(
            "nums-even", key_serde="string", value_serde="long"
        ).read_values_to_list() == [
            0,
            2,
        ]
        assert driver.create_output_topic("nums-odd", key_serde="string", value_serde="long").read_values_to_list() == [
            1,
            3,
        ]


def test_a_sink_writes_with_its_own_serdes_whatever_the_upstream_serdes(engine: Engine) -> None:
    builder = StreamsBuilder()
    lines = builder.stream("lines", key_serde=S, value_serde=S, name="lines")
    lines.map_values(fn.split_words, name="split").to("word-lists", name="lists-out", value_serde="json")
    lines.to("lines-as-is", name="raw-out")
    inputs = [("lines", "l1", "a b", 1_000), ("lines", "l2", "c", 2_000)]

    out = engine.run(builder, inputs, ["word-lists", "lines-as-is"])

    assert out["word-lists"] == [("l1", ["a", "b"], 1_000), ("l2", ["c"], 2_000)]
    assert out["lines-as-is"] == [("l1", "a b", 1_000), ("l2", "c", 2_000)]
