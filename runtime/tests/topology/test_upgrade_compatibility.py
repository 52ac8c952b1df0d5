"""Upgrade compatibility: the changes that break an application's state are found and named (old -> new), and
the ones that do not are reported as compatible. Before/after pairs are real DSL topologies."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from streamapp.dsl import StreamsBuilder
from streamapp.dsl.windows import JoinWindows, SessionWindows, TimeWindows
from streamapp.topology import TopologyDescription
from streamapp.topology.compatibility import Finding, compare


def is_red(key: Any, value: Any) -> bool:
    return bool(value.get("red"))


def color(key: Any, value: Any) -> Any:
    return value["color"]


def upper(value: Any) -> Any:
    return value


def joiner(left: Any, right: Any) -> Any:
    return (left, right)


def counting_app(
    *,
    store: str = "counts",
    count_serde: str = "string",
    repartition: str = "by-color",
    repartition_partitions: int | None = None,
    filtered: bool = False,
    mapped: bool = False,
    windows: Any = None,
    window_store: str = "per-minute",
    sink: str = "color-counts",
    extra_sink: str | None = None,
) -> TopologyDescription:
    """events -> [reds] -> group by color (repartition) -> count -> sink; and a windowed count of events."""
    builder = StreamsBuilder()
    events = builder.stream("events", key_serde="string", value_serde="json", name="events")
    stream = events.filter(is_red, name="reds") if filtered else events
    stream = stream.map_values(upper, name="upper") if mapped else stream
    keyed = stream.select_key(color, name="color-key", key_serde=count_serde)
    if repartition_partitions is not None:
        grouped = keyed.repartition(name=repartition, partitions=repartition_partitions).group_by_key()
    else:
        grouped = keyed.group_by_key(name=repartition)
    grouped.count(name="count", store=store).to_stream(name="changes").to(sink, name="out", value_serde="long")
    windowed = events.group_by_key().windowed_by(windows or TimeWindows.of_size_and_grace(60_000, 5_000))
    windowed.count(name="windowed-count", store=window_store).to_stream(name="windowed-changes").to(
        "per-minute-counts", name="windowed-out"
    )
    if extra_sink is not None:
        events.to(extra_sink, name="copy")
    return builder.build()


def kinds(findings: tuple[Finding, ...]) -> set[tuple[str, str, str | None, str | None]]:
    return {(f.kind, f.name, f.old, f.new) for f in findings}


def test_a_description_compared_with_itself_has_no_finding() -> None:
    report = compare(counting_app(), counting_app(), partitions={"events": 4})
    assert report.findings == ()
    assert report.compatible


def test_a_removed_store_breaks_state_and_is_named() -> None:
    before = counting_app()
    builder = StreamsBuilder()
    builder.stream("events", key_serde="string", value_serde="json", name="events").to("copy", name="copy")
    report = compare(before, builder.build())
    assert not report.compatible
    assert {("store_removed", "counts", "counts", None), ("store_removed", "per-minute", "per-minute", None)} <= kinds(
        report.breaking
    )
    assert "store 'counts' removed" in report.summary()


def test_a_renamed_store_is_one_rename_from_old_to_new_name() -> None:
    report = compare(counting_app(), counting_app(store="color-totals"))
    assert kinds(report.breaking) == {("store_renamed", "counts", "counts", "color-totals")}
    assert report.breaking[0].message() == "store 'counts' renamed to 'color-totals'"


def test_a_changed_key_serde_of_a_store_breaks_state() -> None:
    report = compare(counting_app(count_serde="string"), counting_app(count_serde="json"))
    serdes = [f for f in report.breaking if f.kind == "store_serde_changed"]
    assert [(f.name, f.field, f.old, f.new) for f in serdes] == [("counts", "key_serde", "string", "json")]
    assert serdes[0].message() == "store 'counts': key serde string -> json"


def test_a_changed_serde_of_a_repartition_topic_breaks_the_records_in_flight() -> None:
    report = compare(counting_app(count_serde="string"), counting_app(count_serde="json"))
    assert ("repartition_serde_changed", "by-color-repartition", "string", "json") in kinds(report.breaking)


def test_a_renamed_repartition_topic_is_named_old_to_new() -> None:
    report = compare(counting_app(), counting_app(repartition="per-color"))
    assert kinds(report.breaking) == {
        ("repartition_topic_renamed", "by-color-repartition", "by-color-repartition", "per-color-repartition")
    }


def test_a_changed_window_size_or_grace_breaks_the_window_store() -> None:
    before = counting_app(windows=TimeWindows.of_size_and_grace(60_000, 5_000))
    after = counting_app(windows=TimeWindows.of_size_and_grace(120_000, 0))
    changed = {(f.name, f.field, f.old, f.new) for f in compare(before, after).breaking if f.kind == "window_changed"}
    assert ("per-minute", "window sizeMs", "60000", "120000") in changed
    assert ("per-minute", "window graceMs", "5000", "0") in changed
    assert len(changed) == 2  # the store's windowSizeMs follows the window: not reported twice


def test_a_changed_window_kind_is_named() -> None:
    before = counting_app(windows=TimeWindows.of_size_and_grace(60_000, 0))
    after = counting_app(windows=TimeWindows.of_size_and_grace(60_000, 0).advance_by(10_000))
    changed = {(f.field, f.old, f.new) for f in compare(before, after).breaking if f.kind == "window_changed"}
    assert ("window kind", "tumbling", "hopping") in changed
    assert ("window advanceMs", None, "10000") in changed


def test_a_window_store_that_becomes_a_session_store_is_a_store_type_change() -> None:
    before = counting_app(windows=TimeWindows.of_size_and_grace(60_000, 0))
    after = counting_app(windows=SessionWindows.of_inactivity_gap_and_grace(60_000, 0))
    assert ("store_type_changed", "per-minute", "window", "session") in kinds(compare(before, after).breaking)


def test_a_changed_join_window_breaks_both_join_stores() -> None:
    def join_app(before_ms: int) -> TopologyDescription:
        builder = StreamsBuilder()
        left = builder.stream("clicks", key_serde="string", value_serde="json", name="clicks")
        right = builder.stream("views", key_serde="string", value_serde="json", name="views")
        windows = JoinWindows.of_time_difference_and_grace(10_000, 1_000).before(before_ms)
        left.join(right, joiner, windows, name="joined").to("joined", name="out")
        return builder.build()

    changed = {(f.name, f.field) for f in compare(join_app(10_000), join_app(5_000)).breaking}
    assert {field for _, field in changed} >= {"window beforeMs"}
    assert len({name for name, _ in changed}) == 2  # the left and the right window store


def test_a_changed_partition_count_of_an_explicit_repartition_topic_breaks_state() -> None:
    report = compare(counting_app(repartition_partitions=4), counting_app(repartition_partitions=8))
    assert kinds(report.breaking) == {("partitions_changed", "by-color-repartition", "4", "8")}


def test_a_changed_source_partition_count_breaks_source_and_changelog_partitioning() -> None:
    report = compare(counting_app(), counting_app(), partitions={"events": 4}, new_partitions={"events": 6})
    changed = {(f.subject, f.name, f.old, f.new) for f in report.breaking}
    assert ("topic", "events", "4", "6") in changed
    assert ("repartition topic", "by-color-repartition", "4", "6") in changed
    assert ("changelog topic", "per-minute-changelog", "4", "6") in changed


def test_stateless_changes_new_sinks_and_new_stores_are_compatible() -> None:
    before = counting_app()
    after = counting_app(filtered=True, mapped=True, extra_sink="events-copy")
    report = compare(before, after, partitions={"events": 4})
    assert report.compatible, report.summary()
    found = kinds(report.findings)
    assert ("node_added", "reds", None, "filter") in found
    assert ("node_added", "upper", None, "map_values") in found
    assert ("sink_added", "events-copy", None, "events-copy") in found


def test_a_new_store_is_compatible() -> None:
    builder = StreamsBuilder()
    builder.stream("events", key_serde="string", value_serde="json", name="events").to("copy", name="copy")
    report = compare(builder.build(), counting_app())
    assert report.compatible, report.summary()
    assert {("store_added", "counts"), ("store_added", "per-minute")} <= {(f.kind, f.name) for f in report.findings}


def test_a_changed_user_function_is_a_compatible_node_change() -> None:
    doc = counting_app().to_dict()
    changed = {**doc, "nodes": [dict(n) for n in doc["nodes"]]}
    next(n for n in changed["nodes"] if n["name"] == "color-key")["mapper"] = f"{__name__}:upper"
    report = compare(counting_app(), TopologyDescription.from_dict(changed))
    assert report.compatible
    assert [(f.kind, f.name, f.field) for f in report.findings] == [("node_changed", "color-key", "mapper")]


# -- properties over generated DSL topologies -------------------------------------------------------------

apps = st.builds(
    counting_app,
    store=st.sampled_from(["counts", "totals"]),
    count_serde=st.sampled_from(["string", "json"]),
    repartition=st.sampled_from(["by-color", "per-color"]),
    repartition_partitions=st.sampled_from([None, 2, 3]),
    filtered=st.booleans(),
    mapped=st.booleans(),
    windows=st.sampled_from(
        [
            TimeWindows.of_size_and_grace(60_000, 0),
            TimeWindows.of_size_and_grace(60_000, 5_000),
            TimeWindows.of_size_and_grace(60_000, 0).advance_by(30_000),
            SessionWindows.of_inactivity_gap_and_grace(60_000, 0),
        ]
    ),
    window_store=st.sampled_from(["per-minute", "windowed"]),
    sink=st.sampled_from(["color-counts", "colors"]),
    extra_sink=st.sampled_from([None, "events-copy"]),
)
partition_counts = st.fixed_dictionaries({"events": st.integers(min_value=1, max_value=4)})


@settings(max_examples=60, deadline=None)
@given(app=apps, partitions=partition_counts)
def test_any_description_compared_with_itself_has_no_finding(app: TopologyDescription, partitions: Any) -> None:
    assert compare(app, app, partitions=partitions).findings == ()


@settings(max_examples=60, deadline=None)
@given(a=apps, b=apps, pa=partition_counts, pb=partition_counts)
def test_findings_name_the_same_things_in_both_directions(
    a: TopologyDescription, b: TopologyDescription, pa: Any, pb: Any
) -> None:
    forward = compare(a, b, partitions=pa, new_partitions=pb)
    backward = compare(b, a, partitions=pb, new_partitions=pa)
    assert {n for f in forward.findings for n in f.names} == {n for f in backward.findings for n in f.names}
    assert (forward.findings == ()) == (backward.findings == ())


@pytest.mark.parametrize("field", ["count_serde", "store", "repartition"])
def test_every_breaking_finding_names_its_change_in_the_summary(field: str) -> None:
    other: dict[str, Any] = {field: {"count_serde": "json", "store": "totals", "repartition": "per-color"}[field]}
    report = compare(counting_app(), counting_app(**other))
    assert report.breaking
    assert all(f.message() in report.summary(limit=10) for f in report.breaking)


def test_findings_come_in_description_order_so_a_condition_message_is_stable() -> None:
    before = counting_app(windows=TimeWindows.of_size_and_grace(60_000, 0))
    after = counting_app(count_serde="json", windows=TimeWindows.of_size_and_grace(60_000, 1_000))
    assert [(f.kind, f.name, f.field) for f in compare(before, after).breaking] == [
        ("store_serde_changed", "counts", "key_serde"),
        ("window_changed", "per-minute", "window graceMs"),
        ("repartition_serde_changed", "by-color-repartition", "key_serde"),
    ]


def test_a_global_store_change_is_a_compatible_node_change() -> None:
    def global_app(store: str, value_serde: str) -> TopologyDescription:
        builder = StreamsBuilder()
        carriers = builder.global_table("carriers", store=store, key_serde="string", value_serde=value_serde)
        events = builder.stream("events", key_serde="string", value_serde="json", name="events")
        events.join(carriers, color, joiner, name="enriched").to("enriched", name="out")
        return builder.build()

    report = compare(global_app("carriers-store", "json"), global_app("carrier-names", "string"))
    assert report.compatible, report.summary()
    assert {f.kind for f in report.findings} == {"node_changed"}


def test_a_timestamped_store_that_becomes_plain_breaks_state_and_the_other_way_is_compatible() -> None:
    def store_app(aggregated: bool) -> TopologyDescription:
        builder = StreamsBuilder()
        events = builder.stream("events", key_serde="string", value_serde="json", name="events")
        if aggregated:
            events.group_by_key().count(name="count", store="counts")
        else:
            builder.add_state_store("counts", key_serde="string", value_serde="long")
            events.process(f"{__name__}:upper", stores=["counts"], name="count")
        return builder.build()

    assert ("store_type_changed", "counts", "timestamped", "plain") in kinds(
        compare(store_app(True), store_app(False)).breaking
    )
    upgraded = compare(store_app(False), store_app(True))
    assert upgraded.compatible
    assert ("store_upgraded", "counts", "plain", "timestamped") in kinds(upgraded.findings)
