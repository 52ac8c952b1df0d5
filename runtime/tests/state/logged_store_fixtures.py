"""Logged stores for window/session/suppression tests: a real ``ChangeLoggingKeyValueStore`` over a persistent
backend (in-memory or RocksDB), with ``commit()`` running the commit protocol's store steps."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from streamapp.kafka.types import TopicPartition
from streamapp.state.changelogging import ChangeLoggingKeyValueStore
from streamapp.state.memory import InMemoryKeyValueStore
from streamapp.state.rocksdb import RocksDBMemory, RocksDBStore

CHANGELOG = TopicPartition("app-store-changelog", 0)


class RecordingProducer:
    """Collects changelog records and acknowledges them with increasing offsets."""

    def __init__(self) -> None:
        self.sent: list[tuple[bytes | None, bytes | None, int]] = []
        self._callbacks: list[Callable[[TopicPartition, int], None]] = []
        self.next_offset = 0

    def send(self, topic, key, value, timestamp, partition=None, on_delivery=None):
        self.sent.append((key, value, timestamp))
        if on_delivery is not None:
            self._callbacks.append(on_delivery)

    def acknowledge(self) -> None:
        for callback in self._callbacks:
            callback(CHANGELOG, self.next_offset)
            self.next_offset += 1
        self._callbacks.clear()


class LoggedStore:
    """A logged bytes store plus its producer; ``commit()`` sends, acknowledges and applies the buffer."""

    def __init__(
        self, backend: str, tmp_path: Path, name: str = "store", wrap: Callable[[Any], Any] | None = None
    ) -> None:
        """``wrap``: builds the store the logged store writes to from the backend (e.g. a segmented store)."""
        self.now = 0
        self.producer = RecordingProducer()
        if backend == "rocksdb":
            self.persistent: InMemoryKeyValueStore | RocksDBStore = RocksDBStore(
                name, tmp_path / name, RocksDBMemory(16 << 20, 4 << 20)
            )
        else:
            self.persistent = InMemoryKeyValueStore(name)
        self.store: Any = self.persistent if wrap is None else wrap(self.persistent)
        self.logged = ChangeLoggingKeyValueStore(self.store, CHANGELOG, lambda: self.now)

    def commit(self) -> None:
        self.logged.send_changelog(self.producer)
        self.producer.acknowledge()
        self.logged.apply()

    def close(self) -> None:
        self.logged.close()
