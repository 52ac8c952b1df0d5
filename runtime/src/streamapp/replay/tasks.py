"""One replay task: the runtime's own ``StreamTask`` over a bounded, already-ordered set of input records.

Parity by construction: the records of task ``<subtopology>_<p>`` go through exactly the code a stream thread
runs (``streamapp.processing.task.StreamTask``: its ``PartitionGroup``, source nodes, processors, changelogging
stores), with the TopologyTestDriver's in-memory Kafka (``streamapp.testing.cluster``) capturing what the task
writes and in-memory stores holding its state. Nothing here imports pyspark; ``streamapp.replay.engine`` calls
``run_task`` inside a Spark grouped function, and tests call it directly.

Processing order (docs/replay.md, "Canonical order"):

- each input partition's records are buffered in offset order (for a repartition topic, fed by several
  upstream tasks: the order ``merge_by_head_timestamp`` gives);
- between the task's input partitions the runtime's ``PartitionGroup`` picks the buffered head with the
  smallest timestamp (ties: the queue added first, i.e. topics in the sub-topology's source order, then
  partition). All input is buffered before the first record is processed and ``max.task.idle.ms`` is off:
  what a streaming task does when it catches up on records already on the broker;
- at the end the task's store writes are sent to the changelog partitions once (one record per key: the
  final store contents, the latest value of each key; a key written and deleted again is a tombstone).

Wall-clock punctuation never runs (the replay has no wall clock); stream-time punctuation runs as in the runtime.
"""

from __future__ import annotations

import heapq
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streamapp.config import StreamsConfig
from streamapp.kafka.types import ConsumerRecord, Headers, TopicPartition
from streamapp.processing.errors import ExceptionHandlers
from streamapp.processing.partition_group import MAX_TASK_IDLE_DISABLED
from streamapp.processing.task import StreamTask, TaskId
from streamapp.state.memory import InMemoryKeyValueStore
from streamapp.testing.cluster import InMemoryCluster, InMemoryProducer
from streamapp.topology import Subtopology, TopologyDescription

__all__ = ["TaskOutput", "merge_by_head_timestamp", "run_task"]


@dataclass(frozen=True, slots=True)
class TaskOutput:
    """What one task wrote, in the order it wrote it per partition: sink and repartition records, then the
    changelog records of its final store contents (``changelog_topics`` names those topics)."""

    records: list[ConsumerRecord]
    changelog_topics: frozenset[str]
    records_processed: int
    dropped_records: int


def merge_by_head_timestamp(sequences: Sequence[Iterable[ConsumerRecord]]) -> list[ConsumerRecord]:
    """Interleave several producers' ordered outputs into one partition's canonical order.

    Repeatedly takes the head with the smallest timestamp; ties go to the producer listed first. Each
    producer's own order is kept (the rule of ``PartitionGroup.next_record`` applied to the writers of one
    partition). A streaming run interleaves them by arrival at the broker instead, which no batch job can
    know; this is the replay's documented choice (docs/replay.md).
    """
    iterators = [iter(sequence) for sequence in sequences]
    heap: list[tuple[int, int, ConsumerRecord]] = []
    for index, iterator in enumerate(iterators):
        first = next(iterator, None)
        if first is not None:
            heap.append((first.timestamp, index, first))
    heapq.heapify(heap)
    merged: list[ConsumerRecord] = []
    while heap:
        _, index, record = heapq.heappop(heap)
        merged.append(record)
        following = next(iterators[index], None)
        if following is not None:
            heapq.heappush(heap, (following.timestamp, index, following))
    return merged


def run_task(
    description: TopologyDescription,
    subtopology: Subtopology,
    partition: int,
    inputs: Mapping[str, Sequence[ConsumerRecord]],
    partitions: Mapping[str, int],
    config: Mapping[str, Any],
    *,
    functions: dict[str, dict[str, Callable[..., Any]]] | None = None,
    wall_clock_ms: int = 0,
) -> TaskOutput:
    """Run task ``<subtopology.id>_<partition>`` over ``inputs`` and return what it wrote.

    ``inputs``: per source topic (real names, repartition topics with the application id), the records of
    partition ``partition`` (raw bytes, timestamp in epoch ms) in processing order (see the module docstring).
    ``partitions``: partition count of every topic the task writes (sinks, repartition and changelog topics);
    a topic missing here is created with one partition. ``config``: the app's Kafka Streams config
    (``application.id`` required; the exception handlers apply as in the runtime). ``functions``: the
    resolved user functions (default: ``TopologyDescription.resolve_functions``). ``wall_clock_ms``: what the
    task's clock reads.

    Raises ProcessingError (streamapp.processing.errors) when a record fails and its handler does not continue.
    """
    streams_config = StreamsConfig.from_mapping({"bootstrap.servers": "replay:9092", **config})
    application_id = streams_config.application_id
    cluster = InMemoryCluster()
    for topic, count in partitions.items():
        cluster.create_topic(topic, count)
    producer = InMemoryProducer(cluster)

    def send_dead_letter(topic: str, key: bytes | None, value: bytes | None, headers: Headers, ts: int) -> None:
        producer.send(topic, key, value, ts if ts >= 0 else wall_clock_ms, headers=headers)

    with tempfile.TemporaryDirectory(prefix="streamapp-replay-task-") as task_dir:
        task = StreamTask(
            TaskId(subtopology.id, partition),
            description,
            subtopology,
            application_id,
            Path(task_dir),
            producer,
            functions if functions is not None else description.resolve_functions(),
            lambda name, path: InMemoryKeyValueStore(name),
            handlers=ExceptionHandlers(streams_config, send_dead_letter),
            clock_ms=lambda: wall_clock_ms,
            max_task_idle_ms=MAX_TASK_IDLE_DISABLED,
        )
        task.initialize()
        task.mark_running()
        try:
            for ref in subtopology.source_topics:
                topic = ref.resolve(application_id)
                tp = TopicPartition(topic, partition)
                queue = task.input_queue(tp)
                for record in inputs.get(topic, ()):
                    queue.add(record)
            task.process_ready(lambda tp: None, wall_clock_ms)
            task.send_changelog()
            producer.flush(0)
            processed, dropped = task.records_processed, task.metrics.dropped_records
        finally:
            task.close(clean=False)
    changelogs = frozenset(description.changelog_topic(application_id, store) for store in subtopology.stores)
    return TaskOutput(_written(cluster), changelogs, processed, dropped)


def _written(cluster: InMemoryCluster) -> list[ConsumerRecord]:
    """Every record in ``cluster``, per topic and partition in offset order (the offset is the position in what
    this task wrote to that partition)."""
    return [record for topic in cluster.topics() for record in cluster.records(topic)]
