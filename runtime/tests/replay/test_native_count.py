"""The replay's Spark-native keyed count (``streamapp.replay.spark.native``) writes exactly what the runtime's task
writes: the same sink records (key, value, timestamp, partition, order) and the same changelog, with null keys, JSON
``null`` values, out-of-order timestamps and a sink with another partition count than the input; a record the
serdes refuse sends the sub-topology to the task path, whose handlers decide."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from streamapp import StreamsBuilder
from streamapp.replay.progress import ReplayProgress
from streamapp.replay.shapes import PATH_NATIVE_COUNT, PATH_TASK
from streamapp.topology import TopologyDescription

from replay import native_paths
from replay.native_paths import INPUT_PARTITIONS

pytestmark = pytest.mark.integration


def keyed_count(source: str, sink: str) -> TopologyDescription:
    builder = StreamsBuilder()
    (
        builder.stream(source, key_serde="string", value_serde="json", name="events")
        .group_by_key()
        .count(store="event-counts", name="count")
        .to_stream(name="changes")
        .to(sink, value_serde="json", name="out")
    )
    return builder.build()


def inputs() -> Iterator[tuple[int, bytes | None, bytes | None, int]]:
    """``(partition, key, value, timestamp)``: 20 keys, out-of-order timestamps, null keys and JSON nulls."""
    for i in range(600):
        key = None if i % 97 == 0 else f"k{(i * 7) % 20}".encode()
        value = b"null" if i % 53 == 0 else None if i % 89 == 0 else json.dumps({"i": i}).encode()
        yield i % INPUT_PARTITIONS, key, value, 1_000_000 + i * 10 - (i % 7) * 1_000


def replay_both_paths(
    bootstrap: str,
    spark: Any,
    records: list[tuple[int, bytes | None, bytes | None, int]],
    config: dict[str, Any],
    **options: Any,
) -> dict[str, Any]:
    """The keyed count replayed natively and through the task path (``native_paths.replay_both_paths``)."""
    return native_paths.replay_both_paths(bootstrap, spark, records, config, keyed_count, "event-counts", **options)


def test_the_native_keyed_count_writes_the_task_paths_sink_records_and_changelog(
    spark_session: Any, conformance_bootstrap: str
) -> None:
    records = list(inputs())
    out = replay_both_paths(conformance_bootstrap, spark_session, records, {})
    native, task = out["native"], out["task"]
    assert set(native["result"].paths.values()) == {PATH_NATIVE_COUNT}
    assert set(task["result"].paths.values()) == {PATH_TASK}
    assert native["sink"] == task["sink"]
    assert native["changelog"] == task["changelog"]
    counted = [r for r in records if r[1] is not None and r[2] not in (None, b"null")]
    assert len(native["sink"]) == len(counted)
    assert len(native["changelog"]) == len({(r[0], r[1]) for r in counted})
    # the records the count drops are counted by reason on both paths, as the streaming run counts them
    assert native["result"].dropped_records == task["result"].dropped_records
    assert native["result"].dropped_records == {"null_key_or_value": len(records) - len(counted)}


def test_a_replay_reports_its_progress_while_it_runs_and_all_records_at_the_end(
    spark_session: Any, conformance_bootstrap: str
) -> None:
    records = list(inputs())
    out = replay_both_paths(conformance_bootstrap, spark_session, records, {})
    for path in ("native", "task"):
        reports: list[ReplayProgress] = out[path]["progress"]
        assert len(reports) >= 2, f"{path}: a report while running and one at the end"
        processed = [r.records_processed for r in reports]
        assert processed == sorted(processed)
        assert reports[-1].phase == "done"
        assert (reports[-1].records_processed, reports[-1].records_total) == (len(records), len(records))
        assert (reports[-1].stages_done, reports[-1].stages_total) == (1, 1)


def test_a_record_the_serde_refuses_sends_the_count_to_the_task_path_and_its_handler(
    spark_session: Any, conformance_bootstrap: str
) -> None:
    records = [*inputs(), (1, b"k3", b"{not json", 2_000_000)]
    config = {"default.deserialization.exception.handler": "log_and_continue"}
    out = replay_both_paths(conformance_bootstrap, spark_session, records, config)
    assert set(out["native"]["result"].paths.values()) == {PATH_TASK}
    assert out["native"]["sink"] == out["task"]["sink"]
    counted = [r for r in records if r[1] is not None and r[2] not in (None, b"null", b"{not json")]
    assert len(out["native"]["sink"]) == len(counted)
    # the native attempt's counts are dropped with it: the task path's count each record once
    assert out["native"]["result"].dropped_records == {
        "null_key_or_value": len(records) - len(counted) - 1,
        "deserialization_error": 1,
    }


def test_emit_final_writes_each_tasks_last_count_per_key_natively_and_after_a_fallback_to_the_task_or_split_reads(
    spark_session: Any, conformance_bootstrap: str
) -> None:
    records = list(inputs())
    every = replay_both_paths(conformance_bootstrap, spark_session, records, {}, paths=("native",))["native"]
    final = replay_both_paths(conformance_bootstrap, spark_session, records, {}, emit="final", paths=("native",))
    refused = [*records, (1, b"k3", b"{not json", 2_000_000)]
    config = {"default.deserialization.exception.handler": "log_and_continue"}
    fallback = replay_both_paths(conformance_bootstrap, spark_session, refused, config, emit="final", paths=("native",))
    assert set(final["native"]["result"].paths.values()) == {PATH_NATIVE_COUNT}
    assert set(fallback["native"]["result"].paths.values()) == {PATH_TASK}
    assert fallback["native"]["sink"] == final["native"]["sink"]
    assert final["native"]["changelog"] == every["changelog"]
    # more read tasks than partitions: Spark folds (spark_fold.fold) what the reading workers fold otherwise (folds.py)
    for emit, whole in (("every_update", every), ("final", final["native"])):
        split = replay_both_paths(
            conformance_bootstrap, spark_session, records, {}, emit=emit, paths=("native",), parallelism=6
        )["native"]
        assert (split["sink"], split["changelog"]) == (whole["sink"], whole["changelog"]), emit
    final_sink = final["native"]["sink"]
    assert set(final_sink) <= set(every["sink"])
    tasks_of_key = {(r[1], r[0]) for r in records if r[1] is not None and r[2] not in (None, b"null")}
    assert len(final_sink) == len(tasks_of_key), "one record per key and task: the task's final count"
    for key in {k for k, _ in tasks_of_key}:
        finals = sorted(int(r[2]) for r in final_sink if r[1] == key)
        updates = [int(r[2]) for r in every["sink"] if r[1] == key]
        assert finals[-1] == max(updates)


def regrouped_table_count(source: str, sink: str) -> TopologyDescription:
    """Two sub-topologies through the runtime's task: a table re-keyed (``KTable.group_by``: a repartition) and
    counted per new key."""
    builder = StreamsBuilder()
    (
        builder.table(source, key_serde="string", value_serde="json", store="latest", name="rows")
        .group_by("replay.functions:by_size", name="regroup")
        .count(store="per-size", name="count")
        .to_stream(name="changes")
        .to(sink, value_serde="json", name="out")
    )
    return builder.build()


def _last_per_key(sink: list[Any]) -> dict[tuple[int, bytes], bytes]:
    """(sink partition, key) -> the last value written there."""
    return {(record[0], record[1]): record[2] for record in sink}


def test_emit_final_through_the_runtimes_task_writes_what_the_native_fold_writes(
    spark_session: Any, conformance_bootstrap: str
) -> None:
    """The record cache's contract (Kafka's ``statestore.cache.max.bytes``, ``CachingKeyValueStore``): a cache
    flushed once, at the end, forwards each key's latest value once per task: what the native stage's ``final``
    writes, and the store a new version restores is the same (a ``default.key.serde`` keeps the same topology off
    the native shape)."""
    records = list(inputs())
    task = replay_both_paths(
        conformance_bootstrap, spark_session, records, {"default.key.serde": "string"}, emit="final", paths=("native",)
    )["native"]
    native = replay_both_paths(conformance_bootstrap, spark_session, records, {}, emit="final", paths=("native",))
    assert set(task["result"].paths.values()) == {PATH_TASK}
    assert set(native["native"]["result"].paths.values()) == {PATH_NATIVE_COUNT}
    # the same records; the order between keys may differ (the cache flushes least recently used first)
    assert sorted(task["sink"]) == sorted(native["native"]["sink"])
    # the same store after a restore (the flush logs keys in the cache's order, the native fold in first-seen order)
    assert _last_per_key(task["changelog"]) == _last_per_key(native["native"]["changelog"])


def test_emit_final_through_two_sub_topologies_forwards_only_the_latest_rows_downstream(
    spark_session: Any, conformance_bootstrap: str
) -> None:
    """A cached table flushed once forwards each row's latest value once (Kafka's ``CachingKeyValueStore``), so the
    re-keyed count downstream sees only the final rows: every group it writes ends at the count the every-update
    run ends at, and a group only earlier rows fell into (its every-update count back at 0) is never written."""
    records = list(inputs())

    def replay(emit: str) -> dict[str, Any]:
        return native_paths.replay_both_paths(
            conformance_bootstrap,
            spark_session,
            records,
            {},
            regrouped_table_count,
            "per-size",
            emit=emit,
            paths=("native",),
        )["native"]

    every, final = replay("every_update"), replay("final")

    last_every, last_final = _last_per_key(every["sink"]), _last_per_key(final["sink"])
    assert set(final["result"].paths.values()) == {PATH_TASK}
    assert len(final["sink"]) == len(last_final) < len(every["sink"])
    assert last_final == {k: v for k, v in last_every.items() if k in last_final}
    assert [int(v) for k, v in last_every.items() if k not in last_final] == [0]
