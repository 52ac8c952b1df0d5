"""RocksDBStore: atomic batches with their changelog offset, reopen, locking, bounded shared memory."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamapp.state.rocksdb import RocksDBMemory, RocksDBStore, StoreLockedError


@pytest.fixture
def memory() -> RocksDBMemory:
    return RocksDBMemory(block_cache_bytes=8 << 20, write_buffer_bytes=2 << 20)


def test_batch_and_changelog_offset_survive_reopen_together(tmp_path: Path, memory: RocksDBMemory) -> None:
    store = RocksDBStore("counts", tmp_path / "counts", memory)
    assert store.changelog_offset() is None
    store.write({b"a": b"1", b"b": b"2"}, changelog_offset=41)
    store.close()
    reopened = RocksDBStore("counts", tmp_path / "counts", memory)
    assert reopened.get(b"a") == b"1" and reopened.get(b"b") == b"2"
    assert reopened.changelog_offset() == 41
    reopened.close()


def test_a_store_without_write_ahead_log_keeps_its_writes_across_a_clean_close(
    tmp_path: Path, memory: RocksDBMemory
) -> None:
    store = RocksDBStore("counts", tmp_path / "counts", memory, write_ahead_log=False)
    store.write({b"a": b"1"}, changelog_offset=3)
    store.close()
    assert not any(wal.stat().st_size for wal in (tmp_path / "counts").glob("*.log"))
    reopened = RocksDBStore("counts", tmp_path / "counts", memory)
    assert reopened.get(b"a") == b"1" and reopened.changelog_offset() == 3
    reopened.close()


def test_none_in_a_batch_deletes_the_key(tmp_path: Path, memory: RocksDBMemory) -> None:
    store = RocksDBStore("s", tmp_path / "s", memory)
    store.write({b"a": b"1", b"b": b"2"}, changelog_offset=1)
    store.write({b"a": None}, changelog_offset=2)
    assert store.get(b"a") is None
    assert list(store.items()) == [(b"b", b"2")]
    assert store.changelog_offset() == 2
    store.close()


def test_a_batch_without_offset_keeps_the_previous_offset(tmp_path: Path, memory: RocksDBMemory) -> None:
    store = RocksDBStore("s", tmp_path / "s", memory)
    store.write({b"a": b"1"}, changelog_offset=7)
    store.write({b"b": b"1"}, changelog_offset=None)
    assert store.changelog_offset() == 7
    store.close()


def test_metadata_is_not_visible_as_data(tmp_path: Path, memory: RocksDBMemory) -> None:
    store = RocksDBStore("s", tmp_path / "s", memory)
    store.write({b"k": b"v"}, changelog_offset=3)
    assert list(store.items()) == [(b"k", b"v")]
    assert store.get(b"changelog.offset") is None
    store.close()


def test_second_open_of_an_open_store_raises_store_locked(tmp_path: Path, memory: RocksDBMemory) -> None:
    store = RocksDBStore("s", tmp_path / "s", memory)
    with pytest.raises(StoreLockedError):
        RocksDBStore("s", tmp_path / "s", memory)
    store.close()
    RocksDBStore("s", tmp_path / "s", memory).close()


def test_close_is_idempotent(tmp_path: Path, memory: RocksDBMemory) -> None:
    store = RocksDBStore("s", tmp_path / "s", memory)
    store.close()
    store.close()


def test_stores_of_a_thread_share_one_bounded_block_cache(tmp_path: Path, memory: RocksDBMemory) -> None:
    stores = [RocksDBStore(f"s{i}", tmp_path / f"s{i}", memory) for i in range(3)]
    for store in stores:
        store.write({f"k{i}".encode(): b"x" * 100 for i in range(1000)}, changelog_offset=0)
        capacity = store._db.property_int_value("rocksdb.block-cache-capacity")
        assert capacity == 8 << 20
    for store in stores:
        store.close()


def test_write_buffer_budget_must_fit_in_the_cache() -> None:
    with pytest.raises(ValueError, match="must not exceed"):
        RocksDBMemory(block_cache_bytes=4 << 20, write_buffer_bytes=8 << 20)
