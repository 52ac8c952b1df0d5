"""Running one topology through the replay twice, natively and through the runtime's task, over the same records
on the broker: what the native-path tests compare."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from conformance.harness import _retrying, wait_stable
from streamapp.replay import ReplayPlan, run_replay
from streamapp.replay.progress import ReplayProgress
from streamapp.topology import TopologyDescription

from replay.reading import Record, read_committed

INPUT_PARTITIONS = 3
SINK_PARTITIONS = 2


def replay_both_paths(
    bootstrap: str,
    spark: Any,
    records: list[Record],
    config: dict[str, Any],
    topology: Callable[[str, str], TopologyDescription],
    store: str,
    *,
    emit: str = "every_update",
    paths: tuple[str, ...] = ("native", "task"),
    input_partitions: int = INPUT_PARTITIONS,
    parallelism: int | None = None,
    expire_windows: bool = False,
) -> dict[str, Any]:
    """Produce ``records`` (``(partition, key, value, timestamp)``) to a fresh topic of ``INPUT_PARTITIONS``
    partitions, replay ``topology(source, sink)`` natively and through the task path (each into its own sink of
    ``SINK_PARTITIONS`` partitions and its own changelog of ``store``), and return per path (``native``, ``task``)
    the run's result, its progress reports and what it wrote (``sink``, ``changelog``, read committed).
    ``emit``: the plan's; ``paths``: which of the two runs to make; ``input_partitions``: the topic's (instead of
    ``INPUT_PARTITIONS``); ``parallelism``, ``expire_windows``: ``run_replay``'s."""
    prefix = f"native-{uuid.uuid4().hex[:8]}"
    source = f"{prefix}-events"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    sinks = {path: f"{prefix}-{path}-out" for path in paths}
    # the records may be old (time retention would delete them between the write and Spark's read: a "data loss")
    forever = {"retention.ms": "-1"}
    topics = [
        NewTopic(source, input_partitions, 1, config=forever),
        *(NewTopic(t, SINK_PARTITIONS, 1, config=forever) for t in sinks.values()),
    ]
    for future in admin.create_topics(topics).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition, key, value, timestamp in records:
        producer.produce(source, value, key, partition, timestamp=timestamp)
    assert producer.flush(30) == 0
    ends = {p: sum(1 for r in records if r[0] == p) for p in range(input_partitions)}
    # a fresh topic's leaders may still move: the replay reads only once every partition answers
    _retrying(lambda: wait_stable(admin, [TopicPartition(source, p) for p in range(input_partitions)]))
    out: dict[str, Any] = {}
    for path, sink in sinks.items():
        application_id = f"{prefix}-{path}"
        plan = ReplayPlan(
            topology(source, sink),
            {"application.id": application_id, **config},
            bootstrap,
            start_offsets={source: dict.fromkeys(ends, 0)},
            end_offsets={source: ends},
            partitions={sink: SINK_PARTITIONS},
            replay_id=application_id,
            emit=emit,
        )
        reports: list[ReplayProgress] = []
        result = run_replay(
            spark,
            plan,
            native=path == "native",
            on_progress=reports.append,
            progress_interval_s=0.2,
            parallelism=parallelism,
            expire_windows=expire_windows,
        )
        wait_stable(admin, [TopicPartition(w.topic, w.partition) for w in result.writes])
        changelog = f"{application_id}-{store}-changelog"
        out[path] = {
            "result": result,
            "progress": reports,
            "sink": read_committed(bootstrap, sink, SINK_PARTITIONS),
            "changelog": read_committed(bootstrap, changelog, input_partitions),
        }
    return out
