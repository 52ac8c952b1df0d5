"""The replay's Spark-native windowed count (``streamapp.replay.spark.native``) writes exactly what the runtime's task
writes: the same sink records (windowed key, count, timestamp, partition, order) and the same window-store
changelog, for tumbling and hopping windows, with records delayed past the grace (dropped per the task's stream
time, window by window), null keys (dropped without moving stream time), JSON ``null`` and null values (counted),
and a sink with another partition count than the input; a record the serdes refuse sends the sub-topology to the
task path."""

from __future__ import annotations

import json
import struct
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from streamapp import StreamsBuilder
from streamapp.dsl.windows import TimeWindows
from streamapp.replay.shapes import PATH_NATIVE_WINDOWED_COUNT, PATH_TASK
from streamapp.topology import TopologyDescription

from replay.native_paths import INPUT_PARTITIONS, replay_both_paths
from replay.reading import Record

pytestmark = pytest.mark.integration

SIZE_MS = 10_000
GRACE_MS = 3_000
STORE = "window-counts"


def windowed_count(windows: TimeWindows, retention_ms: int | None = None) -> Callable[[str, str], TopologyDescription]:
    def build(source: str, sink: str) -> TopologyDescription:
        builder = StreamsBuilder()
        (
            builder.stream(source, key_serde="string", value_serde="json", name="events")
            .group_by_key()
            .windowed_by(windows)
            .count(store=STORE, name="count", retention_ms=retention_ms)
            .to_stream(name="changes")
            .to(sink, value_serde="json", name="out")
        )
        return builder.build()

    return build


#: An hour ago, on a window boundary: the window store's changelog keeps a window for its retention plus one day
#: (Kafka's windowed changelog, ``compact,delete``), so records from 1970 would be deleted by the broker's time
#: retention between the replay's write and the test's read.
BASE_MS = (int(time.time() * 1000) - 3_600_000) // 60_000 * 60_000


def inputs() -> Iterator[Record]:
    """``(partition, key, value, timestamp)``: 12 keys over ~60 windows; every 11th record delayed by 2-20 s (some
    within the grace, some past it), null keys, JSON nulls and null values."""
    for i in range(600):
        key = None if i % 97 == 0 else f"k{(i * 7) % 12}".encode()
        value = b"null" if i % 53 == 0 else None if i % 89 == 0 else json.dumps({"i": i}).encode()
        delay = 2_000 * (1 + i % 10) if i % 11 == 0 else 0
        yield i % INPUT_PARTITIONS, key, value, BASE_MS + i * 1_000 - delay


def assert_same_output(out: dict[str, Any]) -> None:
    native, task = out["native"], out["task"]
    assert set(native["result"].paths.values()) == {PATH_NATIVE_WINDOWED_COUNT}
    assert set(task["result"].paths.values()) == {PATH_TASK}
    assert native["sink"] == task["sink"]
    assert native["changelog"] == task["changelog"]
    assert native["sink"] and native["changelog"]
    # every drop of the task path (the streaming run's processors) is counted natively too, reason by reason
    assert native["result"].dropped_records == task["result"].dropped_records
    assert native["result"].records_written_by_stage == task["result"].records_written_by_stage


@pytest.mark.parametrize(
    "windows",
    [
        TimeWindows.of_size_and_grace(SIZE_MS, GRACE_MS),
        TimeWindows.of_size_and_grace(SIZE_MS, GRACE_MS).advance_by(4_000),
    ],
    ids=["tumbling", "hopping"],
)
def test_the_native_windowed_count_writes_the_task_paths_sink_records_and_changelog(
    spark_session: Any, conformance_bootstrap: str, windows: TimeWindows
) -> None:
    records = list(inputs())
    out = replay_both_paths(conformance_bootstrap, spark_session, records, {}, windowed_count(windows), STORE)
    assert_same_output(out)
    windows_of_keyed = sum(len(windows.spec().windows_for(r[3])) for r in records if r[1] is not None)
    assert windows_of_keyed - len(out["native"]["sink"]) > 0, "some delayed records are dropped as late"
    late = windows_of_keyed - len(out["native"]["sink"])  # one per (record, closed window), as Kafka counts
    null_keys = sum(1 for r in records if r[1] is None)
    assert out["native"]["result"].dropped_records == {"late": late, "null_key_or_value": null_keys}


def test_a_record_the_serde_refuses_sends_the_windowed_count_to_the_task_path_and_its_handler(
    spark_session: Any, conformance_bootstrap: str
) -> None:
    records = [*inputs(), (1, b"k3", b"{not json", 1_500_000)]
    config = {"default.deserialization.exception.handler": "log_and_continue"}
    windows = TimeWindows.of_size_and_grace(SIZE_MS, GRACE_MS)
    out = replay_both_paths(conformance_bootstrap, spark_session, records, config, windowed_count(windows), STORE)
    assert set(out["native"]["result"].paths.values()) == {PATH_TASK}
    assert out["native"]["sink"] == out["task"]["sink"]


def test_emit_final_writes_each_tasks_last_count_per_window_natively_and_after_a_fallback_to_the_task_or_split_reads(
    spark_session: Any, conformance_bootstrap: str
) -> None:
    records = list(inputs())
    build = windowed_count(TimeWindows.of_size_and_grace(SIZE_MS, GRACE_MS).advance_by(4_000))

    def replay(
        records: list[Record], config: dict[str, Any], emit: str, parallelism: int | None = None
    ) -> dict[str, Any]:
        return replay_both_paths(
            conformance_bootstrap,
            spark_session,
            records,
            config,
            build,
            STORE,
            emit=emit,
            paths=("native",),
            parallelism=parallelism,
        )["native"]

    every = replay(records, {}, "every_update")
    final = replay(records, {}, "final")
    config = {"default.deserialization.exception.handler": "log_and_continue"}
    fallback = replay([*records, (1, b"k3", b"{not json", 1_500_000)], config, "final")
    assert set(final["result"].paths.values()) == {PATH_NATIVE_WINDOWED_COUNT}
    assert set(fallback["result"].paths.values()) == {PATH_TASK}
    assert fallback["sink"] == final["sink"]
    assert final["changelog"] == every["changelog"]
    # more read tasks than partitions: Spark folds (spark_fold.fold) what the reading workers fold otherwise (folds.py)
    split = replay(records, {}, "final", parallelism=6)
    assert (split["sink"], split["changelog"]) == (final["sink"], final["changelog"])
    assert set(final["sink"]) <= set(every["sink"])
    windows_of_tasks = {(r[0], r[1]) for r in every["sink"]}  # (sink partition, windowed key): one task's window
    assert len(final["sink"]) == len(windows_of_tasks) < len(every["sink"]), "one record per window and task"


WINDOW_KEY_SUFFIX = struct.Struct(">qi")
"""The end of a window store's changelog key: window start (ms) and seqnum."""


def test_the_changelog_keeps_the_windows_the_store_keeps_after_a_restore(
    spark_session: Any, conformance_bootstrap: str
) -> None:
    """A window store hides a window once ``start < (the largest start put) - retention``: with
    ``expire_windows`` the changelog leaves those out, and keeps every other window record exactly as with a
    retention long enough to keep them all."""
    records = list(inputs())
    windows = TimeWindows.of_size_and_grace(SIZE_MS, GRACE_MS).advance_by(4_000)
    retention = SIZE_MS + GRACE_MS
    kept = replay_both_paths(
        conformance_bootstrap,
        spark_session,
        records,
        {},
        windowed_count(windows, retention),
        STORE,
        expire_windows=True,
    )
    assert_same_output(kept)
    everything = replay_both_paths(
        conformance_bootstrap,
        spark_session,
        records,
        {},
        windowed_count(windows, 24 * 3_600_000),
        STORE,
        expire_windows=True,
    )
    assert_same_output(everything)
    assert kept["native"]["sink"] == everything["native"]["sink"]

    def start(record: Record) -> int:
        assert record[1] is not None
        return int(WINDOW_KEY_SUFFIX.unpack(record[1][-WINDOW_KEY_SUFFIX.size :])[0])

    full = everything["native"]["changelog"]
    last_start = {p: max(start(r) for r in full if r[0] == p) for p in {r[0] for r in full}}
    unexpired = [r for r in full if start(r) >= last_start[r[0]] - retention]
    assert kept["native"]["changelog"] == unexpired
    assert 0 < len(unexpired) < len(full), "windows older than the retention are left out, the latest kept"
    assert kept["native"]["result"].dropped_records == everything["native"]["result"].dropped_records
