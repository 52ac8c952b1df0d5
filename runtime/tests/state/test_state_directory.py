"""The application state directory: stable process id, task folder locks, cleanup after state.cleanup.delay.ms."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from streamapp.state.directory import StateDirectory, TaskDirectoryLock, TaskDirectoryLockedError


def test_process_id_is_created_once_and_stable(tmp_path: Path) -> None:
    first = StateDirectory(tmp_path / "app").process_id()
    assert StateDirectory(tmp_path / "app").process_id() == first


def test_a_task_folder_has_one_owner_at_a_time(tmp_path: Path) -> None:
    lock = TaskDirectoryLock(tmp_path / "1_0")
    with pytest.raises(TaskDirectoryLockedError):
        TaskDirectoryLock(tmp_path / "1_0")
    lock.release()
    TaskDirectoryLock(tmp_path / "1_0").release()


def test_cleanup_deletes_only_unowned_folders_older_than_the_delay(tmp_path: Path) -> None:
    directory = StateDirectory(tmp_path)
    now = time.time()
    for task_id, age_s in (("0_0", 100), ("0_1", 100), ("0_2", 1), ("1_0", 100)):
        (tmp_path / task_id / "rocksdb").mkdir(parents=True)
        os.utime(tmp_path / task_id, (now - age_s, now - age_s))
    (tmp_path / "global").mkdir()
    os.utime(tmp_path / "global", (now - 100, now - 100))
    held = TaskDirectoryLock(tmp_path / "1_0")  # another thread of this instance owns it
    os.utime(tmp_path / "1_0", (now - 100, now - 100))
    deleted = directory.cleanup_obsolete_tasks(owned={"0_1"}, delay_ms=10_000, now_s=now)
    held.release()
    assert deleted == ["0_0"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["0_1", "0_2", "1_0", "global"]
