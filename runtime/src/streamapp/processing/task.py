"""StreamTask: one sub-topology applied to one partition of its input topics.

Task ``<subtopology>_<p>`` reads partition ``p`` of every source topic of its sub-topology, owns one
instance of each of the sub-topology's stores (folder ``<state.dir>/<application.id>/<taskId>/rocksdb/
<store>``, changelog partition ``p``) and keeps its stream time (the largest record timestamp seen).

Lifecycle: ``CREATED`` (partitions assigned) → ``initialize()`` opens the stores and builds the processors
→ ``RESTORING`` (the changelog reader brings the stores up to date) → ``RUNNING`` (processes records) →
``CLOSED``. Commits are driven from outside (``streamapp.processing.commit``).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from streamapp.kafka.types import ConsumerRecord, ProducerClient, TopicPartition
from streamapp.processors import BuildContext, Processor, ProcessorMetrics, build_task_processors, source_node_names
from streamapp.serdes import serde_for
from streamapp.state.changelogging import ChangeLoggingKeyValueStore
from streamapp.state.checkpoint import CHECKPOINT_FILE_NAME, OffsetCheckpoint
from streamapp.state.stores import PersistentKeyValueStore, TypedKeyValueStore
from streamapp.topology import Subtopology, TopologyDescription

__all__ = ["ProcessingError", "StoreFactory", "StreamTask", "TaskId", "TaskState"]

log = logging.getLogger(__name__)

StoreFactory = Callable[[str, Path], PersistentKeyValueStore]
"""Opens the persistent store called ``name`` in folder ``path`` (may raise StoreLockedError)."""


class TaskId(NamedTuple):
    """``<subtopology>_<partition>``, Kafka Streams' TaskId."""

    subtopology: int
    partition: int

    def __str__(self) -> str:
        return f"{self.subtopology}_{self.partition}"

    @classmethod
    def parse(cls, text: str) -> TaskId:
        subtopology, _, partition = text.partition("_")
        return cls(int(subtopology), int(partition))


class TaskState(enum.Enum):
    CREATED = "created"
    RESTORING = "restoring"
    RUNNING = "running"
    CLOSED = "closed"


class ProcessingError(RuntimeError):
    """Processing a record failed (a user function raised, a serde rejected a value, ...)."""


class StreamTask:
    """One task: its input partitions, stores, processors, consumed offsets and stream time."""

    def __init__(
        self,
        task_id: TaskId,
        description: TopologyDescription,
        subtopology: Subtopology,
        application_id: str,
        task_dir: Path,
        producer: ProducerClient,
        functions: dict[str, dict[str, Callable[..., Any]]],
        store_factory: StoreFactory,
    ) -> None:
        self.id = task_id
        self.description = description
        self.subtopology = subtopology
        self.application_id = application_id
        self.task_dir = task_dir
        self.state = TaskState.CREATED
        self.input_partitions: set[TopicPartition] = set()
        self.stores: dict[str, ChangeLoggingKeyValueStore] = {}
        self.stream_time = -1
        self.records_processed = 0
        self.metrics = ProcessorMetrics()
        self.consumed_offsets: dict[TopicPartition, int] = {}
        """Next offset to read per input partition (last processed + 1): what a commit commits."""
        self.committed_offsets: dict[TopicPartition, int] = {}
        self._producer = producer
        self._functions = functions
        self._store_factory = store_factory
        self._sources: dict[str, Processor] = {}
        self._timestamp = -1
        self._checkpoint = OffsetCheckpoint(task_dir / CHECKPOINT_FILE_NAME)

    def __repr__(self) -> str:
        return f"StreamTask({self.id}, {self.state.value})"

    # -- lifecycle ---------------------------------------------------------------------------------

    def initialize(self) -> None:
        """Open the stores from local state and build the processor graph.

        Raises StoreLockedError (from the store factory) while a previous owner still holds a store; the
        task stays CREATED and may try again. Stores opened before the failure are closed again.
        """
        self.task_dir.mkdir(parents=True, exist_ok=True)
        try:
            for name in self.subtopology.stores:
                changelog = TopicPartition(
                    self.description.changelog_topic(self.application_id, name), self.id.partition
                )
                inner = self._store_factory(name, self.task_dir / "rocksdb" / name)
                self.stores[name] = ChangeLoggingKeyValueStore(inner, changelog, self._current_timestamp)
        except Exception:
            self._close_stores()
            raise
        self._log_checkpoint_mismatch()
        ctx = BuildContext(
            application_id=self.application_id,
            partition=self.id.partition,
            source_nodes=source_node_names(self.description, self.subtopology),
            functions=self._functions,
            topic_of=lambda node: self.description.repartition_topic(self.application_id, node),
            store=self._typed_store,
            send=self._send,
            metrics=self.metrics,
        )
        self._sources = build_task_processors(self.description, self.subtopology, ctx)
        self.state = TaskState.RESTORING

    def mark_running(self) -> None:
        self.state = TaskState.RUNNING

    def close(self, clean: bool) -> None:
        """Close the stores. ``clean``: the task was just committed, so its checkpoint is written; otherwise
        buffered writes are dropped and the stores stay at their last applied batch."""
        if self.state is TaskState.CLOSED:
            return
        if clean and self.has_pending_writes():
            raise RuntimeError(f"task {self.id}: clean close with uncommitted store writes")
        if clean and self.stores:
            self.write_checkpoint()
        self._close_stores()
        self.state = TaskState.CLOSED
        log.info("Closed task %s (%s)", self.id, "clean" if clean else "dirty")

    # -- processing --------------------------------------------------------------------------------

    def process(self, record: ConsumerRecord, partition: TopicPartition | None = None) -> None:
        """Run one consumed record through the processor graph. Raises ProcessingError.

        ``partition`` is ``record.topic_partition`` when the caller has it already.
        """
        source = self._sources.get(record.topic)
        if source is None:
            raise ProcessingError(f"task {self.id}: no source node reads topic {record.topic}")
        self._timestamp = record.timestamp
        if record.timestamp > self.stream_time:
            self.stream_time = record.timestamp
        try:
            source.process(record.key, record.value, record.timestamp)
        except Exception as exc:
            raise ProcessingError(
                f"task {self.id}: failed to process record {record.topic}-{record.partition}@{record.offset}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        self.consumed_offsets[partition or record.topic_partition] = record.offset + 1
        self.records_processed += 1

    # -- commit ------------------------------------------------------------------------------------

    def commit_needed(self) -> bool:
        return self.consumed_offsets != self.committed_offsets or self.has_pending_writes()

    def has_pending_writes(self) -> bool:
        return any(store.has_pending for store in self.stores.values())

    @property
    def pending_bytes(self) -> int:
        return sum(store.pending_bytes for store in self.stores.values())

    def send_changelog(self) -> None:
        """Commit step 1: queue the buffered store writes to the changelog partitions."""
        for store in self.stores.values():
            store.send_changelog(self._producer)

    def offsets_to_commit(self) -> dict[TopicPartition, int]:
        """Commit step 2: the consumed offsets not committed yet."""
        return {tp: off for tp, off in self.consumed_offsets.items() if self.committed_offsets.get(tp) != off}

    def complete_commit(self) -> None:
        """Commit step 3, after the offsets were committed: apply store batches, write the checkpoint."""
        for store in self.stores.values():
            store.apply()
        if self.stores:
            self.write_checkpoint()
        self.committed_offsets = dict(self.consumed_offsets)

    def discard_pending(self) -> None:
        """Drop buffered store writes and uncommitted progress (the commit failed)."""
        for store in self.stores.values():
            store.discard()
        self.consumed_offsets = dict(self.committed_offsets)

    def changelog_offsets(self) -> dict[TopicPartition, int]:
        """Offset of the last changelog record in each store (stores with none are left out)."""
        offsets: dict[TopicPartition, int] = {}
        for store in self.stores.values():
            offset = store.changelog_offset()
            if offset is not None:
                offsets[store.changelog] = offset
        return offsets

    def write_checkpoint(self) -> None:
        self._checkpoint.write(self.changelog_offsets())

    # -- internals ---------------------------------------------------------------------------------

    def _current_timestamp(self) -> int:
        return self._timestamp

    def _send(self, topic: str, key: bytes | None, value: bytes | None, timestamp: int) -> None:
        self._producer.send(topic, key, value, timestamp)

    def _typed_store(self, name: str) -> TypedKeyValueStore:
        spec = self.description.store(name)
        return TypedKeyValueStore(self.stores[name], serde_for(spec.key_serde), serde_for(spec.value_serde))

    def _close_stores(self) -> None:
        for store in self.stores.values():
            try:
                store.close()
            except Exception:
                log.exception("Failed to close store %s of task %s", store.name, self.id)
        self.stores.clear()

    def _log_checkpoint_mismatch(self) -> None:
        try:
            checkpointed: Mapping[TopicPartition, int] = self._checkpoint.read()
        except ValueError as exc:
            log.warning("Ignored unreadable checkpoint of task %s: %s", self.id, exc)
            return
        held = self.changelog_offsets()
        if checkpointed and checkpointed != held:
            log.info(
                "Task %s: stores hold changelog offsets %s, checkpoint file said %s; the stores win",
                self.id,
                held,
                checkpointed,
            )
