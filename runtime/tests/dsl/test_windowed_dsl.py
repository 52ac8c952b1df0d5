"""The windowed DSL: windowed_by(...).count/reduce/aggregate and suppress lower to windowed nodes and stores."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from streamapp import StreamsBuilder
from streamapp.dsl.windowed import SessionWindowedKStream
from streamapp.dsl.windows import JoinWindows, SessionWindows, SlidingWindows, Suppressed, TimeWindows
from streamapp.topology import TopologyDescription, TopologyError


def longest(aggregate: str, value: str) -> str:
    return max(aggregate, value, key=len)


def empty() -> list[Any]:
    return []


def append(key: str, value: Any, aggregate: list[Any]) -> list[Any]:
    return [*aggregate, value]


def concat(key: str, first: list[Any], second: list[Any]) -> list[Any]:
    return first + second


def carrier(key: str, value: dict[str, Any]) -> str:
    return str(value["carrier"])


def test_tumbling_count_lowers_to_a_windowed_count_with_a_window_store_and_a_windowed_sink_serde() -> None:
    builder = StreamsBuilder()
    (
        builder.stream("in", key_serde="string", value_serde="json", name="in")
        .group_by_key()
        .windowed_by(TimeWindows.of_size_and_grace(timedelta(minutes=1), timedelta(seconds=10)))
        .count(name="per-minute")
        .to_stream(name="changes")
        .to("out", name="out")
    )
    doc = builder.build().to_dict()
    assert doc["nodes"][1] == {
        "name": "per-minute",
        "type": "windowed_count",
        "input": "in",
        "store": "per-minute-store",
        "windows": {"type": "tumbling", "sizeMs": 60_000, "graceMs": 10_000},
    }
    assert doc["nodes"][3]["keySerde"] == "windowed:string:60000"
    assert doc["nodes"][3]["valueSerde"] == "long"
    assert doc["stores"] == [
        {
            "name": "per-minute-store",
            "type": "window",
            "keySerde": "string",
            "valueSerde": "long",
            "retentionMs": 70_000,
            "windowSizeMs": 60_000,
        }
    ]


def test_a_re_keyed_stream_is_repartitioned_before_the_windowed_aggregation() -> None:
    builder = StreamsBuilder()
    (
        builder.stream("flights", key_serde="string", value_serde="json", name="flights")
        .group_by(carrier, name="by-carrier", key_serde="string")
        .windowed_by(TimeWindows.of_size_with_no_grace(3_600_000).advance_by(600_000))
        .reduce(longest, name="longest", retention_ms=7_200_000)
    )
    desc = builder.build()
    assert [node.type for node in desc.nodes] == ["source", "select_key", "repartition", "windowed_reduce"]
    assert desc.node("longest").inputs() == ["by-carrier"]
    assert desc.store("longest-store").retention_ms == 7_200_000
    assert desc.node("longest").windows.type == "hopping"  # type: ignore[union-attr]


def test_session_aggregate_and_sliding_count_use_session_and_window_stores() -> None:
    builder = StreamsBuilder()
    stream = builder.stream("clicks", key_serde="string", value_serde="json", name="clicks")
    sessions = (
        stream.group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_and_grace(30_000, 5_000))
        .aggregate(empty, append, concat, name="visits", value_serde="json")
    )
    stream.group_by_key().windowed_by(SlidingWindows.of_time_difference_with_no_grace(1_000)).count(name="nearby")
    desc = builder.build()
    assert sessions.key_serde == "session_windowed:string"
    assert desc.store("visits-store").type == "session"
    assert desc.store("visits-store").retention_ms == 35_000
    assert desc.node("visits").functions()["merger"].endswith(":concat")
    assert desc.store("nearby-store").retention_ms == 2_000
    assert desc.store("nearby-store").window_size_ms == 1_000


def test_suppress_adds_a_suppress_node_with_a_buffer_store_named_after_it() -> None:
    builder = StreamsBuilder()
    (
        builder.stream("in", key_serde="string", value_serde="json", name="in")
        .group_by_key()
        .windowed_by(TimeWindows.of_size_with_no_grace(1_000))
        .count(name="counts")
        .suppress(Suppressed.until_window_closes().with_name("final"))
        .to_stream(name="finals")
        .to("out", name="out")
    )
    desc = builder.build()
    assert desc.node("final").type == "suppress"
    assert desc.node("final").inputs() == ["counts"]
    store = desc.store("final-store")
    assert (store.type, store.key_serde, store.value_serde) == ("key_value", "windowed:string:1000", "long")


def test_a_retention_shorter_than_size_plus_grace_is_refused() -> None:
    grouped = StreamsBuilder().stream("in", key_serde="string", name="in").group_by_key()
    windowed = grouped.windowed_by(TimeWindows.of_size_and_grace(100, 50))
    with pytest.raises(ValueError, match=r"retention \(120 ms\) must be at least .* \(150 ms\)"):
        windowed.count(retention_ms=120)


def test_lambdas_cannot_be_exported() -> None:
    builder = StreamsBuilder()
    grouped = builder.stream("in", key_serde="string", name="in").group_by_key()
    grouped.windowed_by(TimeWindows.of_size_with_no_grace(10)).reduce(lambda a, b: a, name="sum")
    description = builder.build()
    with pytest.raises(TopologyError, match="node 'sum': reducer: a lambda"):
        description.to_yaml()


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: TimeWindows.of_size_with_no_grace(0), "'sizeMs' must be larger than zero"),
        (lambda: TimeWindows.of_size_with_no_grace(10).advance_by(20), "at most sizeMs"),
        (lambda: SessionWindows.of_inactivity_gap_with_no_grace(0), "'gapMs' must be larger than zero"),
        (lambda: SlidingWindows.of_time_difference_and_grace(10, -1), "'graceMs': Input should be greater"),
        (lambda: TimeWindows.of_size_with_no_grace(timedelta(microseconds=1500)), "whole number of milliseconds"),
        (lambda: JoinWindows.of_time_difference_with_no_grace(5).before(-6), "must not be negative"),
    ],
)
def test_invalid_windows_are_refused_when_built(make: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()


def test_join_windows_default_to_a_symmetric_difference() -> None:
    spec = JoinWindows.of_time_difference_and_grace(5_000, 1_000).after(2_000).spec()
    assert (spec.before_ms, spec.after_ms, spec.grace_ms) == (5_000, 2_000, 1_000)


def test_window_builders_and_windowed_keys_are_public_api() -> None:
    import streamapp
    from streamapp import dsl, windowed

    assert streamapp.TimeWindows is TimeWindows
    assert streamapp.Suppressed is Suppressed
    assert streamapp.Windowed is windowed.Windowed
    assert {"TimeWindows", "SessionWindows", "SlidingWindows", "JoinWindows", "Suppressed", "Windowed"} <= set(
        streamapp.__all__
    )
    assert dsl.StreamsBuilder is StreamsBuilder


def suppressed_counts(suppressed: Suppressed) -> Any:
    builder = StreamsBuilder()
    (
        builder.stream("in", key_serde="string", value_serde="json", name="in")
        .group_by_key()
        .windowed_by(TimeWindows.of_size_with_no_grace(1_000))
        .count(name="counts")
        .suppress(suppressed.with_name("final"))
        .to_stream(name="finals")
        .to("out", name="out")
    )
    return builder.build().to_dict()["nodes"][2]


def test_buffer_configs_follow_kafkas_strict_and_eager_defaults_into_the_node() -> None:
    BufferConfig = Suppressed.BufferConfig
    assert suppressed_counts(Suppressed.until_window_closes()) == {
        "name": "final",
        "type": "suppress",
        "input": "counts",
        "store": "final-store",
        "until": "window_closes",
    }
    strict = Suppressed.until_window_closes(BufferConfig.max_records(100).with_max_bytes(4096).shut_down_when_full())
    assert {k: v for k, v in suppressed_counts(strict).items() if k in ("maxRecords", "maxBytes", "whenFull")} == {
        "maxRecords": 100,
        "maxBytes": 4096,
    }
    eager = Suppressed.until_time_limit(timedelta(seconds=5), BufferConfig.max_bytes(1 << 20))
    assert {
        k: v for k, v in suppressed_counts(eager).items() if k in ("until", "timeLimitMs", "maxBytes", "whenFull")
    } == {
        "until": "time_limit",
        "timeLimitMs": 5000,
        "maxBytes": 1048576,
        "whenFull": "emit_early",
    }
    unbounded = Suppressed.until_time_limit(10, BufferConfig.max_records(5).with_no_bound())
    assert "whenFull" not in suppressed_counts(unbounded)


def test_until_window_closes_refuses_a_buffer_that_emits_early_and_bad_bounds_are_refused() -> None:
    BufferConfig = Suppressed.BufferConfig
    with pytest.raises(ValueError, match="needs a strict buffer config"):
        Suppressed.until_window_closes(BufferConfig.max_records(3))
    with pytest.raises(ValueError, match="maxRecords must be a non-negative int"):
        BufferConfig.max_records(-1)
    with pytest.raises(ValueError, match="timeToWaitForMoreEvents must not be negative"):
        Suppressed.until_time_limit(-5, BufferConfig.unbounded())
    with pytest.raises(TypeError, match="expects a BufferConfig"):
        Suppressed.until_time_limit(5, 10)  # type: ignore[arg-type]


def test_emit_strategy_on_window_close_is_recorded_on_the_aggregation_and_the_default_is_left_out() -> None:
    """Kafka's ``TimeWindowedKStream.emitStrategy`` (KIP-825) returns the same windowed stream; the node records
    ``emitStrategy: on_window_close``, and ``on_window_update`` (the default) records nothing."""
    from streamapp import EmitStrategy

    builder = StreamsBuilder()
    grouped = builder.stream("in", key_serde="string", value_serde="json", name="in").group_by_key()
    windowed = grouped.windowed_by(TimeWindows.of_size_and_grace(10, 5))
    assert windowed.emit_strategy(EmitStrategy.on_window_close()) is windowed
    windowed.count(name="final").to_stream(name="a").to("a", name="a-out")
    other = grouped.windowed_by(TimeWindows.of_size_and_grace(10, 5))
    assert not isinstance(other, SessionWindowedKStream)
    other.emit_strategy(EmitStrategy.on_window_update()).count(name="every").to_stream(name="b").to("b", name="b-out")

    desc = builder.build()

    assert desc.to_dict()["nodes"][1]["emitStrategy"] == "on_window_close"
    assert "emitStrategy" not in desc.to_dict()["nodes"][4]
    assert TopologyDescription.from_dict(desc.to_dict()).to_dict() == desc.to_dict()  # what `topology export` writes


def test_emit_strategy_takes_only_an_emit_strategy_and_sliding_windows_record_it_too() -> None:
    from streamapp import EmitStrategy

    builder = StreamsBuilder()
    grouped = builder.stream("in", key_serde="string", value_serde="json", name="in").group_by_key()
    sliding = grouped.windowed_by(SlidingWindows.of_time_difference_and_grace(10, 5))
    assert not isinstance(sliding, SessionWindowedKStream)
    with pytest.raises(TypeError, match="emit_strategy expects"):
        sliding.emit_strategy("on_window_close")  # type: ignore[arg-type]
    sliding.emit_strategy(EmitStrategy.on_window_close()).count(name="near").to_stream(name="a").to("a", name="o")
    assert builder.build().to_dict()["nodes"][1]["emitStrategy"] == "on_window_close"
