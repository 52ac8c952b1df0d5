"""The .checkpoint file: Kafka Streams' OffsetCheckpoint format, atomic rewrite, strict parsing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from streamapp.kafka.types import TopicPartition
from streamapp.state.checkpoint import (
    CheckpointError,
    OffsetCheckpoint,
    release_scratch_state_dir,
    scratch_state_dir,
)


def test_written_offsets_read_back(tmp_path: Path) -> None:
    checkpoint = OffsetCheckpoint(tmp_path / ".checkpoint")
    offsets = {TopicPartition("app-counts-changelog", 3): 1041, TopicPartition("app-other-changelog", 3): 0}
    checkpoint.write(offsets)
    assert checkpoint.read() == offsets


def test_file_has_kafka_streams_offset_checkpoint_format(tmp_path: Path) -> None:
    path = tmp_path / ".checkpoint"
    OffsetCheckpoint(path).write({TopicPartition("b", 0): 7, TopicPartition("a", 2): 5})
    assert path.read_text() == "0\n2\na 2 5\nb 0 7\n"


def test_a_kafka_streams_written_file_is_read(tmp_path: Path) -> None:
    path = tmp_path / ".checkpoint"
    path.write_text("0\n1\napp-store-changelog 0 99\n")
    assert OffsetCheckpoint(path).read() == {TopicPartition("app-store-changelog", 0): 99}


def test_missing_file_reads_as_no_offsets(tmp_path: Path) -> None:
    assert OffsetCheckpoint(tmp_path / ".checkpoint").read() == {}


def test_writing_no_offsets_deletes_the_file(tmp_path: Path) -> None:
    path = tmp_path / ".checkpoint"
    OffsetCheckpoint(path).write({TopicPartition("t", 0): 1})
    OffsetCheckpoint(path).write({})
    assert not path.exists()


def test_rewrite_replaces_atomically_and_leaves_no_temp_file(tmp_path: Path) -> None:
    path = tmp_path / ".checkpoint"
    checkpoint = OffsetCheckpoint(path)
    checkpoint.write({TopicPartition("t", 0): 1})
    checkpoint.write({TopicPartition("t", 0): 2})
    assert checkpoint.read() == {TopicPartition("t", 0): 2}
    assert sorted(p.name for p in tmp_path.iterdir()) == [".checkpoint"]


def test_negative_offsets_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="negative"):
        OffsetCheckpoint(tmp_path / ".checkpoint").write({TopicPartition("t", 0): -1})


def test_negative_offsets_in_a_file_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / ".checkpoint"
    path.write_text("0\n2\nt 0 -4\nt 1 3\n")
    assert OffsetCheckpoint(path).read() == {TopicPartition("t", 1): 3}


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("1\n0\n", "unknown offset checkpoint version 1"),
        ("0\n", "ended prematurely"),
        ("0\n2\nt 0 1\n", "expected 2 entries but found 1"),
        ("0\n1\nt 0\n", "malformed line"),
        ("0\n1\nt x 1\n", "malformed line"),
        ("zero\n1\n", "must be integers"),
    ],
)
def test_malformed_files_raise_checkpoint_error(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / ".checkpoint"
    path.write_text(text)
    with pytest.raises(CheckpointError, match=problem):
        OffsetCheckpoint(path).read()


def test_checkpoints_under_a_scratch_state_dir_stay_in_memory(tmp_path: Path) -> None:
    scratch = tmp_path / "driver-app"
    scratch_state_dir(scratch)
    try:
        path = scratch / "0_0" / ".checkpoint"
        path.parent.mkdir(parents=True)
        OffsetCheckpoint(path).write({TopicPartition("t", 0): 5})
        assert not path.exists()
        assert OffsetCheckpoint(path).read() == {TopicPartition("t", 0): 5}
        OffsetCheckpoint(path).write({})
        assert OffsetCheckpoint(path).read() == {}
    finally:
        release_scratch_state_dir(scratch)
    OffsetCheckpoint(path).write({TopicPartition("t", 0): 6})
    assert path.read_text() == "0\n1\nt 0 6\n"


def test_checkpoints_elsewhere_are_fsynced_while_a_scratch_state_dir_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    (tmp_path / "app").mkdir()
    scratch_state_dir(tmp_path / "driver-app")
    try:
        OffsetCheckpoint(tmp_path / "app" / ".checkpoint").write({TopicPartition("t", 0): 1})
    finally:
        release_scratch_state_dir(tmp_path / "driver-app")
    assert len(synced) == 1
    assert (tmp_path / "app" / ".checkpoint").exists()
