"""RocksDB key-value stores (rocksdict); the only module that imports ``rocksdict``.

One store is one RocksDB database in ``<task dir>/rocksdb/<store name>/``. Keys and values are raw bytes
(the serialized forms, exactly what the changelog carries). The changelog offset the data corresponds to
lives in the column family ``streamapp.metadata`` and is written in the *same* ``WriteBatch`` as the data,
so after any crash the store is exactly at some applied batch and restore resumes right after it.

Memory is bounded per stream thread, not per store: every store opened with the same ``RocksDBMemory``
shares one LRU block cache, and memtables are charged to that cache through one ``WriteBufferManager``
(the pattern Kafka Streams documents as ``BoundedMemoryRocksDBConfig``). A thread owning 30 stores thus
still uses about ``rocksdb.block.cache.bytes`` of RocksDB memory.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, cast

import rocksdict

from streamapp.state.stores import StoreLockedError

__all__ = ["RocksDBMemory", "RocksDBStore", "StoreLockedError"]

METADATA_COLUMN_FAMILY = "streamapp.metadata"
_CHANGELOG_OFFSET_KEY = b"changelog.offset"
_OFFSET = struct.Struct(">q")


class RocksDBMemory:
    """The RocksDB memory budget of one stream thread: a shared block cache with memtables charged to it.

    ``block_cache_bytes``: capacity of the LRU cache (data blocks, index/filter blocks and memtables).
    ``write_buffer_bytes``: memtable budget inside that capacity; reaching it triggers memtable flushes.
    """

    def __init__(self, block_cache_bytes: int, write_buffer_bytes: int) -> None:
        if write_buffer_bytes > block_cache_bytes:
            raise ValueError("rocksdb write buffer budget must not exceed the block cache size")
        self.block_cache_bytes = block_cache_bytes
        self.write_buffer_bytes = write_buffer_bytes
        self._cache = rocksdict.Cache(block_cache_bytes)
        self._write_buffer_manager = rocksdict.WriteBufferManager.new_write_buffer_manager_with_cache(
            write_buffer_bytes, False, self._cache
        )

    def options(self) -> Any:
        """Options for one database: raw bytes, shared cache and write buffer manager, bloom filters."""
        options = rocksdict.Options(raw_mode=True)
        options.create_if_missing(True)
        options.create_missing_column_families(True)
        options.set_write_buffer_manager(self._write_buffer_manager)
        options.set_write_buffer_size(min(4 * 1024 * 1024, self.write_buffer_bytes // 2))
        options.set_max_write_buffer_number(2)
        options.set_compression_type(rocksdict.DBCompressionType.lz4())
        options.set_max_total_wal_size(64 * 1024 * 1024)
        table = rocksdict.BlockBasedOptions()
        table.set_block_cache(self._cache)
        table.set_bloom_filter(10, True)
        table.set_cache_index_and_filter_blocks(True)
        options.set_block_based_table_factory(table)
        return options


class RocksDBStore:
    """A persistent bytes key-value store in one RocksDB database (implements ``PersistentKeyValueStore``).

    ``write_ahead_log``: False for a store whose files are thrown away with the process's state (the
    ``TopologyTestDriver``'s, removed at its ``close``): its writes skip RocksDB's write-ahead log, whose only
    use is to recover them after a crash (a clean close still flushes them to the store's files).

    Raises StoreLockedError from the constructor when another instance holds the database open.
    """

    def __init__(self, name: str, path: Path, memory: RocksDBMemory, *, write_ahead_log: bool = True) -> None:
        self.name = name
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        options = memory.options()
        try:
            self._db = rocksdict.Rdict(str(path), options=options, column_families={METADATA_COLUMN_FAMILY: options})
        except Exception as exc:
            if "lock" in str(exc).lower():
                raise StoreLockedError(f"store '{name}' at {path} is locked by another owner") from exc
            raise
        self._metadata = self._db.get_column_family(METADATA_COLUMN_FAMILY)
        self._metadata_handle = self._db.get_column_family_handle(METADATA_COLUMN_FAMILY)
        self._write_options = rocksdict.WriteOptions()
        self._write_options.disable_wal = not write_ahead_log  # type: ignore[method-assign,assignment]  # a property (the stub says method)
        self._changelog_offset: int | None = self._read_changelog_offset()
        """The stored changelog offset: read once, then kept as ``write`` stores it (this instance holds the
        database's lock, so no other writer moves it)."""
        self._closed = False

    def get(self, key: bytes) -> bytes | None:
        value = self._db.get(key)
        return None if value is None else bytes(value)

    def write(
        self,
        batch: Mapping[bytes, bytes | None],
        changelog_offset: int | None,
        metadata: Mapping[bytes, bytes] | None = None,
    ) -> None:
        """Apply puts (value bytes) and deletes (``None``) with the changelog offset and ``metadata`` entries
        (column family ``streamapp.metadata``), atomically."""
        write_batch = rocksdict.WriteBatch(raw_mode=True)
        for key, value in batch.items():
            if value is None:
                write_batch.delete(key)
            else:
                write_batch.put(key, value)
        if changelog_offset is not None:
            write_batch.put(_CHANGELOG_OFFSET_KEY, _OFFSET.pack(changelog_offset), self._metadata_handle)
        for key, value in (metadata or {}).items():
            write_batch.put(key, value, self._metadata_handle)
        self._db.write(write_batch, self._write_options)
        if changelog_offset is not None:
            self._changelog_offset = changelog_offset

    def changelog_offset(self) -> int | None:
        """The changelog offset of the last applied batch (``None``: none applied yet)."""
        return self._changelog_offset

    def _read_changelog_offset(self) -> int | None:
        raw = self._metadata.get(_CHANGELOG_OFFSET_KEY)
        if raw is None:
            return None
        offset: int = _OFFSET.unpack(cast(bytes, raw))[0]
        return offset

    def get_metadata(self, key: bytes) -> bytes | None:
        """A metadata entry (column family ``streamapp.metadata``), or ``None``."""
        raw = self._metadata.get(key)
        return None if raw is None else bytes(raw)

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        for key, value in self._db.items():
            yield cast(bytes, key), cast(bytes, value)

    def range(self, lower: bytes, upper: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        """Keys in ``[lower, upper)`` (``upper`` None: to the end) with their values, in key order.

        A forward scan with RocksDB's iterate upper bound (used by window and session stores, L3).
        """
        read_opt = rocksdict.ReadOptions()
        if upper is not None:
            read_opt.set_iterate_upper_bound(upper)
        for key, value in self._db.items(from_key=lower, read_opt=read_opt):
            yield cast(bytes, key), cast(bytes, value)

    def approximate_num_keys(self) -> int:
        """RocksDB's estimate of the number of keys (``rocksdb.estimate-num-keys``)."""
        value = self._db.property_int_value("rocksdb.estimate-num-keys")
        return int(value or 0)

    def close(self) -> None:
        """Flush the WAL and release the database lock. Idempotent."""
        if self._closed:
            return
        self._closed = True
        # Column-family objects keep the database open; drop them before closing.
        del self._metadata
        del self._metadata_handle
        self._db.flush_wal(True)
        self._db.close()
