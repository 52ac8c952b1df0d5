"""SuppressionBuffer: time-ordered eviction, prior values kept, and a buffer that survives a restart."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from logged_store_fixtures import LoggedStore
from streamapp.serdes import serde_for
from streamapp.state.suppression_buffer import LAYOUT_VERSION, BufferedUpdate, SuppressionBuffer
from streamapp.windowed import Windowed

KEYS = serde_for("windowed:string:10")
LONG = serde_for("long")


@pytest.fixture(params=["memory", "rocksdb"])
def logged(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LoggedStore]:
    store = LoggedStore(request.param, tmp_path)
    yield store
    store.close()


@pytest.fixture
def restored(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LoggedStore]:
    """A second store of the same backend, e.g. on the instance a task moved to."""
    store = LoggedStore(request.node.callspec.params["logged"], tmp_path / "restored")
    yield store
    store.close()


def test_evicts_oldest_buffer_time_first_and_only_up_to_the_expiry_time(logged: LoggedStore) -> None:
    buffer = SuppressionBuffer(logged.logged, KEYS, LONG)
    buffer.put(20, Windowed("b", 10, 20), 1, None, 12)
    buffer.put(10, Windowed("a", 0, 10), 1, None, 3)
    buffer.put(10, Windowed("a", 0, 10), 2, 1, 7)
    assert buffer.num_records == 2
    assert buffer.min_time() == 10
    assert buffer.evict_until(9) == []
    assert buffer.evict_until(15) == [BufferedUpdate(Windowed("a", 0, 10), 2, None, 7)]
    assert buffer.evict_until(100) == [BufferedUpdate(Windowed("b", 10, 20), 1, None, 12)]
    assert buffer.min_time() is None


def test_a_rebuffered_key_keeps_the_prior_value_of_its_first_buffered_update(logged: LoggedStore) -> None:
    buffer = SuppressionBuffer(logged.logged, KEYS, LONG)
    key = Windowed("a", 0, 10)
    buffer.put(10, key, 5, 4, 1)
    buffer.put(10, key, 6, 5, 2)
    assert buffer.evict_until(10) == [BufferedUpdate(key, 6, 4, 2)]


def test_a_new_buffer_over_the_committed_store_holds_the_same_updates(logged: LoggedStore) -> None:
    buffer = SuppressionBuffer(logged.logged, KEYS, LONG)
    buffer.put(10, Windowed("a", 0, 10), 1, None, 3)
    buffer.put(20, Windowed("b", 10, 20), None, 8, 15)
    buffer.put(30, Windowed("c", 20, 30), 3, None, 25)
    buffer.evict_until(10)
    logged.commit()
    reopened = SuppressionBuffer(logged.logged, KEYS, LONG)
    assert reopened.num_records == 2
    assert reopened.evict_until(30) == [
        BufferedUpdate(Windowed("b", 10, 20), None, 8, 15),
        BufferedUpdate(Windowed("c", 20, 30), 3, None, 25),
    ]


def test_evictions_are_logged_as_tombstones(logged: LoggedStore) -> None:
    buffer = SuppressionBuffer(logged.logged, KEYS, LONG)
    buffer.put(10, Windowed("a", 0, 10), 1, None, 3)
    logged.commit()
    buffer.evict_until(10)
    logged.commit()
    assert [value is None for _, value, _ in logged.producer.sent] == [False, True]
    assert list(logged.persistent.items()) == []


def test_a_buffer_restored_from_its_changelog_evicts_updates_with_their_records_headers(
    logged: LoggedStore, restored: LoggedStore
) -> None:
    buffer = SuppressionBuffer(logged.logged, KEYS, LONG)
    buffer.put(10, Windowed("a", 0, 10), 1, None, 3, [("trace", b"t-1"), ("trace", b"t-2"), ("empty", b"")])
    buffer.put(20, Windowed("b", 10, 20), 2, None, 15, None)
    buffer.put(30, Windowed("c", 20, 30), 3, None, 25, [])
    logged.commit()
    restored.logged.restore({key: (value, ts) for key, value, ts in logged.producer.sent}, last_offset=2)

    assert SuppressionBuffer(restored.logged, KEYS, LONG).evict_until(30) == [
        BufferedUpdate(Windowed("a", 0, 10), 1, None, 3, [("trace", b"t-1"), ("trace", b"t-2"), ("empty", b"")]),
        BufferedUpdate(Windowed("b", 10, 20), 2, None, 15, None),
        BufferedUpdate(Windowed("c", 20, 30), 3, None, 25, []),
    ]


def test_a_rebuffered_key_is_stored_with_the_headers_of_its_latest_record(logged: LoggedStore) -> None:
    buffer = SuppressionBuffer(logged.logged, KEYS, LONG)
    key = Windowed("a", 0, 10)
    buffer.put(10, key, 1, None, 1, [("seq", b"1")])
    buffer.put(10, key, 2, 1, 2, [("seq", b"2")])
    logged.commit()

    assert SuppressionBuffer(logged.logged, KEYS, LONG).evict_until(10) == [
        BufferedUpdate(key, 2, None, 2, [("seq", b"2")])
    ]


def test_a_header_with_a_null_value_is_restored_with_a_null_value(logged: LoggedStore) -> None:
    headers: Any = [("gone", None), ("kept", b"v")]  # confluent-kafka delivers a null header value as None
    SuppressionBuffer(logged.logged, KEYS, LONG).put(10, Windowed("a", 0, 10), 1, None, 3, headers)
    logged.commit()

    [update] = SuppressionBuffer(logged.logged, KEYS, LONG).evict_until(10)
    assert update.headers == [("gone", None), ("kept", b"v")]


# Layout 1, as the release before headers were stored wrote it: record timestamp, buffer time, new, prior.
KEY_A = bytes.fromhex("610000000000000000")  # Windowed("a", 0, 10)
LAYOUT_1 = {
    KEY_A: bytes.fromhex("0000000000000007000000000000000a000000080000000000000002ffffffff"),
    bytes.fromhex("62000000000000000a"): bytes.fromhex(
        "000000000000000f0000000000000014ffffffff000000080000000000000008"
    ),
}


def test_a_changelog_written_in_layout_1_restores_its_updates_without_headers_next_to_layout_2_ones(
    logged: LoggedStore,
) -> None:
    logged.logged.restore({key: (value, 0) for key, value in LAYOUT_1.items()}, last_offset=1)
    buffer = SuppressionBuffer(logged.logged, KEYS, LONG)
    buffer.put(30, Windowed("c", 20, 30), 3, None, 25, [("trace", b"t")])
    logged.commit()

    assert SuppressionBuffer(logged.logged, KEYS, LONG).evict_until(30) == [
        BufferedUpdate(Windowed("a", 0, 10), 2, None, 7, None),
        BufferedUpdate(Windowed("b", 10, 20), None, 8, 15, None),
        BufferedUpdate(Windowed("c", 20, 30), 3, None, 25, [("trace", b"t")]),
    ]


def test_a_layout_2_value_keeps_layout_1_in_front_so_the_previous_release_reads_its_values(
    logged: LoggedStore,
) -> None:
    buffer = SuppressionBuffer(logged.logged, KEYS, LONG)
    buffer.put(10, Windowed("a", 0, 10), 2, None, 7, [("trace", b"t")])
    logged.commit()
    key, value, _ = logged.producer.sent[0]
    assert key is not None and value is not None

    assert value.startswith(LAYOUT_1[key])
    assert value[len(LAYOUT_1[key])] == LAYOUT_VERSION


@pytest.mark.parametrize(
    ("stored", "problem"),
    [
        (LAYOUT_1[KEY_A][:6], "truncated: 6 bytes"),
        (LAYOUT_1[KEY_A][:20], "truncated: 20 bytes, a length of 8 past the end"),
        (LAYOUT_1[KEY_A] + b"\x09", "unknown layout version 9"),
        (LAYOUT_1[KEY_A] + b"\x02\x00\x00\x00\x01\x00\x00\x00\x05ab", "a length of 5 past the end"),
        (LAYOUT_1[KEY_A] + b"\x02\x00\x00\x00\x01\xff\xff\xff\xff", "a header without a name"),
        (LAYOUT_1[KEY_A] + b"\x02\xff\xff\xff\xff\x00", "1 trailing bytes"),
    ],
    ids=[
        "in-the-timestamps",
        "in-a-value",
        "unknown-version",
        "in-a-header-name",
        "null-header-name",
        "trailing-bytes",
    ],
)
def test_a_malformed_stored_value_is_refused_naming_the_buffer_and_key_and_kept(
    logged: LoggedStore, stored: bytes, problem: str
) -> None:
    logged.logged.restore({KEY_A: (stored, 0)}, last_offset=0)

    with pytest.raises(ValueError, match=f"suppression buffer 'store': stored value of key 610+ .*{problem}"):
        SuppressionBuffer(logged.logged, KEYS, LONG).min_time()
    assert logged.persistent.get(KEY_A) == stored
