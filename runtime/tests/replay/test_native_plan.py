"""Which sub-topologies the replay runs with Spark's own operators (``streamapp.replay.spark.native``): exactly the
keyed-count shape whose bytes Spark can write itself; anything else takes the runtime's task, named per node."""

from __future__ import annotations

from streamapp import StreamsBuilder
from streamapp.dsl.windows import SlidingWindows, TimeWindows
from streamapp.partitioner import partition_for_key
from streamapp.replay.progress import PROGRESS_PREFIX, ReplayProgress, parse_progress
from streamapp.replay.shapes import (
    PATH_NATIVE_COUNT,
    PATH_NATIVE_WINDOWED_COUNT,
    PATH_TASK,
    native_count,
    native_windowed_count,
    node_paths,
)
from streamapp.replay.spark.native import (
    COUNTED,
    DROPPED,
    FALLBACK,
    Columns,
    WindowedBatchClassifier,
    classify_batch,
    classify_windowed_batch,
)
from streamapp.replay.spark.partitions import partitions_for_keys
from streamapp.topology import TopologyDescription

CONFIG = {"application.id": "app"}


def count_topology(
    key_serde: str = "string", sink_value_serde: str = "json", *, mapped: bool = False
) -> TopologyDescription:
    builder = StreamsBuilder()
    stream = builder.stream("events", key_serde=key_serde, value_serde="json", name="events")
    if mapped:
        stream = stream.filter("replay.functions:only_even", name="kept")
    (
        stream.group_by_key()
        .count(store="counts", name="count")
        .to_stream(name="changes")
        .to("out", key_serde=key_serde, value_serde=sink_value_serde, name="out")
    )
    return builder.build()


def test_a_keyed_count_of_a_source_topic_runs_natively_with_its_topics_and_changelog() -> None:
    description = count_topology()
    count = native_count(description, description.subtopologies()[0], CONFIG)
    assert count is not None
    assert (count.source_topic, count.sink_topic, count.changelog_topic) == ("events", "out", "app-counts-changelog")
    assert node_paths(description, CONFIG) == dict.fromkeys(["events", "count", "changes", "out"], PATH_NATIVE_COUNT)


def test_a_count_behind_another_node_or_with_bytes_spark_cannot_write_takes_the_task_path() -> None:
    for description in (
        count_topology(mapped=True),
        count_topology(key_serde="json"),
        count_topology(sink_value_serde="string"),
    ):
        assert native_count(description, description.subtopologies()[0], CONFIG) is None
        assert set(node_paths(description, CONFIG).values()) == {PATH_TASK}


def test_default_serdes_in_the_config_keep_the_count_on_the_task_path() -> None:
    description = count_topology()
    assert native_count(description, description.subtopologies()[0], {**CONFIG, "default.key.serde": "json"}) is None


def test_classify_marks_counted_dropped_and_fallback_records_with_the_runtimes_partition() -> None:
    description = count_topology()
    count = native_count(description, description.subtopologies()[0], CONFIG)
    assert count is not None
    batch = Columns(
        0,
        [0, 1, 2, 3, 4, 5],
        [b"a", None, b"b", b"c", b"\xff", b"d"],
        [b"{}", b"1", b" null ", b"{bad", b"1", b"2"],
        [5, 5, 5, 5, 5, -1],
    )
    out = classify_batch(batch, count, 3, {})
    assert out.column("status").to_pylist() == [COUNTED, DROPPED, DROPPED, FALLBACK, FALLBACK, FALLBACK]
    assert out.column("out_partition").to_pylist() == [partition_for_key(b"a", 3), -1, -1, -1, -1, -1]


def windowed_topology(windows: object, sink_key_serde: str = "windowed:string") -> TopologyDescription:
    builder = StreamsBuilder()
    (
        builder.stream("events", key_serde="string", value_serde="json", name="events")
        .group_by_key()
        .windowed_by(windows)  # type: ignore[arg-type]
        .count(store="hourly", name="count")
        .to_stream(name="changes")
        .to("out", key_serde=sink_key_serde, value_serde="json", name="out")
    )
    return builder.build()


def test_a_tumbling_or_hopping_windowed_count_of_a_source_topic_runs_natively() -> None:
    hourly = TimeWindows.of_size_and_grace(3_600_000, 600_000)
    for windows in (hourly, hourly.advance_by(900_000)):
        description = windowed_topology(windows)
        count = native_windowed_count(description, description.subtopologies()[0], CONFIG)
        assert count is not None
        assert (count.count.sink_topic, count.count.changelog_topic, count.windows) == (
            "out",
            "app-hourly-changelog",
            windows.spec(),
        )
        assert set(node_paths(description, CONFIG).values()) == {PATH_NATIVE_WINDOWED_COUNT}


def test_sliding_windows_or_a_sink_key_spark_cannot_write_keep_the_windowed_count_on_the_task_path() -> None:
    for description in (
        windowed_topology(SlidingWindows.of_time_difference_and_grace(60_000, 0)),
        windowed_topology(TimeWindows.of_size_with_no_grace(60_000), sink_key_serde="windowed:json"),
    ):
        assert native_windowed_count(description, description.subtopologies()[0], CONFIG) is None
        assert set(node_paths(description, CONFIG).values()) == {PATH_TASK}


def test_a_windowed_count_that_emits_on_window_close_takes_the_task_path() -> None:
    """Spark's fold gives every update; ``EmitStrategy.on_window_close()`` (KIP-825) forwards only final results, which
    the runtime's processor emits in the task (docs/replay.md)."""
    description = windowed_topology(TimeWindows.of_size_and_grace(60_000, 0))
    document = description.to_dict()
    document["nodes"][1]["emitStrategy"] = "on_window_close"
    closing = TopologyDescription.from_dict(document)
    assert native_windowed_count(closing, closing.subtopologies()[0], CONFIG) is None
    assert set(node_paths(closing, CONFIG).values()) == {PATH_TASK}


def test_classify_gives_counted_records_their_windows_and_the_runtimes_partition_of_each_windowed_key() -> None:
    windows = TimeWindows.of_size_and_grace(10, 5).advance_by(5)
    description = windowed_topology(windows)
    count = native_windowed_count(description, description.subtopologies()[0], CONFIG)
    assert count is not None
    batch = Columns(
        0, [0, 1, 2, 3, 4], [b"a", None, b"b", b"c", b"d"], [b"{}", b"1", None, b"{bad", b"1"], [12, 5, 3, 5, -1]
    )
    out = classify_windowed_batch(batch, count, 3)
    assert out.column("status").to_pylist() == [COUNTED, DROPPED, COUNTED, FALLBACK, FALLBACK]
    assert out.column("starts").to_pylist() == [[5, 10], [], [0], [], []]
    expected = [
        [partition_for_key(b"a" + s.to_bytes(8, "big"), 3) for s in (5, 10)],
        [],
        [partition_for_key(b"b" + bytes(8), 3)],
        [],
        [],
    ]
    assert out.column("out_partitions").to_pylist() == expected


def test_the_windowed_classifier_carries_the_tasks_stream_time_across_the_batches_of_one_read() -> None:
    """Kafka's ``KStreamWindowAggregate``: stream time is the largest timestamp the processor has seen (null keys
    are dropped before it moves); the read's second batch starts from the first batch's stream time."""
    windows = TimeWindows.of_size_and_grace(10, 5)
    description = windowed_topology(windows)
    count = native_windowed_count(description, description.subtopologies()[0], CONFIG)
    assert count is not None
    first = Columns(0, [0, 1, 2], [b"a", None, b"b"], [b"1", b"1", b"1"], [30, 90, 20])
    second = Columns(0, [3, 4], [b"a", b"c"], [b"1", b"1"], [25, 40])

    out = list(WindowedBatchClassifier(count, 3).classify_read(iter([first, second])))

    assert [b.column("stream_time").to_pylist() for b in out] == [[30, 30, 30], [30, 40]]


def test_the_vectorized_partitioner_is_kafkas_murmur2_partitioner_for_every_key_length() -> None:
    keys = [bytes((i * 37 + j * 11) % 256 for j in range(length)) for length in range(23) for i in range(40)]
    for partitions in (1, 2, 5, 12):
        assert partitions_for_keys(keys, partitions) == [partition_for_key(k, partitions) for k in keys]


def test_a_progress_line_in_a_log_reads_back_as_the_progress_it_reports() -> None:
    progress = ReplayProgress("stages", 250, 1000, 0, 2, 3, 8, 12.34)
    line = f"2026-11-24 INFO streamapp.replay.progress: {PROGRESS_PREFIX}{progress.to_json()}"
    assert parse_progress(line) == ReplayProgress("stages", 250, 1000, 0, 2, 3, 8, 12.3)
    assert parse_progress(line).fraction == 0.25  # type: ignore[union-attr]
    assert parse_progress("INFO something else") is None
