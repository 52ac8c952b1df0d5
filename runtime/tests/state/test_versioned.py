"""Versioned key-value stores (Kafka's ``RocksDBVersionedStore``, KIP-889) on RocksDB and in memory: versions by
timestamp, history retention, tombstones, Kafka's changelog format and restore from it."""

from __future__ import annotations

from pathlib import Path

import pytest
from logged_store_fixtures import CHANGELOG, RecordingProducer
from streamapp.serdes import serde_for
from streamapp.state.memory import InMemoryKeyValueStore
from streamapp.state.rocksdb import RocksDBMemory, RocksDBStore
from streamapp.state.versioned import (
    PUT_RETURN_CODE_NOT_PUT,
    PUT_RETURN_CODE_VALID_TO_UNDEFINED,
    VersionedChangeLoggingStore,
    VersionedKeyValueStore,
    VersionedRecord,
)

RETENTION = 100


class Versioned:
    """A typed versioned store over a real persistent backend, with ``commit()`` running the store's commit steps."""

    def __init__(self, backend: str, tmp_path: Path, name: str = "store") -> None:
        self.producer = RecordingProducer()
        self.tmp_path, self.backend, self.name = tmp_path, backend, name
        self.persistent = self._open()
        self.logged = VersionedChangeLoggingStore(self.persistent, CHANGELOG, lambda: 0, RETENTION)
        self.store = VersionedKeyValueStore(self.logged, serde_for("string"), serde_for("string"))

    def _open(self):
        if self.backend == "rocksdb":
            return RocksDBStore(self.name, self.tmp_path / self.name, RocksDBMemory(16 << 20, 4 << 20))
        return InMemoryKeyValueStore(self.name)

    def commit(self) -> None:
        self.logged.send_changelog(self.producer)
        self.producer.acknowledge()
        self.logged.apply()


@pytest.fixture(params=["rocksdb", "memory"])
def versioned(request: pytest.FixtureRequest, tmp_path: Path) -> Versioned:
    return Versioned(request.param, tmp_path)


def test_get_as_of_returns_the_version_valid_at_that_timestamp(versioned: Versioned) -> None:
    store = versioned.store
    assert store.put("k", "v10", 10) == PUT_RETURN_CODE_VALID_TO_UNDEFINED
    assert store.put("k", "v20", 20) == PUT_RETURN_CODE_VALID_TO_UNDEFINED
    assert store.get("k", 9) is None
    assert store.get("k", 10) == VersionedRecord("v10", 10)
    assert store.get("k", 19) == VersionedRecord("v10", 10)
    assert store.get("k", 20) == VersionedRecord("v20", 20)
    assert store.get("k") == VersionedRecord("v20", 20)


def test_an_out_of_order_put_is_inserted_and_returns_its_valid_to(versioned: Versioned) -> None:
    store = versioned.store
    store.put("k", "v10", 10)
    store.put("k", "v30", 30)
    assert store.put("k", "v20", 20) == 30
    assert store.get("k", 25) == VersionedRecord("v20", 20)
    assert store.get("k") == VersionedRecord("v30", 30)
    assert store.put("k", "v20b", 20) == 30  # same timestamp: the version's value is replaced
    assert store.get("k", 29) == VersionedRecord("v20b", 20)


def test_a_tombstone_version_hides_the_key_until_its_next_version(versioned: Versioned) -> None:
    store = versioned.store
    store.put("k", "v10", 10)
    store.put("k", None, 20)
    store.put("k", "v30", 30)
    assert store.get("k", 15) == VersionedRecord("v10", 10)
    assert store.get("k", 25) is None
    assert store.get("k", 30) == VersionedRecord("v30", 30)
    assert store.delete("k", 40) == VersionedRecord("v30", 30)
    assert store.get("k") is None


def test_a_put_older_than_the_history_retention_is_not_put(versioned: Versioned) -> None:
    store = versioned.store
    store.put("k", "v200", 200)
    assert store.put("k", "old", 99) == PUT_RETURN_CODE_NOT_PUT
    assert store.put("k", "edge", 100) == 200  # exactly stream time - retention is still accepted (Kafka's `<`)
    assert store.get("k", 150) == VersionedRecord("edge", 100)


def test_reads_older_than_the_history_retention_see_only_the_latest_version(versioned: Versioned) -> None:
    store = versioned.store
    store.put("a", "a10", 10)
    store.put("b", "b10", 10)
    store.put("b", "b50", 50)
    store.put("c", "c300", 300)  # stream time 300: reads before 200 have expired
    assert store.get("b", 150) == VersionedRecord("b50", 50)  # the latest version never expires
    assert store.get("a", 150) == VersionedRecord("a10", 10)
    assert store.get("b", 30) is None  # b10 is history older than the retention
    assert store.get("b", 250) == VersionedRecord("b50", 50)


def test_writes_drop_the_versions_no_read_can_return(versioned: Versioned) -> None:
    store = versioned.store
    for timestamp in (10, 20, 30, 400):
        store.put("k", f"v{timestamp}", timestamp)
    versions = dict(versioned.logged.versions())[b"k"]
    assert [v.valid_from for v in versions] == [400, 30]  # 30 is valid until 400 > 400 - 100: kept


def test_the_changelog_has_one_record_per_put_with_the_version_as_its_timestamp(versioned: Versioned) -> None:
    store = versioned.store
    store.put("k", "v10", 10)
    store.put("k", "v5", 5)
    store.put("k", None, 20)
    store.put("k", "old", -200)  # not put: not logged
    versioned.commit()
    assert versioned.producer.sent == [(b"k", b"v10", 10), (b"k", b"v5", 5), (b"k", None, 20)]


def test_restore_from_the_changelog_rebuilds_every_version(versioned: Versioned, tmp_path: Path) -> None:
    store = versioned.store
    store.put("k", "v10", 10)
    store.put("k", "v30", 30)
    store.put("k", "v20", 20)
    store.put("k", None, 40)
    versioned.commit()
    restored = Versioned(versioned.backend, tmp_path, name="restored")
    restored.logged.restore_records(list(versioned.producer.sent), last_offset=3)
    for as_of in (9, 10, 25, 35, 45):
        assert restored.store.get("k", as_of) == store.get("k", as_of)
    assert restored.logged.changelog_offset() == 3
    assert restored.logged.stream_time == 40


def test_a_discarded_commit_rolls_back_versions_and_stream_time(versioned: Versioned) -> None:
    store = versioned.store
    store.put("k", "v10", 10)
    versioned.commit()
    store.put("k", "v500", 500)
    versioned.logged.discard()
    assert versioned.logged.stream_time == 10
    assert store.get("k") == VersionedRecord("v10", 10)
    assert store.put("k", "v50", 50) == PUT_RETURN_CODE_VALID_TO_UNDEFINED


def test_a_reopened_rocksdb_store_keeps_its_versions_and_stream_time(tmp_path: Path) -> None:
    first = Versioned("rocksdb", tmp_path)
    first.store.put("k", "v10", 10)
    first.store.put("k", "v300", 300)
    first.commit()
    first.persistent.close()
    again = Versioned("rocksdb", tmp_path)
    assert again.logged.stream_time == 300
    assert again.store.get("k", 250) == VersionedRecord("v10", 10)
    assert again.store.put("k", "late", 150) == PUT_RETURN_CODE_NOT_PUT


def test_plain_writes_are_refused(versioned: Versioned) -> None:
    with pytest.raises(TypeError, match="versioned"):
        versioned.logged.put(b"k", b"v")
