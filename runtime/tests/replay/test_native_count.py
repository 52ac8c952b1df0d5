"""The replay's Spark-native keyed count (``streamapp.replay.native``) writes exactly what the runtime's task writes:
the same sink records (key, value, timestamp, partition, order) and the same changelog, with null keys, JSON
``null`` values, out-of-order timestamps and a sink with another partition count than the input; a record the
serdes refuse sends the sub-topology to the task path, whose handlers decide."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from conformance.harness import _retrying, wait_stable
from streamapp import StreamsBuilder
from streamapp.replay import ReplayPlan, run_replay
from streamapp.replay.native import PATH_NATIVE_COUNT, PATH_TASK
from streamapp.replay.progress import ReplayProgress
from streamapp.topology import TopologyDescription

from replay.reading import read_committed

pytestmark = pytest.mark.integration

INPUT_PARTITIONS = 3
SINK_PARTITIONS = 2


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
    bootstrap: str, spark: Any, records: list[tuple[int, bytes | None, bytes | None, int]], config: dict[str, Any]
) -> dict[str, Any]:
    """Produce ``records``, replay the keyed count natively and through the task path (each into its own sink
    and changelog), and return each run's result and what it wrote."""
    prefix = f"native-{uuid.uuid4().hex[:8]}"
    source = f"{prefix}-events"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    sinks = {path: f"{prefix}-{path}-counts" for path in ("native", "task")}
    topics = [NewTopic(source, INPUT_PARTITIONS, 1), *(NewTopic(t, SINK_PARTITIONS, 1) for t in sinks.values())]
    for future in admin.create_topics(topics).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition, key, value, timestamp in records:
        producer.produce(source, value, key, partition, timestamp=timestamp)
    assert producer.flush(30) == 0
    ends = {p: sum(1 for r in records if r[0] == p) for p in range(INPUT_PARTITIONS)}
    # a fresh topic's leaders may still move: Spark's Kafka source reads only once every partition answers
    _retrying(lambda: wait_stable(admin, [TopicPartition(source, p) for p in range(INPUT_PARTITIONS)]))
    out: dict[str, Any] = {}
    for path, sink in sinks.items():
        application_id = f"{prefix}-{path}"
        plan = ReplayPlan(
            keyed_count(source, sink),
            {"application.id": application_id, **config},
            bootstrap,
            start_offsets={source: dict.fromkeys(ends, 0)},
            end_offsets={source: ends},
            partitions={sink: SINK_PARTITIONS},
            replay_id=application_id,
        )
        reports: list[ReplayProgress] = []
        result = run_replay(spark, plan, native=path == "native", on_progress=reports.append, progress_interval_s=0.2)
        wait_stable(admin, [TopicPartition(w.topic, w.partition) for w in result.writes])
        changelog = f"{application_id}-event-counts-changelog"
        out[path] = {
            "result": result,
            "progress": reports,
            "sink": read_committed(bootstrap, sink, SINK_PARTITIONS),
            "changelog": read_committed(bootstrap, changelog, INPUT_PARTITIONS),
        }
    return out


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
