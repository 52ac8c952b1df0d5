"""Timestamped key-value stores (KIP-258): values kept with their timestamps, Kafka's changelog format, and the
upgrade of stores and changelogs written before stores kept timestamps."""

from __future__ import annotations

from pathlib import Path

import pytest
from logged_store_fixtures import CHANGELOG, LoggedStore
from streamapp.serdes import serde_for
from streamapp.state import timestamped
from streamapp.state.memory import InMemoryKeyValueStore
from streamapp.state.rocksdb import RocksDBMemory, RocksDBStore
from streamapp.state.stores import PersistentKeyValueStore, TypedKeyValueStore

BACKENDS = ["memory", "rocksdb"]


def typed(store: object) -> TypedKeyValueStore:
    return TypedKeyValueStore(store, serde_for("string", is_key=True), serde_for("long"))  # type: ignore[arg-type]


def reopen(old: LoggedStore, backend: str, tmp_path: Path) -> PersistentKeyValueStore:
    """The persistent store of ``old`` as the next release opens it (the same object in memory, the same
    folder for RocksDB)."""
    if backend == "memory":
        return old.persistent
    old.close()
    return rocksdb_store(tmp_path)


def rocksdb_store(tmp_path: Path) -> RocksDBStore:
    return RocksDBStore("store", tmp_path / "store", RocksDBMemory(16 << 20, 4 << 20))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_store_written_with_plain_values_is_upgraded_with_no_timestamp_and_keeps_its_offset(
    backend: str, tmp_path: Path
) -> None:
    old = LoggedStore(backend, tmp_path)  # the previous release: a plain changelogging store
    counts = typed(old.logged)
    counts.put("red", 3)
    counts.put("blue", 1)
    old.commit()
    offset = old.persistent.changelog_offset()

    persistent = reopen(old, backend, tmp_path)
    upgraded = timestamped.logged_store(True, persistent, CHANGELOG, lambda: 9_000)

    assert persistent.get_metadata(timestamped.FORMAT_MARKER_KEY) == timestamped.TIMESTAMPED_FORMAT
    assert upgraded.changelog_offset() == offset
    assert typed(upgraded).get_with_timestamp("red") == (3, timestamped.NO_TIMESTAMP)
    assert typed(upgraded).get("blue") == 1
    upgraded.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_reopening_an_upgraded_store_converts_nothing_again(backend: str, tmp_path: Path) -> None:
    old = LoggedStore(backend, tmp_path)
    typed(old.logged).put("red", 3)
    old.commit()
    first = timestamped.logged_store(True, reopen(old, backend, tmp_path), CHANGELOG, lambda: 0)
    typed(first).put("red", 4, 7_000)
    first.send_changelog(old.producer)
    old.producer.acknowledge()
    first.apply()
    persistent: PersistentKeyValueStore = old.persistent
    if backend == "rocksdb":
        first.close()
        persistent = rocksdb_store(tmp_path)

    assert timestamped.upgrade_to_timestamped(persistent) == 0
    again = timestamped.logged_store(True, persistent, CHANGELOG, lambda: 0)

    assert typed(again).get_with_timestamp("red") == (4, 7_000)
    again.close()


def test_the_changelog_carries_the_plain_value_with_the_entry_timestamp_as_record_timestamp() -> None:
    store = LoggedStore("memory", Path("."))
    store.logged = timestamped.TimestampedChangeLoggingKeyValueStore(store.persistent, CHANGELOG, lambda: 1_234)
    view = typed(store.logged)
    view.put("red", 3, 5_000)
    view.put("blue", 2, 6_000)
    view.put("blue", None)  # a tombstone is logged at the time of the record being processed

    store.commit()

    long_3 = (3).to_bytes(8, "big")
    assert store.producer.sent == [(b"red", long_3, 5_000), (b"blue", None, 1_234)]
    assert view.get_with_timestamp("red") == (3, 5_000)


def test_a_changelog_written_with_plain_values_restores_with_its_record_timestamps() -> None:
    store = timestamped.TimestampedChangeLoggingKeyValueStore(InMemoryKeyValueStore("s"), CHANGELOG, lambda: 0)
    long_3, long_4 = (3).to_bytes(8, "big"), (4).to_bytes(8, "big")

    store.restore({b"red": (long_3, 2_000), b"blue": (long_4, 1_000), b"gone": (None, 3_000)}, last_offset=41)

    assert typed(store).get_with_timestamp("red") == (3, 2_000)
    assert typed(store).get_with_timestamp("blue") == (4, 1_000)
    assert typed(store).get("gone") is None
    assert store.changelog_offset() == 41


def test_a_plain_store_reports_no_timestamp_and_keeps_values_unprefixed() -> None:
    store = LoggedStore("memory", Path("."))
    view = typed(store.logged)

    view.put("red", 3, 5_000)
    store.commit()

    assert view.get_with_timestamp("red") == (3, timestamped.NO_TIMESTAMP)
    assert store.persistent.get(b"red") == (3).to_bytes(8, "big")


def test_a_value_shorter_than_a_timestamp_is_refused_as_not_timestamped() -> None:
    with pytest.raises(ValueError, match="at least 8 bytes"):
        timestamped.decode(b"\x01\x02")


def test_a_typed_read_of_a_value_shorter_than_a_timestamp_is_refused_as_not_timestamped() -> None:
    persistent = InMemoryKeyValueStore("store")
    persistent.write({b"red": b"\x01\x02"}, 0, metadata={timestamped.FORMAT_MARKER_KEY: timestamped.TIMESTAMPED_FORMAT})
    view = typed(timestamped.logged_store(True, persistent, CHANGELOG, lambda: 0))

    with pytest.raises(ValueError, match="at least 8 bytes, got 2"):
        view.get("red")
