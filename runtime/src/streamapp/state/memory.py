"""An in-memory persistent-store stand-in: same contract as ``RocksDBStore``, nothing on disk.

Used by unit tests and, later, by the TopologyTestDriver. "Persistent" here means only that it implements
``PersistentKeyValueStore``: batches and the changelog offset are applied atomically, and the data lives
as long as the object.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

__all__ = ["InMemoryKeyValueStore"]


class InMemoryKeyValueStore:
    """A dict of bytes to bytes with a recorded changelog offset (implements ``PersistentKeyValueStore``)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._data: dict[bytes, bytes] = {}
        self._changelog_offset: int | None = None
        self._metadata: dict[bytes, bytes] = {}
        self.closed = False

    def get(self, key: bytes) -> bytes | None:
        return self._data.get(key)

    def write(
        self,
        batch: Mapping[bytes, bytes | None],
        changelog_offset: int | None,
        metadata: Mapping[bytes, bytes] | None = None,
    ) -> None:
        if metadata:
            self._metadata.update(metadata)
        for key, value in batch.items():
            if value is None:
                self._data.pop(key, None)
            else:
                self._data[key] = value
        if changelog_offset is not None:
            self._changelog_offset = changelog_offset

    def changelog_offset(self) -> int | None:
        return self._changelog_offset

    def get_metadata(self, key: bytes) -> bytes | None:
        return self._metadata.get(key)

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        yield from sorted(self._data.items())

    def range(self, lower: bytes, upper: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        """Keys in ``[lower, upper)`` (``upper`` None: to the end) with their values, in key order."""
        for key, value in sorted(self._data.items()):
            if key >= lower and (upper is None or key < upper):
                yield key, value

    def close(self) -> None:
        self.closed = True
