"""Window specs, windowed node types and window/session stores in the topology description."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import ValidationError
from streamapp.topology import TopologyDescription, TopologyError
from streamapp.topology.windows import JoinWindowsSpec, WindowSpec

DOC: dict[str, Any] = {
    "nodes": [
        {"name": "in", "type": "source", "topics": ["in"], "keySerde": "string", "valueSerde": "json"},
        {
            "name": "counts",
            "type": "windowed_count",
            "input": "in",
            "store": "counts-store",
            "windows": {"type": "hopping", "sizeMs": 10, "advanceMs": 5, "graceMs": 5},
        },
        {"name": "final", "type": "suppress", "input": "counts", "store": "final-store"},
        {"name": "changes", "type": "to_stream", "input": "final"},
        {"name": "out", "type": "sink", "input": "changes", "topic": "o", "keySerde": "windowed:string:10"},
    ],
    "stores": [
        {"name": "counts-store", "type": "window", "retentionMs": 15, "windowSizeMs": 10, "valueSerde": "long"},
        {"name": "final-store", "keySerde": "windowed:string:10", "valueSerde": "long"},
    ],
}


def changed(mutate: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    doc = copy.deepcopy(DOC)
    mutate(doc)
    return doc


def test_windowed_nodes_and_stores_round_trip_through_yaml() -> None:
    desc = TopologyDescription.from_dict(DOC)
    again = TopologyDescription.from_yaml(desc.to_yaml())
    assert again == desc
    assert again.to_dict()["nodes"][1]["windows"] == {"type": "hopping", "sizeMs": 10, "advanceMs": 5, "graceMs": 5}
    assert desc.output_kinds()["counts"] == "table"
    assert desc.output_kinds()["final"] == "table"


def test_window_and_session_changelogs_are_compact_delete_with_retention_plus_one_day() -> None:
    topics = {t.name: t for t in TopologyDescription.from_dict(DOC).internal_topics("app", {"in": 3})}
    assert topics["app-counts-store-changelog"].config == {
        "cleanup.policy": "compact,delete",
        "retention.ms": "86400015",
    }
    assert topics["app-counts-store-changelog"].partitions == 3
    assert topics["app-final-store-changelog"].config == {"cleanup.policy": "compact"}


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["stores"][0].update(retentionMs=14), "retentionMs (14) must be at least the window's size plus"),
        (lambda d: d["stores"][0].update(windowSizeMs=5), "windowSizeMs (5) must be the window's size (10)"),
        (
            lambda d: d["stores"][0].update(type="session", windowSizeMs=None),
            "must be a window store for hopping windows, not session",
        ),
        (lambda d: d["stores"][0].pop("retentionMs"), "a window store needs 'retentionMs'"),
        (lambda d: d["stores"][1].update(retentionMs=5), "'retentionMs' applies only to window and session stores"),
        (lambda d: d["nodes"][1]["windows"].update(advanceMs=11), "'advanceMs' must be larger than zero and at most"),
        (lambda d: d["nodes"][1]["windows"].update(type="sliding"), "a sliding window needs 'timeDifferenceMs'"),
        (lambda d: d["nodes"][1]["windows"].update(graceMs=-1), "graceMs"),
        (lambda d: d["nodes"][1].update(type="windowed_reduce"), "'reducer' is required"),
        (lambda d: d["nodes"][4].update(keySerde="windowed:avro"), "unknown serde 'windowed:avro'"),
    ],
)
def test_invalid_windowed_topologies_name_the_node_or_store_and_the_problem(
    mutate: Callable[[dict[str, Any]], None], message: str
) -> None:
    with pytest.raises(TopologyError, match=re.escape(message)):
        TopologyDescription.from_dict(changed(mutate))


def test_suppress_needs_a_windowed_aggregation_upstream() -> None:
    def count_instead(doc: dict[str, Any]) -> None:
        doc["nodes"][1] = {"name": "counts", "type": "count", "input": "in", "store": "counts-store"}
        doc["stores"][0] = {"name": "counts-store", "valueSerde": "long"}

    with pytest.raises(TopologyError, match=r"'final': .*only defined for windowed computations; got in -> counts"):
        TopologyDescription.from_dict(changed(count_instead))


def test_session_aggregates_need_a_merger_and_other_windows_refuse_one() -> None:
    def session_aggregate(doc: dict[str, Any]) -> None:
        doc["nodes"][1].update(
            type="windowed_aggregate", initializer="m:init", aggregator="m:agg", windows={"type": "session", "gapMs": 5}
        )
        doc["stores"][0] = {"name": "counts-store", "type": "session", "retentionMs": 5}

    with pytest.raises(TopologyError, match="needs 'merger'"):
        TopologyDescription.from_dict(changed(session_aggregate))
    ok = changed(session_aggregate)
    ok["nodes"][1]["merger"] = "m:merge"
    assert TopologyDescription.from_dict(ok).node("counts").functions() == {
        "initializer": "m:init",
        "aggregator": "m:agg",
        "merger": "m:merge",
    }


@pytest.mark.parametrize(
    ("spec", "timestamp", "windows"),
    [
        (WindowSpec(type="tumbling", size_ms=5), 7, [(5, 10)]),
        (WindowSpec(type="tumbling", size_ms=5), 5, [(5, 10)]),
        (WindowSpec(type="hopping", size_ms=10, advance_ms=5), 12, [(5, 15), (10, 20)]),
        (WindowSpec(type="hopping", size_ms=10, advance_ms=3), 4, [(0, 10), (3, 13)]),
        (WindowSpec(type="hopping", size_ms=10, advance_ms=3), -1, []),
    ],
)
def test_time_windows_for_a_timestamp_follow_kafkas_time_windows(
    spec: WindowSpec, timestamp: int, windows: list[tuple[int, int]]
) -> None:
    assert spec.windows_for(timestamp) == windows


def test_close_grace_and_default_retention_follow_kafka() -> None:
    assert WindowSpec(type="tumbling", size_ms=10, grace_ms=3).min_retention_ms() == 13
    assert WindowSpec(type="sliding", time_difference_ms=10, grace_ms=3).min_retention_ms() == 23
    session = WindowSpec(type="session", gap_ms=10, grace_ms=3)
    assert session.min_retention_ms() == 13
    assert session.close_grace_ms() == 13
    assert WindowSpec(type="tumbling", size_ms=10, grace_ms=3).close_grace_ms() == 3


def test_join_windows_size_and_store_retention() -> None:
    spec = JoinWindowsSpec.model_validate({"beforeMs": 5, "afterMs": 10, "graceMs": 2})
    assert (spec.size, spec.store_retention_ms()) == (15, 17)
    with pytest.raises(ValidationError, match="must not be negative"):
        JoinWindowsSpec(before_ms=-5, after_ms=1)


def test_suppress_buffer_configs_round_trip_through_yaml() -> None:
    def bounded(doc: dict[str, Any]) -> None:
        doc["nodes"][2].update(until="time_limit", timeLimitMs=500, maxRecords=10, maxBytes=2048, whenFull="emit_early")

    desc = TopologyDescription.from_dict(changed(bounded))
    again = TopologyDescription.from_yaml(desc.to_yaml())
    assert again == desc
    assert again.to_dict()["nodes"][2] == {
        "name": "final",
        "type": "suppress",
        "input": "counts",
        "store": "final-store",
        "until": "time_limit",
        "timeLimitMs": 500,
        "maxRecords": 10,
        "maxBytes": 2048,
        "whenFull": "emit_early",
    }


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"whenFull": "emit_early", "maxRecords": 3}, "needs a strict buffer"),
        ({"until": "time_limit"}, "needs 'timeLimitMs'"),
        ({"timeLimitMs": 5}, "'timeLimitMs' applies only to suppress until time_limit"),
        ({"until": "time_limit", "timeLimitMs": -1}, "greater than or equal to 0"),
        ({"maxRecords": -1}, "greater than or equal to 0"),
    ],
)
def test_invalid_suppress_buffer_configs_are_refused(fields: dict[str, Any], message: str) -> None:
    with pytest.raises((TopologyError, ValidationError), match=message):
        TopologyDescription.from_dict(changed(lambda doc: doc["nodes"][2].update(fields)))


def test_suppress_until_time_limit_needs_no_windowed_aggregation_upstream() -> None:
    def count_instead(doc: dict[str, Any]) -> None:
        doc["nodes"][1] = {"name": "counts", "type": "count", "input": "in", "store": "counts-store"}
        doc["nodes"][2].update(until="time_limit", timeLimitMs=100)
        doc["nodes"][4]["keySerde"] = "string"
        doc["stores"][0] = {"name": "counts-store", "valueSerde": "long"}
        doc["stores"][1]["keySerde"] = "string"

    assert TopologyDescription.from_dict(changed(count_instead)).node("final").until == "time_limit"


def test_emit_strategy_round_trips_and_is_left_out_by_default() -> None:
    """``emitStrategy`` (Kafka's ``EmitStrategy``, KIP-825) is left out by default, kept when set, refused when
    unknown."""
    assert "emitStrategy" not in TopologyDescription.from_dict(DOC).to_dict()["nodes"][1]
    closing = changed(lambda doc: doc["nodes"][1].update(emitStrategy="on_window_close"))
    desc = TopologyDescription.from_yaml(TopologyDescription.from_dict(closing).to_yaml())
    assert desc.to_dict()["nodes"][1]["emitStrategy"] == "on_window_close"
    assert desc.node("counts").emits_on_window_close  # type: ignore[attr-defined]
    with pytest.raises(TopologyError, match="emitStrategy"):
        TopologyDescription.from_dict(changed(lambda doc: doc["nodes"][1].update(emitStrategy="on_window_end")))
