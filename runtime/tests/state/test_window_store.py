"""WindowStore: Kafka's window key layout, reads that see uncommitted writes, retention and expiry."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from logged_store_fixtures import LoggedStore
from streamapp.serdes import serde_for
from streamapp.state.window_store import WindowStore, WindowValue, segment_interval_ms
from streamapp.windowed import Windowed

STRING = serde_for("string")
LONG = serde_for("long")


@pytest.fixture(params=["memory", "rocksdb"])
def logged(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LoggedStore]:
    store = LoggedStore(request.param, tmp_path)
    yield store
    store.close()


def window_store(logged: LoggedStore, retention_ms: int = 100_000, retain_duplicates: bool = False) -> WindowStore:
    return WindowStore(
        logged.logged, STRING, LONG, retention_ms=retention_ms, window_size_ms=10, retain_duplicates=retain_duplicates
    )


def test_point_and_range_reads_see_uncommitted_writes_and_committed_ones(logged: LoggedStore) -> None:
    store = window_store(logged)
    store.put("a", 1, 0, 5)
    store.put("a", 2, 10, 12)
    assert store.fetch("a", 0) == WindowValue(1, 5)
    assert store.fetch_range("a", 0, 10) == [(0, WindowValue(1, 5)), (10, WindowValue(2, 12))]
    logged.commit()
    store.put("a", 3, 20, 21)
    store.put("a", 7, 0, 8)  # overwrite a committed window in the buffer
    assert store.fetch_range("a", 0, 100) == [
        (0, WindowValue(7, 8)),
        (10, WindowValue(2, 12)),
        (20, WindowValue(3, 21)),
    ]
    logged.commit()
    assert store.fetch_range("a", 5, 20) == [(10, WindowValue(2, 12)), (20, WindowValue(3, 21))]


def test_range_fetch_returns_only_that_keys_windows_even_when_another_key_extends_it(logged: LoggedStore) -> None:
    store = window_store(logged)
    store.put("a", 1, 10, 10)
    store.put("a\x00", 2, 10, 10)
    store.put("ab", 3, 10, 10)
    store.put("b", 4, 10, 10)
    logged.commit()
    store.put("a\x00\x00", 5, 10, 10)
    assert store.fetch_range("a", 0, 100) == [(10, WindowValue(1, 10))]
    assert store.fetch_range("a\x00", 0, 100) == [(10, WindowValue(2, 10))]


def test_a_null_value_deletes_the_window_before_and_after_commit(logged: LoggedStore) -> None:
    store = window_store(logged)
    store.put("a", 1, 0, 1)
    store.put("a", 2, 10, 11)
    logged.commit()
    store.put("a", None, 0, 3)
    assert store.fetch("a", 0) is None
    assert store.fetch_range("a", 0, 100) == [(10, WindowValue(2, 11))]
    logged.commit()
    assert store.fetch("a", 0) is None
    assert [w for w, _ in store.all()] == [Windowed("a", 10, 20)]


def test_changelog_records_carry_kafkas_window_key_and_timestamped_value_layout_at_the_values_timestamp(
    logged: LoggedStore,
) -> None:
    """Kafka's ``ChangeLoggingTimestampedWindowBytesStore`` logs a window at its value's timestamp, not at the
    record being processed's (an out-of-order record updating a window keeps the window's later timestamp); a
    delete is logged at the record's."""
    store = window_store(logged)
    logged.now = 1234
    store.put("k", 7, 60_000, 61_000)
    store.put("d", 1, 0, 500)
    logged.commit()
    store.put("d", None, 0, 900)
    logged.commit()
    assert logged.producer.sent == [
        (b"k" + struct.pack(">qi", 60_000, 0), struct.pack(">q", 61_000) + struct.pack(">q", 7), 61_000),
        (b"d" + struct.pack(">qi", 0, 0), struct.pack(">q", 500) + struct.pack(">q", 1), 500),
        (b"d" + struct.pack(">qi", 0, 0), None, 1234),
    ]


def test_windows_before_stream_time_minus_retention_are_invisible_and_puts_to_them_dropped(
    logged: LoggedStore,
) -> None:
    store = window_store(logged, retention_ms=100)
    store.put("a", 1, 0, 0)
    store.put("a", 2, 49, 49)
    store.put("a", 3, 150, 150)  # observed stream time 150: windows with start < 50 are expired
    assert store.fetch("a", 0) is None
    assert store.fetch("a", 49) is None
    assert store.fetch_range("a", 0, 1000) == [(150, WindowValue(3, 150))]
    store.put("a", 9, 40, 40)
    assert store.fetch("a", 40) is None
    store.put("a", 4, 50, 50)  # the boundary window is kept (see the module docstring)
    assert store.fetch("a", 50) == WindowValue(4, 50)


def test_expired_windows_are_deleted_from_the_persistent_store_when_the_horizon_crosses_a_segment(
    logged: LoggedStore,
) -> None:
    retention = 120_000
    interval = segment_interval_ms(retention)
    assert interval == 60_000
    store = window_store(logged, retention_ms=retention)
    for start in range(0, 200_000, 10_000):
        store.put("a", start, start, start)
        logged.commit()
    persisted = [struct.unpack(">q", key[-12:-4])[0] for key, _ in logged.persistent.items()]
    # the horizon (observed - retention) crossed 60 000 when start 180 000 was put: starts < 60 000 were deleted;
    # 60 000 is expired (invisible) but waits for the next crossing, like a Kafka segment
    assert persisted == list(range(60_000, 200_000, 10_000))
    assert [w.start for w, _ in store.all()] == list(range(70_000, 200_000, 10_000))


def test_expiry_deletes_only_as_of_committed_stream_time_so_a_replay_after_a_crash_finds_its_windows(
    logged: LoggedStore,
) -> None:
    store = window_store(logged, retention_ms=120_000)
    store.put("a", 1, 0, 0)
    logged.commit()
    store.put("a", 2, 500_000, 500_000)  # uncommitted: stream time jumps far past window 0's retention
    store.put("b", 3, 500_000, 500_000)
    # still on disk: a crash now replays from the commit and finds window 0 intact
    assert logged.persistent.get(b"a" + struct.pack(">qi", 0, 0)) is not None
    logged.commit()
    store.put("c", 4, 500_000, 500_000)  # the first write after the commit deletes as of committed time
    assert logged.persistent.get(b"a" + struct.pack(">qi", 0, 0)) is None


def test_retain_duplicates_keeps_every_put_of_the_same_key_and_time_in_put_order(logged: LoggedStore) -> None:
    store = window_store(logged, retain_duplicates=True)
    store.put("a", 1, 5, 5)
    store.put("a", 2, 5, 5)
    logged.commit()
    store.put("a", 3, 5, 5)
    store.put("a", None, 5, 5)  # ignored with duplicates
    assert [v.value for _, v in store.fetch_range("a", 0, 10)] == [1, 2, 3]
    with pytest.raises(ValueError, match="retains duplicates"):
        store.fetch("a", 5)


def test_restored_changelog_records_are_readable_through_a_new_view(logged: LoggedStore, tmp_path: Path) -> None:
    source = window_store(logged)
    source.put("a", 1, 0, 3)
    source.put("b", 2, 10, 14)
    logged.commit()
    target = LoggedStore("memory", tmp_path, name="restored")
    target.logged.restore({key: (value, ts) for key, value, ts in logged.producer.sent if key is not None}, 1)
    restored = window_store(target)
    assert restored.all() == [
        (Windowed("a", 0, 10), WindowValue(1, 3)),
        (Windowed("b", 10, 20), WindowValue(2, 14)),
    ]


def test_null_keys_are_rejected(logged: LoggedStore) -> None:
    with pytest.raises(ValueError, match="keys must not be null"):
        window_store(logged).put(None, 1, 0, 0)
