"""One replay task: the runtime's own ``StreamTask`` over a bounded, already-ordered set of input records.

Parity by construction: the records of task ``<subtopology>_<p>`` go through exactly the code a stream thread
runs (``streamapp.processing.task.StreamTask``: its ``PartitionGroup``, source nodes, processors, changelogging
stores), with in-memory stores holding its state (the TopologyTestDriver's) and a producer that collects what the
task writes, partitioned as the runtime's producer partitions it. Nothing here imports pyspark:
``streamapp.replay.spark.engine`` drives ``ReplayTask`` inside a Spark ``mapInArrow`` function; tests call ``run_task``.

Processing order (docs/replay.md, "Canonical order"):

- each input partition's records are buffered in offset order (for a repartition topic, fed by several
  upstream tasks: the order ``merge_by_head_timestamp`` gives);
- between the task's input partitions the runtime's ``PartitionGroup`` picks the buffered head with the
  smallest timestamp (ties: the queue added first, i.e. topics in the sub-topology's source order, then
  partition). All input is buffered before the first record is processed and ``max.task.idle.ms`` is off:
  what a streaming task does when it catches up on records already on the broker (a task reading a single
  partition may be fed batch by batch instead: its order is the offset order either way);
- at the end the task's store writes are sent to the changelog partitions once (one record per key: the
  final store contents, the latest value of each key; a key written and deleted again is a tombstone).

Wall-clock punctuation never runs (the replay has no wall clock); stream-time punctuation runs as in the runtime.
"""

from __future__ import annotations

import heapq
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamapp.config import StreamsConfig
from streamapp.kafka.types import ConsumerRecord, Headers, TopicPartition
from streamapp.partitioner import partition_for_key
from streamapp.processing.errors import ExceptionHandlers
from streamapp.processing.global_thread import global_store_specs
from streamapp.processing.partition_group import MAX_TASK_IDLE_DISABLED
from streamapp.processing.task import StreamTask, TaskId
from streamapp.state.changelogging import ChangeLoggingKeyValueStore
from streamapp.state.global_store import GlobalStateManager
from streamapp.state.memory import InMemoryKeyValueStore
from streamapp.state.record_cache import ThreadCache
from streamapp.state.versioned import VersionedChangeLoggingStore
from streamapp.topology import Subtopology, TopologyDescription

__all__ = ["ReplayTask", "TaskOutput", "iter_merged", "merge_by_head_timestamp", "restore_changelog", "run_task"]


@dataclass(frozen=True, slots=True)
class TaskOutput:
    """What one task wrote, in the order it wrote it per partition: sink and repartition records, then the
    changelog records of its final store contents (``changelog_topics`` names those topics)."""

    records: list[ConsumerRecord]
    changelog_topics: frozenset[str]
    records_processed: int
    dropped_records: int
    dropped_by_reason: dict[str, int] = field(default_factory=dict)
    """``dropped_records`` by reason (``streamapp.drop_reasons``)."""


def merge_by_head_timestamp(sequences: Sequence[Iterable[ConsumerRecord]]) -> list[ConsumerRecord]:
    """Interleave several producers' ordered outputs into one partition's canonical order (``iter_merged``)."""
    return list(iter_merged(sequences))


def iter_merged(sequences: Sequence[Iterable[ConsumerRecord]]) -> Iterator[ConsumerRecord]:
    """Interleave several producers' ordered outputs into one partition's canonical order, lazily.

    Repeatedly takes the head with the smallest timestamp; ties go to the producer listed first. Each
    producer's own order is kept (the rule of ``PartitionGroup.next_record`` applied to the writers of one
    partition). A streaming run interleaves them by arrival at the broker instead, which no batch job can
    know; this is the replay's documented choice (docs/replay.md).
    """
    if len(sequences) == 1:  # one producer: its own order
        yield from sequences[0]
        return
    iterators = [iter(sequence) for sequence in sequences]
    heap: list[tuple[int, int, ConsumerRecord]] = []
    for index, iterator in enumerate(iterators):
        first = next(iterator, None)
        if first is not None:
            heap.append((first.timestamp, index, first))
    heapq.heapify(heap)
    while heap:
        _, index, record = heapq.heappop(heap)
        yield record
        following = next(iterators[index], None)
        if following is not None:
            heapq.heappush(heap, (following.timestamp, index, following))


FINAL_CACHE_BYTES = 1 << 62
"""The record cache of a ``final`` replay task: larger than any task's state, so nothing is evicted before the
end (the cache holds one entry per dirty key, as the task's in-memory stores hold one per key anyway)."""


class ReplayTask:
    """Task ``<subtopology.id>_<partition>`` of a replay, fed incrementally (see the module docstring).

    ``add`` buffers records of one input partition; ``process`` processes everything buffered and returns what
    the task wrote since the last call; ``finish`` sends the final store contents and returns those changelog
    records. A task with one input partition may be fed and processed batch by batch (its order is the offset
    order); a task with several must get all its input before the first ``process`` (the ``PartitionGroup``
    merge needs every queue's head). Use as a context manager (``close`` drops the stores).

    ``partitions``: partition count of every topic the task writes (sinks, repartition and changelog topics);
    a topic missing here gets one partition. ``config``: the app's Kafka Streams config (``application.id``
    required; the exception handlers apply as in the runtime). ``functions``: the resolved user functions
    (default: ``TopologyDescription.resolve_functions``). ``wall_clock_ms``: what the task's clock reads.
    ``global_records``: the records of the global tables' topics (offset order per partition), applied to the
    global stores before the task's first record. ``restored``: changelog records of the task's stores (offset
    order per changelog partition) that the stores restore from before the first record, through the runtime's
    restore (``restore_changelog``): a foreign-key join's left sub-topology resumes so (``streamapp.replay.stages``).
    """

    def __init__(
        self,
        description: TopologyDescription,
        subtopology: Subtopology,
        partition: int,
        partitions: Mapping[str, int],
        config: Mapping[str, Any],
        *,
        functions: dict[str, dict[str, Callable[..., Any]]] | None = None,
        wall_clock_ms: int = 0,
        global_records: Iterable[ConsumerRecord] = (),
        final: bool = False,
        restored: Iterable[ConsumerRecord] = (),
    ) -> None:
        # the record cache off (one update per record, the output the parity tests define), or with ``final`` a
        # cache no record evicts, flushed once by ``finish``: what a streaming run whose cache flushes at the end
        # writes (``EMIT_FINAL``), by the runtime's own caching stores
        self._final = final
        streams_config = StreamsConfig.from_mapping(
            {"bootstrap.servers": "replay:9092", **config, "statestore.cache.max.bytes": 0}
        )
        self.application_id = streams_config.application_id
        self.partition = partition
        self.changelog_topics = frozenset(
            description.changelog_topic(self.application_id, store) for store in subtopology.stores
        )
        self._producer = _CollectingProducer(partitions)
        producer = self._producer

        def send_dead_letter(topic: str, key: bytes | None, value: bytes | None, headers: Headers, ts: int) -> None:
            producer.send(topic, key, value, ts if ts >= 0 else wall_clock_ms, headers=headers)

        self._wall_clock_ms = wall_clock_ms
        self._task_dir = tempfile.TemporaryDirectory(prefix="streamapp-replay-task-")
        self._globals = _bootstrap_global_stores(description, Path(self._task_dir.name) / "global", global_records)
        self._task = StreamTask(
            TaskId(subtopology.id, partition),
            description,
            subtopology,
            self.application_id,
            Path(self._task_dir.name),
            producer,
            functions if functions is not None else description.resolve_functions(),
            lambda name, path: InMemoryKeyValueStore(name),
            handlers=ExceptionHandlers(streams_config, send_dead_letter),
            clock_ms=lambda: wall_clock_ms,
            max_task_idle_ms=MAX_TASK_IDLE_DISABLED,
            global_tables=None if self._globals is None else self._globals.table,
            record_cache=ThreadCache(FINAL_CACHE_BYTES) if final else None,
        )
        self._task.initialize()
        restore_changelog(self._task.stores.values(), restored)  # the runtime's order: initialize, restore, run
        self._task.mark_running()
        for ref in subtopology.source_topics:  # queues in source order: PartitionGroup's tie-break
            self._task.input_queue(TopicPartition(ref.resolve(self.application_id), partition))

    def __enter__(self) -> ReplayTask:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add(self, topic: str, records: Iterable[ConsumerRecord]) -> None:
        """Buffer ``records`` (in processing order) of input partition ``topic``-``self.partition``."""
        queue = self._task.input_queue(TopicPartition(topic, self.partition))
        for record in records:
            queue.add(record)

    def process(self) -> list[ConsumerRecord]:
        """Process every buffered record; return the records written since the last call, per partition in
        the order written (``offset`` = position in what this task wrote to that partition).

        Raises ProcessingError when a record fails and its handler does not continue.
        """
        self._task.process_ready(lambda tp: None, self._wall_clock_ms)
        return self._producer.take()

    def finish(self) -> list[ConsumerRecord]:
        """Flush the record cache (``final``: each cached key's or window's last value goes downstream, in the cache's
        order), send the final store contents to the changelog partitions (one record per key, the latest value)
        and return everything written since the last ``process``."""
        if self._final:
            self._task.flush_cache()
        self._task.send_changelog()
        self._producer.flush(0)
        return self._producer.take()

    @property
    def records_processed(self) -> int:
        return self._task.records_processed

    @property
    def dropped_records(self) -> int:
        return self._task.metrics.dropped_records

    @property
    def dropped_by_reason(self) -> dict[str, int]:
        """Records the task dropped, by reason (``streamapp.drop_reasons``), as the streaming run counts them."""
        return dict(self._task.metrics.dropped)

    def close(self) -> None:
        try:
            self._task.close(clean=False)
            if self._globals is not None:
                self._globals.close()
        finally:
            self._task_dir.cleanup()


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
    global_records: Iterable[ConsumerRecord] = (),
) -> TaskOutput:
    """Run task ``<subtopology.id>_<partition>`` over all of ``inputs`` (per source topic, the records of partition
    ``partition`` in processing order) and return what it wrote; the arguments are ``ReplayTask``'s."""
    with ReplayTask(
        description,
        subtopology,
        partition,
        partitions,
        config,
        functions=functions,
        wall_clock_ms=wall_clock_ms,
        global_records=global_records,
    ) as task:
        for topic, records in inputs.items():
            task.add(topic, records)
        written = task.process() + task.finish()
        return TaskOutput(
            written, task.changelog_topics, task.records_processed, task.dropped_records, task.dropped_by_reason
        )


def restore_changelog(stores: Iterable[ChangeLoggingKeyValueStore], records: Iterable[ConsumerRecord]) -> None:
    """Apply changelog ``records`` (offset order per partition) to the ``stores`` they log, as the runtime's
    changelog reader does (``streamapp.state.restore.ChangelogReader.restore``: the latest record per key, every
    record for a versioned store); the restored data is applied, not pending, so the stores log only later writes.
    Raises ValueError for a record of a changelog partition none of ``stores`` logs."""
    by_changelog = {store.changelog: store for store in stores}
    batches: dict[TopicPartition, list[ConsumerRecord]] = {}
    for record in records:
        if record.key is not None:
            batches.setdefault(TopicPartition(record.topic, record.partition), []).append(record)
    for tp, batch in batches.items():
        store = by_changelog.get(tp)
        if store is None:
            raise ValueError(f"no store of the task logs to {tp.topic}[{tp.partition}]")
        last = batch[-1].offset
        if isinstance(store, VersionedChangeLoggingStore):
            store.restore_records([(r.key, r.value, r.timestamp) for r in batch if r.key is not None], last)
        else:
            store.restore({r.key: (r.value, r.timestamp) for r in batch if r.key is not None}, last)


def _bootstrap_global_stores(
    description: TopologyDescription, directory: Path, records: Iterable[ConsumerRecord]
) -> GlobalStateManager | None:
    """The topology's global stores (in memory) filled with ``records`` of their topics, as the runtime's global
    consumer bootstraps them before any task processes a record (``GlobalStreamThread.bootstrap``): the replay
    reads each global topic whole, up to the plan's end offsets. ``None`` when the topology has no global table."""
    specs = global_store_specs(description)
    if not specs:
        return None
    manager = GlobalStateManager(specs, directory, lambda name, path: InMemoryKeyValueStore(name))
    manager.open()
    manager.apply(records)
    return manager


class _CollectingProducer:
    """The task's producer: collects what it sends, partitioned by the runtime's rule (``partition_for_key``:
    murmur2 of the serialized key; null keys round-robin per topic), acknowledged at the next ``poll``/``flush``."""

    def __init__(self, partitions: Mapping[str, int]) -> None:
        self._partitions = dict(partitions)
        self._written: list[ConsumerRecord] = []
        self._next_offset: dict[TopicPartition, int] = {}
        self._round_robin: dict[str, int] = {}
        self._unacknowledged: list[tuple[Callable[[TopicPartition, int], None], TopicPartition, int]] = []

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        partition: int | None = None,
        on_delivery: Callable[[TopicPartition, int], None] | None = None,
        headers: Headers | None = None,
    ) -> None:
        count = self._partitions.setdefault(topic, 1)
        if partition is None:
            if key is not None:
                partition = partition_for_key(key, count)
            else:
                partition = self._round_robin.get(topic, 0) % count
                self._round_robin[topic] = partition + 1
        elif not 0 <= partition < count:
            raise ValueError(f"topic '{topic}' has no partition {partition} (it has {count})")
        tp = TopicPartition(topic, partition)
        offset = self._next_offset.get(tp, 0)
        self._next_offset[tp] = offset + 1
        self._written.append(ConsumerRecord(topic, partition, offset, key, value, timestamp, headers or None))
        if on_delivery is not None:
            self._unacknowledged.append((on_delivery, tp, offset))

    def take(self) -> list[ConsumerRecord]:
        self._acknowledge()
        written, self._written = self._written, []
        return written

    def poll(self) -> None:
        self._acknowledge()

    def flush(self, timeout_s: float) -> None:
        self._acknowledge()

    def close(self, timeout_s: float) -> None:
        self._acknowledge()

    def _acknowledge(self) -> None:
        pending, self._unacknowledged = self._unacknowledged, []
        for on_delivery, tp, offset in pending:
            on_delivery(tp, offset)
