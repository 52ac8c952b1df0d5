"""The harness itself: a keyed count through a repartition topic gives the exact same records on both engines."""

from __future__ import annotations

from streamapp import StreamsBuilder

from conformance.functions import carrier, is_departed
from conformance.harness import Engine

FLIGHTS = [
    ("flights", "N1", {"carrier": "UA", "dep_time": 517}, 1_000),
    ("flights", "N2", {"carrier": "AA", "dep_time": 533}, 2_000),
    ("flights", "N3", {"carrier": "UA", "dep_time": None}, 3_000),
    ("flights", "N4", {"carrier": "B6", "dep_time": 544}, 4_000),
    ("flights", "N5", {"carrier": "UA", "dep_time": 554}, 5_000),
    ("flights", "N1", {"carrier": "AA", "dep_time": 600}, 6_000),
]


def departures_per_carrier() -> StreamsBuilder:
    builder = StreamsBuilder()
    (
        builder.stream("flights", key_serde="string", value_serde="json", name="flights")
        .filter(is_departed, name="departed")
        .group_by(carrier, name="per-carrier", key_serde="string")
        .count(store="counts", name="count")
        .to_stream(name="changes")
        .to("departures", key_serde="string", value_serde="long", name="out")
    )
    return builder


def test_count_through_a_repartition_topic_is_exact_on_every_engine(engine: Engine) -> None:
    out = engine.run(departures_per_carrier(), FLIGHTS, ["departures", "{application_id}-counts-changelog"])

    assert out["departures"] == [
        ("UA", 1, 1_000),
        ("AA", 1, 2_000),
        ("B6", 1, 4_000),
        ("UA", 2, 5_000),
        ("AA", 2, 6_000),
    ]
    changelog = {key: value for key, value, _ in out["{application_id}-counts-changelog"]}
    assert changelog == {"UA": 2, "AA": 2, "B6": 1}


def test_engines_agree_on_final_counts_with_several_partitions(engine: Engine) -> None:
    inputs = [("flights", f"N{i}", {"carrier": f"C{i % 5}", "dep_time": i}, 1_000 * (i + 1)) for i in range(40)]

    out = engine.run(departures_per_carrier(), inputs, ["departures"], partitions={"flights": 3}, compare="final")

    latest: dict[str, int] = {}
    for key, value, _ in out["departures"]:
        assert value == latest.get(key, 0) + 1, f"{key}: counts must go up by one per record"
        latest[key] = value
    assert latest == {f"C{c}": 8 for c in range(5)}


def test_engines_agree_record_for_record_when_inputs_are_processed_one_at_a_time(engine: Engine) -> None:
    inputs = [("flights", f"N{i}", {"carrier": f"C{i % 3}", "dep_time": i}, 1_000 * (i + 1)) for i in range(8)]

    out = engine.run(
        departures_per_carrier(), inputs, ["departures"], partitions={"flights": 3}, one_at_a_time=True, compare=True
    )

    assert out["departures"] == [(f"C{i % 3}", i // 3 + 1, 1_000 * (i + 1)) for i in range(8)]


def test_exactly_once_runs_give_the_same_records_on_every_engine(engine: Engine) -> None:
    """Under exactly_once_v2 the broker's repartition and output topics carry transaction markers after the last
    record; the harness must still see the run as finished, and read only committed records."""
    config = {"processing.guarantee": "exactly_once_v2"}

    out = engine.run(departures_per_carrier(), FLIGHTS, ["departures"], config, compare=True)

    assert out["departures"] == [
        ("UA", 1, 1_000),
        ("AA", 1, 2_000),
        ("B6", 1, 4_000),
        ("UA", 2, 5_000),
        ("AA", 2, 6_000),
    ]
