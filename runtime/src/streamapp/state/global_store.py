"""Global state: the stores of a worker's GlobalKTables, each a full copy of one topic (all partitions).

Follows Kafka Streams' ``GlobalStateManagerImpl`` / ``GlobalStateUpdateTask``: a global store has no
changelog topic; its source topic *is* its changelog. Each worker process (stream thread) holds its own
copy, in ``<state.dir>/<application.id>/global/<thread index>/``::

    global/0/rocksdb/<store>/     one RocksDB database per global store (raw key and value bytes)
    global/0/.checkpoint          Kafka's OffsetCheckpoint format; one line per source partition

Unlike a task checkpoint, a global checkpoint entry is the *next* offset to read of a source partition
(the consumer position, as Kafka Streams' global checkpoint records). Data is written before the
checkpoint, so after a crash the checkpoint is at or behind the data and replaying from it re-applies
records in log order, which ends in the same state (last value per key wins).

Records are stored as consumed: key bytes → value bytes; a null value deletes the key; a null key is
skipped (Kafka Streams' ``KTableSource`` drops it). Readers (join processors) see a global store through
a ``TypedKeyValueStore`` with the ``global_table`` node's serdes; a processor cannot write it.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from streamapp.kafka.types import ConsumerRecord, TopicPartition
from streamapp.serdes import serde_for
from streamapp.state.checkpoint import CHECKPOINT_FILE_NAME, CheckpointError, OffsetCheckpoint
from streamapp.state.stores import PersistentKeyValueStore, TypedKeyValueStore

__all__ = ["GLOBAL_DIR_NAME", "GlobalStateManager", "GlobalStore", "GlobalStoreSpec", "ReadOnlyStoreError"]

log = logging.getLogger(__name__)

GLOBAL_DIR_NAME = "global"
"""Folder under ``<state.dir>/<application.id>`` that holds the global state of every worker."""

GlobalStoreFactory = Callable[[str, Path], PersistentKeyValueStore]
"""Opens the persistent store called ``name`` in folder ``path`` (may raise StoreLockedError)."""


class ReadOnlyStoreError(RuntimeError):
    """A processor tried to write a global store; only the global consumer updates it."""


@dataclass(frozen=True)
class GlobalStoreSpec:
    """One global store: its name, the topic it mirrors, the serdes of that topic's keys and values, and the
    ``global_table`` node that declares it (processors ask for a global table by node name)."""

    name: str
    topic: str
    key_serde: str
    value_serde: str
    node: str = ""


class GlobalStore:
    """One global store over a persistent bytes store; read-only for processors.

    Implements ``BytesKeyValueStore`` so ``TypedKeyValueStore`` can wrap it; ``put`` raises
    ReadOnlyStoreError.
    """

    def __init__(self, spec: GlobalStoreSpec, inner: PersistentKeyValueStore) -> None:
        self.name = spec.name
        self.spec = spec
        self.inner = inner

    def get(self, key: bytes) -> bytes | None:
        return self.inner.get(key)

    def put(self, key: bytes, value: bytes | None) -> None:
        raise ReadOnlyStoreError(f"global store '{self.name}' is read-only; it follows topic '{self.spec.topic}'")

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        return self.inner.items()

    def typed(self) -> TypedKeyValueStore:
        """The store seen through the topic's key and value serdes."""
        topic = self.spec.topic  # the global topic is the store's changelog (Kafka's global stores)
        return TypedKeyValueStore(
            self, serde_for(self.spec.key_serde, topic, is_key=True), serde_for(self.spec.value_serde, topic)
        )


class GlobalStateManager:
    """The global stores of one worker, their source positions and their checkpoint file.

    Lifecycle: ``open()`` opens every store and reads the checkpoint; the global consumer then calls
    ``apply(records)`` for consumed records (in offset order per partition) and ``checkpoint()`` from time
    to time; ``close()`` writes the checkpoint and closes the stores.
    """

    def __init__(self, specs: Iterable[GlobalStoreSpec], directory: Path, store_factory: GlobalStoreFactory) -> None:
        self.directory = directory
        self.specs = {spec.name: spec for spec in specs}
        self._by_topic = {spec.topic: spec.name for spec in self.specs.values()}
        if len(self._by_topic) != len(self.specs):
            raise ValueError("two global stores follow the same topic")
        self._factory = store_factory
        self._checkpoint = OffsetCheckpoint(directory / CHECKPOINT_FILE_NAME)
        self.stores: dict[str, GlobalStore] = {}
        self.positions: dict[TopicPartition, int] = {}
        """Next offset to read per source partition (only partitions that were read or checkpointed)."""
        self.records_applied = 0

    @property
    def topics(self) -> list[str]:
        """The source topics of the global stores, sorted."""
        return sorted(self._by_topic)

    def open(self) -> None:
        """Open every store; read the checkpoint (an unreadable one is ignored: stores replay from scratch).

        Raises StoreLockedError (from the store factory) while another process holds a store; stores
        opened before the failure are closed again.
        """
        self.directory.mkdir(parents=True, exist_ok=True)
        try:
            for spec in self.specs.values():
                self.stores[spec.name] = GlobalStore(spec, self._factory(spec.name, self._store_path(spec.name)))
        except Exception:
            self._close_stores()
            raise
        try:
            checkpointed = self._checkpoint.read()
        except CheckpointError as exc:
            log.warning("Ignored unreadable global checkpoint: %s", exc)
            checkpointed = {}
        self.positions = {tp: offset for tp, offset in checkpointed.items() if tp.topic in self._by_topic}

    def store(self, name: str) -> GlobalStore:
        """The open global store called ``name``; KeyError for an unknown one."""
        return self.stores[name]

    def typed_store(self, name: str) -> TypedKeyValueStore:
        """``store(name)`` seen through its serdes: what join processors read."""
        return self.stores[name].typed()

    def table(self, node: str) -> TypedKeyValueStore:
        """The typed store of the ``global_table`` node called ``node``; KeyError for an unknown node."""
        for spec in self.specs.values():
            if spec.node == node:
                return self.typed_store(spec.name)
        raise KeyError(f"no global table '{node}' in this worker")

    def apply(self, records: Iterable[ConsumerRecord]) -> int:
        """Write consumed records to their stores (one atomic batch per store); returns how many applied.

        Records of unknown topics and records below a partition's position (already applied) are skipped.
        """
        batches: dict[str, dict[bytes, bytes | None]] = {}
        applied = 0
        for record in records:
            name = self._by_topic.get(record.topic)
            if name is None:
                continue
            tp = TopicPartition(record.topic, record.partition)
            if record.offset < self.positions.get(tp, 0):
                continue
            self.positions[tp] = record.offset + 1
            if record.key is None:
                continue
            batches.setdefault(name, {})[record.key] = record.value
            applied += 1
        for name, batch in batches.items():
            self.stores[name].inner.write(batch, None)
        self.records_applied += applied
        return applied

    def advance(self, positions: Mapping[TopicPartition, int]) -> None:
        """Move partition positions forward without records (transaction markers, compacted gaps)."""
        for tp, offset in positions.items():
            if tp.topic in self._by_topic and offset > self.positions.get(tp, 0):
                self.positions[tp] = offset

    def reset(self, topic: str) -> None:
        """Wipe the store following ``topic`` and forget its positions (its checkpoint is out of range).

        Kafka Streams wipes global state on an invalid offset and bootstraps again from the beginning.
        """
        name = self._by_topic[topic]
        log.warning("Wiping global store %s: its checkpointed offsets of %s are out of range", name, topic)
        self.stores.pop(name).inner.close()
        shutil.rmtree(self._store_path(name), ignore_errors=True)
        self.stores[name] = GlobalStore(self.specs[name], self._factory(name, self._store_path(name)))
        self.positions = {tp: off for tp, off in self.positions.items() if tp.topic != topic}
        self.checkpoint()

    def checkpoint(self) -> None:
        """Write every known position to the checkpoint file (atomically)."""
        self._checkpoint.write(self.positions)

    def close(self) -> None:
        """Checkpoint and close the stores. Idempotent."""
        if self.stores:
            try:
                self.checkpoint()
            except OSError:
                log.exception("Failed to write the global checkpoint in %s", self.directory)
        self._close_stores()

    def _store_path(self, name: str) -> Path:
        return self.directory / "rocksdb" / name

    def _close_stores(self) -> None:
        for store in self.stores.values():
            try:
                store.inner.close()
            except Exception:
                log.exception("Failed to close global store %s", store.name)
        self.stores.clear()


def global_state_dir(application_state_dir: Path, thread_index: int) -> Path:
    """``<state.dir>/<application.id>/global/<thread index>``: one worker's global state folder."""
    return application_state_dir / GLOBAL_DIR_NAME / str(thread_index)
