"""The application state directory ``<state.dir>/<application.id>/``: its process id and its task folders
(Kafka Streams' ``StateDirectory``).

Layout::

    <state.dir>/<application.id>/
        kafka-streams-process-metadata   {"processId": "<uuid>"}: this instance's stable id (Kafka's file name)
        0_1/                              a task folder (active or standby): rocksdb/<store>/, .checkpoint
        global/                           global stores (never cleaned here)

``process_id()`` names the instance where no ``STREAMAPP_INSTANCE_ID`` is set, so transactional ids survive
restarts.

``lock_task_dir`` takes a task folder's ``.lock`` (an exclusive ``flock``, per open file, so it also excludes
other stream threads of the same process): whoever opens a task's state (an active or a standby task) holds it
until it closes the task, as Kafka's ``StateDirectory.lock(taskId)``. ``cleanup_obsolete_tasks`` deletes the
task folders this thread does not own (neither active nor standby) that nobody touched for
``state.cleanup.delay.ms`` — owners refresh the folder's modification time (``touch``) while they hold it —
and only while holding their lock (Kafka's ``StateDirectory.cleanRemovedTasks``). ``global/`` is never touched.
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
from collections.abc import Callable, Iterable
from pathlib import Path

__all__ = [
    "LOCK_FILE_NAME",
    "PROCESS_METADATA_FILE",
    "StateCleaner",
    "StateDirectory",
    "TaskDirectoryLock",
    "TaskDirectoryLockedError",
]

log = logging.getLogger(__name__)

PROCESS_METADATA_FILE = "kafka-streams-process-metadata"
LOCK_FILE_NAME = ".lock"
_TASK_DIR = re.compile(r"^\d+_\d+$")


class TaskDirectoryLockedError(RuntimeError):
    """Another owner (a stream thread of this instance) holds the task folder; try again later."""


class TaskDirectoryLock:
    """An exclusive lock on one task folder (see the module docstring); ``release`` is idempotent."""

    def __init__(self, task_dir: Path) -> None:
        task_dir.mkdir(parents=True, exist_ok=True)
        self.path = task_dir / LOCK_FILE_NAME
        self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self._fd)
            self._fd = None
            raise TaskDirectoryLockedError(f"task folder {task_dir} is locked by another owner") from None

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


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

        ``owned`` are the task ids (active and standby) this thread holds; other threads of the instance
        protect theirs by touching them and by their folder locks.
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
            if age_ms < delay_ms:
                continue
            try:
                lock = TaskDirectoryLock(path)
            except (TaskDirectoryLockedError, FileNotFoundError):
                continue
            try:
                shutil.rmtree(path, ignore_errors=True)
            finally:
                lock.release()
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


class StateCleaner:
    """Runs ``cleanup_obsolete_tasks`` for one stream thread: every ``interval`` it touches the folders the thread
    owns (``owned()``: active and standby task ids), then deletes the others that stayed untouched for
    ``delay_ms`` (``state.cleanup.delay.ms``). The interval is a quarter of the delay, between 0.1 and 30 s."""

    def __init__(self, directory: StateDirectory, delay_ms: int, owned: Callable[[], Iterable[str]]) -> None:
        self.directory = directory
        self.delay_ms = delay_ms
        self._owned = owned
        self._interval_s = min(30.0, max(0.1, delay_ms / 4000))
        self._next_run = time.monotonic() + self._interval_s
        self.deleted: list[str] = []
        """Task ids whose state this cleaner deleted (a metric / for tests)."""

    def maybe_run(self, now_s: float | None = None) -> None:
        now = time.monotonic() if now_s is None else now_s
        if now < self._next_run:
            return
        self._next_run = now + self._interval_s
        owned = set(self._owned())
        for task_id in owned:
            StateDirectory.touch(self.directory.app_dir / task_id)
        try:
            self.deleted.extend(self.directory.cleanup_obsolete_tasks(owned, self.delay_ms))
        except OSError:
            log.exception("State cleanup failed; retrying in %.0f s", self._interval_s)
