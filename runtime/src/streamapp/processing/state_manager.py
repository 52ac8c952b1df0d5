"""StateManager: one task's state, shared by the active and the standby task of that task (Kafka Streams'
``ProcessorStateManager``, which ``StreamTask`` and ``StandbyTask`` both use).

It owns, for task ``<subtopology>_<partition>``:

- the task folder ``<state.dir>/<application.id>/<taskId>/`` and its ``.lock`` (``TaskDirectoryLock``, held from
  ``open`` until ``close``: one owner per instance at a time, Kafka's ``StateDirectory.lock(taskId)``);
- every store of the sub-topology, opened in ``rocksdb/<store>`` in the one layout every opener shares
  (``open_task_stores``) behind its changelogging layer, with its changelog partition
  ``<application.id>-<store>-changelog``-``<partition>``;
- the ``.checkpoint`` file (``checkpoint``: the offset of the last changelog record each store holds);
- the store writes between two commits (``send_changelog``, ``apply``, ``discard``).

The changelog reader (``streamapp.state.restore.ChangelogReader``) restores or updates ``stores`` from the offsets
they hold, whichever task kind registered them.

**Recycling** (Kafka's ``TaskManager`` recycling a ``StandbyTask`` into a ``StreamTask`` and back, through
``ProcessorStateManager.transitionTaskType``): a stream thread that turns its standby of a task into the active
task, or keeps the state of an active task it lost as a standby, hands the open StateManager to the new task
kind: ``open`` on an open manager keeps the lock and the open stores and only rebinds the timestamp the stores log
writes at. Nothing is reopened or copied; the reader resumes each store after the offset it holds.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from streamapp.kafka.types import ProducerClient, TopicPartition
from streamapp.processing.task_id import TaskId
from streamapp.state.changelogging import ChangeLoggingKeyValueStore
from streamapp.state.checkpoint import CHECKPOINT_FILE_NAME, OffsetCheckpoint
from streamapp.state.directory import StateDirectory, TaskDirectoryLock
from streamapp.state.grace_buffer import GraceBufferStore
from streamapp.state.segments import segmented_store
from streamapp.state.stores import PersistentKeyValueStore
from streamapp.state.timestamped import logged_store
from streamapp.state.versioned import VersionedChangeLoggingStore
from streamapp.topology import Subtopology, TopologyDescription
from streamapp.topology.stores import grace_buffer_stores, timestamped_stores

__all__ = ["StateManager", "StoreFactory", "no_record_timestamp", "open_task_stores"]

log = logging.getLogger(__name__)

StoreFactory = Callable[[str, Path], PersistentKeyValueStore]
"""Opens the persistent store called ``name`` in folder ``path`` (may raise StoreLockedError)."""


def no_record_timestamp() -> int:
    """The record timestamp of a standby task's stores: -1, none (a standby never writes, it only restores)."""
    return -1


def open_task_stores(
    description: TopologyDescription,
    subtopology: Subtopology,
    application_id: str,
    task_id: TaskId,
    task_dir: Path,
    store_factory: StoreFactory,
    timestamp: Callable[[], int],
) -> dict[str, ChangeLoggingKeyValueStore]:
    """Open every store of ``subtopology`` for task ``task_id`` in ``<task_dir>/rocksdb/<store>``, each in the
    layout every opener of a task folder shares (active and standby tasks alike):

    - the persistent store from ``store_factory``, under a ``SegmentedBytesStore`` for ``window`` and ``session``
      stores (Kafka's segmented bytes store; a store folder written before segments is migrated on open,
      ``streamapp.state.segments``);
    - the changelogging layer (changelog partition ``<application.id>-<store>-changelog``-``task_id.partition``),
      timestamped for the DSL's key-value stores (KIP-258; a plain-value store is upgraded on open), versioned for
      ``versioned`` stores (``streamapp.state.versioned``: one changelog record per put), keeping its stream time
      for grace buffers (``streamapp.state.grace_buffer``).

    ``timestamp`` gives the timestamp (epoch ms) of the record being processed (changelog record timestamps).
    Raises StoreLockedError while another owner holds a store; the stores opened before it are closed again.
    """
    timestamped = timestamped_stores(description.nodes, description.stores)
    buffers = grace_buffer_stores(description.nodes)
    stores: dict[str, ChangeLoggingKeyValueStore] = {}
    try:
        for name in subtopology.stores:
            changelog = TopicPartition(description.changelog_topic(application_id, name), task_id.partition)
            persistent = store_factory(name, task_dir / "rocksdb" / name)
            try:
                spec = description.store(name)
                inner = segmented_store(spec, persistent)
                if spec.type == "versioned" and spec.history_retention_ms is not None:
                    stores[name] = VersionedChangeLoggingStore(inner, changelog, timestamp, spec.history_retention_ms)
                elif name in buffers:
                    stores[name] = GraceBufferStore(inner, changelog, timestamp)
                else:
                    stores[name] = logged_store(name in timestamped, inner, changelog, timestamp)
            except Exception:
                persistent.close()
                raise
    except Exception:
        for store in stores.values():
            store.close()
        raise
    return stores


class StateManager:
    """The state of one task (see the module docstring). ``stores`` is one dict for the manager's life: views built
    on it (``WindowedStateAccess``) see the stores ``open`` adds and ``close`` removes."""

    def __init__(
        self,
        task_id: TaskId,
        task_dir: Path,
        store_factory: StoreFactory,
        description: TopologyDescription,
        subtopology: Subtopology,
        application_id: str,
    ) -> None:
        """Task ``task_id``'s state in folder ``task_dir``, its stores opened by ``store_factory``: those of
        ``subtopology`` of ``description``, with the changelog topics of ``application_id``. Opens nothing yet."""
        self.task_id = task_id
        self.task_dir = task_dir
        self.stores: dict[str, ChangeLoggingKeyValueStore] = {}
        """Store name -> the open store (empty while closed)."""
        self._opener = (store_factory, description, subtopology, application_id)
        self._checkpoint = OffsetCheckpoint(task_dir / CHECKPOINT_FILE_NAME)
        self._lock: TaskDirectoryLock | None = None

    def __repr__(self) -> str:
        return f"StateManager({self.task_id}, {'open' if self.is_open else 'closed'})"

    @property
    def is_open(self) -> bool:
        return self._lock is not None

    def open(self, record_timestamp: Callable[[], int]) -> None:
        """Lock the task folder and open the stores, whose writes are logged at ``record_timestamp()`` (epoch ms;
        ``no_record_timestamp`` for a standby). On an open manager (handed over by the other task kind) only rebind
        ``record_timestamp``: the lock and the stores stay as they are (Kafka's ``transitionTaskType``).

        Raises TaskDirectoryLockedError or StoreLockedError while another owner (another stream thread of this
        instance) holds the folder or a store; the manager is then closed again and ``open`` may be retried.
        """
        if self.is_open:
            for store in self.stores.values():
                store.bind_record_timestamp(record_timestamp)
            return
        self._lock = TaskDirectoryLock(self.task_dir)
        factory, description, subtopology, application_id = self._opener
        try:
            self.stores.update(
                open_task_stores(
                    description, subtopology, application_id, self.task_id, self.task_dir, factory, record_timestamp
                )
            )
        except Exception:
            self.close(checkpoint=False)
            raise
        self._log_checkpoint_mismatch()

    def changelog_offsets(self) -> dict[TopicPartition, int]:
        """Offset of the last changelog record in each store (stores with none are left out)."""
        offsets: dict[TopicPartition, int] = {}
        for store in self.stores.values():
            offset = store.changelog_offset()
            if offset is not None:
                offsets[store.changelog] = offset
        return offsets

    def checkpoint(self) -> None:
        """Write ``changelog_offsets`` to the ``.checkpoint`` file (nothing without stores). Raises OSError."""
        if self.stores:
            self._checkpoint.write(self.changelog_offsets())

    def touch(self) -> None:
        """Mark the task folder as in use (``state.cleanup.delay.ms``, ``streamapp.state.directory``)."""
        StateDirectory.touch(self.task_dir)

    # -- the store writes of one commit (active tasks) ----------------------------------------------

    @property
    def has_pending(self) -> bool:
        return any(store.has_pending for store in self.stores.values())

    @property
    def pending_bytes(self) -> int:
        return sum(store.pending_bytes for store in self.stores.values())

    def send_changelog(self, producer: ProducerClient) -> None:
        """Queue the buffered store writes to the changelog partitions (commit step 1)."""
        for store in self.stores.values():
            store.send_changelog(producer)

    def apply(self) -> None:
        """Apply the sent writes to the stores, then write the checkpoint (after the offsets were committed)."""
        for store in self.stores.values():
            store.apply()
        self.checkpoint()

    def discard(self) -> None:
        """Drop the buffered writes (the commit failed): the stores stay at their last applied batch."""
        for store in self.stores.values():
            store.discard()

    # -- close ----------------------------------------------------------------------------------------

    def close(self, checkpoint: bool) -> None:
        """Write the checkpoint when ``checkpoint`` (raises OSError; nothing is closed then), close the stores and
        release the folder. Idempotent; a store failing to close is logged and the others are closed."""
        if checkpoint:
            self.checkpoint()
        for store in self.stores.values():
            try:
                store.close()
            except Exception:
                log.exception("Failed to close store %s of task %s", store.name, self.task_id)
        self.stores.clear()
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def _log_checkpoint_mismatch(self) -> None:
        try:
            checkpointed = self._checkpoint.read()
        except ValueError as exc:
            log.warning("Ignored unreadable checkpoint of task %s: %s", self.task_id, exc)
            return
        held = self.changelog_offsets()
        if checkpointed and checkpointed != held:
            log.info(
                "Task %s: stores hold changelog offsets %s, checkpoint file said %s; the stores win",
                self.task_id,
                held,
                checkpointed,
            )
