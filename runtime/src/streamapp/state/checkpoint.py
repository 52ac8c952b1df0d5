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

**Scratch state directories.** State that is thrown away when its owner closes (the TopologyTestDriver's,
removed like Kafka's ``stateDirectory.clean()``) is never read by another process, so its checkpoints need
neither a file nor an fsync: ``scratch_state_dir(root)`` makes every ``OffsetCheckpoint`` under ``root``
keep its offsets in memory until ``release_scratch_state_dir(root)``. A driver commits after every record;
writing a small file costs about a millisecond on an ext4 disk, with or without its fsync. Every other
directory is written as above, so the runtime's durability does not depend on who else runs in the process.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from pathlib import Path

from streamapp.kafka.types import TopicPartition

__all__ = [
    "CHECKPOINT_FILE_NAME",
    "CheckpointError",
    "OffsetCheckpoint",
    "release_scratch_state_dir",
    "scratch_state_dir",
]

CHECKPOINT_FILE_NAME = ".checkpoint"
_VERSION = 0

_ScratchFiles = dict[Path, dict[TopicPartition, int]]
_scratch_roots: dict[Path, _ScratchFiles] = {}
"""Per scratch root, the offsets of each checkpoint "file" under it (see the module docstring)."""
_scratch_lock = threading.Lock()


def scratch_state_dir(root: Path) -> None:
    """Keep the checkpoints of every ``OffsetCheckpoint`` created under ``root`` from now on in memory."""
    with _scratch_lock:
        _scratch_roots.setdefault(root.resolve(), {})


def release_scratch_state_dir(root: Path) -> None:
    """Forget ``root``'s in-memory checkpoints; checkpoints created under it afterwards are files again."""
    with _scratch_lock:
        _scratch_roots.pop(root.resolve(), None)


def _scratch_files(path: Path) -> _ScratchFiles | None:
    """The in-memory checkpoints of the scratch root that ``path`` (resolved) is under, if any."""
    with _scratch_lock:
        if not _scratch_roots:
            return None
        for parent in path.parents:
            files = _scratch_roots.get(parent)
            if files is not None:
                return files
    return None


class CheckpointError(ValueError):
    """The checkpoint file is malformed or has an unknown version."""


class OffsetCheckpoint:
    """Reads and writes one ``.checkpoint`` file (kept in memory under a scratch state directory)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._key = path.resolve() if _scratch_roots else path
        self._scratch = _scratch_files(self._key) if _scratch_roots else None

    def read(self) -> dict[TopicPartition, int]:
        """The offsets in the file; empty when there is no file. Raises CheckpointError if malformed."""
        if self._scratch is not None:
            return dict(self._scratch.get(self._key, {}))
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
        for tp, offset in offsets.items():
            if offset < 0:
                raise ValueError(f"cannot checkpoint negative offset {offset} for {tp}")
        if self._scratch is not None:
            self._scratch[self._key] = dict(offsets)
            return
        lines = [str(_VERSION), str(len(offsets))]
        lines.extend(f"{tp.topic} {tp.partition} {offset}" for tp, offset in sorted(offsets.items()))
        temp = self.path.with_name(self.path.name + ".tmp")
        with open(temp, "w", encoding="utf-8") as file:
            file.write("\n".join(lines) + "\n")
            file.flush()
            os.fsync(file.fileno())
        os.replace(temp, self.path)

    def delete(self) -> None:
        if self._scratch is not None:
            self._scratch.pop(self._key, None)
            return
        self.path.unlink(missing_ok=True)
