"""The application state directory ``<state.dir>/<application.id>/``: its process id and its task folders
(Kafka Streams' ``StateDirectory``).

Layout::

    <state.dir>/<application.id>/
        kafka-streams-process-metadata   {"processId": "<uuid>"}: this instance's stable id (Kafka's file name)
        0_1/                              a task folder (active or standby): rocksdb/<store>/, .checkpoint
        global/                           global stores (never cleaned here)

``process_id()`` names the instance where no ``STREAMAPP_INSTANCE_ID`` is set, so transactional ids survive
restarts. ``cleanup_obsolete_tasks`` deletes task folders no stream thread of this instance owned (neither
active nor standby) for ``state.cleanup.delay.ms``, using the folder's modification time, which owners refresh
(``touch``) while they hold the task (Kafka's ``StateDirectory.cleanRemovedTasks``). A folder whose store is
open elsewhere (RocksDB lock held) is skipped.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
import shutil
import time
import uuid
from collections.abc import Iterable
from pathlib import Path

__all__ = ["PROCESS_METADATA_FILE", "StateDirectory"]

log = logging.getLogger(__name__)

PROCESS_METADATA_FILE = "kafka-streams-process-metadata"
_TASK_DIR = re.compile(r"^\d+_\d+$")


class StateDirectory:
    """One application's state directory (see the module docstring)."""

    def __init__(self, app_dir: Path) -> None:
        self.app_dir = app_dir

    def process_id(self) -> str:
        """This instance's id, created (a random UUID) and stored on first use; stable across restarts.

        Several worker processes may race to create it: the file is written atomically and the winner's id
        is what everyone reads back.
        """
        path = self.app_dir / PROCESS_METADATA_FILE
        existing = self._read_process_id(path)
        if existing is not None:
            return existing
        self.app_dir.mkdir(parents=True, exist_ok=True)
        temp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        temp.write_text(json.dumps({"processId": str(uuid.uuid4())}), encoding="utf-8")
        try:
            os.link(temp, path)  # fails if another process won the race
        except FileExistsError:
            pass
        finally:
            temp.unlink(missing_ok=True)
        winner = self._read_process_id(path)
        assert winner is not None
        return winner

    def task_dirs(self) -> dict[str, Path]:
        """Every task folder (``<subtopology>_<partition>``) by task id."""
        if not self.app_dir.is_dir():
            return {}
        return {p.name: p for p in self.app_dir.iterdir() if p.is_dir() and _TASK_DIR.match(p.name)}

    @staticmethod
    def touch(task_dir: Path) -> None:
        """Mark a task folder as in use now (its owner calls this regularly)."""
        with contextlib.suppress(FileNotFoundError):
            os.utime(task_dir)

    def cleanup_obsolete_tasks(self, owned: Iterable[str], delay_ms: int, now_s: float | None = None) -> list[str]:
        """Delete task folders not in ``owned`` and unused for ``delay_ms``; returns the deleted task ids.

        ``owned`` are the task ids (active and standby) this process holds; other processes of the instance
        protect theirs by touching them and by their RocksDB locks.
        """
        now = time.time() if now_s is None else now_s
        keep = set(owned)
        deleted: list[str] = []
        for task_id, path in sorted(self.task_dirs().items()):
            if task_id in keep:
                continue
            try:
                age_ms = (now - path.stat().st_mtime) * 1000
            except FileNotFoundError:
                continue
            if age_ms < delay_ms or _locked(path):
                continue
            shutil.rmtree(path, ignore_errors=True)
            deleted.append(task_id)
            log.info("Deleted the state of task %s, unused for %.0f s (state.cleanup.delay.ms)", task_id, age_ms / 1000)
        return deleted

    @staticmethod
    def _read_process_id(path: Path) -> str | None:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            return None
        value = data.get("processId") if isinstance(data, dict) else None
        return str(value) if value else None


def _locked(task_dir: Path) -> bool:
    """True when a RocksDB store of the folder is open in another process (its LOCK file is locked).

    Only for folders this process does not hold open: POSIX locks are per process, so probing a LOCK file of
    a database open here would succeed and closing the probe would release that database's lock.
    """
    for lock in task_dir.glob("rocksdb/*/LOCK"):
        try:
            with open(lock, "rb+") as file:
                try:
                    fcntl.lockf(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    return True
                fcntl.lockf(file, fcntl.LOCK_UN)
        except FileNotFoundError:
            continue
    return False
