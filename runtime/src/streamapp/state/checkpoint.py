"""The ``.checkpoint`` file of a task directory, in Kafka Streams' ``OffsetCheckpoint`` format.

Format (UTF-8 text)::

    0                      <- format version
    2                      <- number of entries
    app-counts-changelog 3 1041
    app-other-changelog 3 7

Each entry is ``<topic> <partition> <offset>``: the offset of the last changelog record the task's store
holds. It is written after every successful commit and on close, atomically (temp file, fsync, rename).

The authority for restore is the offset stored inside each RocksDB store, written in the same batch as
the data (``streamapp.state.rocksdb``); the file is the cheap outside view of it, readable without opening
RocksDB: by a later state-aware assignment (changelog lag of tasks on disk, as Kafka Streams computes
from checkpoint files), by operators and by tests.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from streamapp.kafka.types import TopicPartition

__all__ = ["CHECKPOINT_FILE_NAME", "CheckpointError", "OffsetCheckpoint"]

CHECKPOINT_FILE_NAME = ".checkpoint"
_VERSION = 0


class CheckpointError(ValueError):
    """The checkpoint file is malformed or has an unknown version."""


class OffsetCheckpoint:
    """Reads and writes one ``.checkpoint`` file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> dict[TopicPartition, int]:
        """The offsets in the file; empty when there is no file. Raises CheckpointError if malformed."""
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return {}
        if len(lines) < 2:
            raise CheckpointError(f"{self.path}: file ended prematurely")
        try:
            version, expected = int(lines[0]), int(lines[1])
        except ValueError:
            raise CheckpointError(f"{self.path}: version and entry count must be integers") from None
        if version != _VERSION:
            raise CheckpointError(f"{self.path}: unknown offset checkpoint version {version}")
        offsets: dict[TopicPartition, int] = {}
        for line in lines[2:]:
            pieces = line.split()
            if len(pieces) != 3:
                raise CheckpointError(f"{self.path}: malformed line '{line}'")
            try:
                partition, offset = int(pieces[1]), int(pieces[2])
            except ValueError:
                raise CheckpointError(f"{self.path}: malformed line '{line}'") from None
            if offset >= 0:
                offsets[TopicPartition(pieces[0], partition)] = offset
            else:
                expected -= 1
        if len(offsets) != expected:
            raise CheckpointError(f"{self.path}: expected {expected} entries but found {len(offsets)}")
        return offsets

    def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Replace the file with these offsets atomically; no offsets deletes the file.

        Raises ValueError for a negative offset.
        """
        if not offsets:
            self.delete()
            return
        lines = [str(_VERSION), str(len(offsets))]
        for tp, offset in sorted(offsets.items()):
            if offset < 0:
                raise ValueError(f"cannot checkpoint negative offset {offset} for {tp}")
            lines.append(f"{tp.topic} {tp.partition} {offset}")
        temp = self.path.with_name(self.path.name + ".tmp")
        with open(temp, "w", encoding="utf-8") as file:
            file.write("\n".join(lines) + "\n")
            file.flush()
            os.fsync(file.fileno())
        os.replace(temp, self.path)

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)
