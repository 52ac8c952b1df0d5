"""SegmentedBytesStore: window and session entries in time segments under the changelogging store, expired
segments dropped whole as of committed stream time, changelog layout unchanged, old stores migrated."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from logged_store_fixtures import CHANGELOG, LoggedStore
from streamapp.serdes import serde_for
from streamapp.state.changelogging import ChangeLoggingKeyValueStore
from streamapp.state.memory import InMemoryKeyValueStore
from streamapp.state.rocksdb import RocksDBMemory, RocksDBStore
from streamapp.state.segments import (
    SEGMENTS_KEY,
    SESSION_TIME_OFFSET,
    WINDOW_TIME_OFFSET,
    SegmentedBytesStore,
    segmented_store,
    window_start_of,
)
from streamapp.state.session_store import SessionStore
from streamapp.state.window_store import WindowStore, WindowValue
from streamapp.topology.stores import StoreSpec
from streamapp.windowed import Windowed

STRING = serde_for("string")
LONG = serde_for("long")
RETENTION = 120_000  # segment interval max(60 000, 60 000) = 60 000 ms
INTERVAL = 60_000


def segmented(retention_ms: int = RETENTION, time_offset: int = WINDOW_TIME_OFFSET) -> Any:
    def wrap(persistent: Any) -> SegmentedBytesStore:
        return SegmentedBytesStore(
            persistent, retention_ms=retention_ms, segment_interval=INTERVAL, time_offset=time_offset
        )

    return wrap


@pytest.fixture(params=["memory", "rocksdb"])
def logged(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LoggedStore]:
    store = LoggedStore(request.param, tmp_path, wrap=segmented())
    yield store
    store.close()


def window_store(logged: LoggedStore, retention_ms: int = RETENTION) -> WindowStore:
    return WindowStore(logged.logged, STRING, LONG, retention_ms=retention_ms, window_size_ms=10)


def persisted_starts(logged: LoggedStore) -> list[tuple[int, int]]:
    """``(segment id, window start)`` of every entry in the backend under the segmented store."""
    return [
        (struct.unpack(">q", key[:8])[0], window_start_of(key))
        for key, _ in logged.persistent.items()
        if key != SEGMENTS_KEY
    ]


def test_reads_across_segments_see_uncommitted_and_committed_windows_in_start_order(logged: LoggedStore) -> None:
    store = window_store(logged)
    store.put("a", 1, 0, 5)
    store.put("a", 2, 70_000, 70_001)
    logged.commit()
    store.put("a", 3, 130_000, 130_002)
    store.put("a\x00", 9, 70_000, 70_000)  # a longer key sharing the prefix, in the middle segment
    store.put("a", 7, 70_000, 70_008)  # overwrite a committed window in the buffer
    assert store.fetch("a", 70_000) == WindowValue(7, 70_008)
    assert store.fetch_range("a", 0, 200_000) == [
        (70_000, WindowValue(7, 70_008)),  # window 0 expired: start < 130 000 - 120 000
        (130_000, WindowValue(3, 130_002)),
    ]
    logged.commit()
    assert store.fetch_range("a", 60_000, 130_000) == [
        (70_000, WindowValue(7, 70_008)),
        (130_000, WindowValue(3, 130_002)),
    ]
    assert {w for w, _ in store.all()} == {
        Windowed("a", 70_000, 70_010),
        Windowed("a", 130_000, 130_010),
        Windowed("a\x00", 70_000, 70_010),
    }


def test_changelog_keeps_kafkas_key_layout_while_the_backend_prefixes_the_segment(logged: LoggedStore) -> None:
    store = window_store(logged)
    store.put("k", 7, 90_000, 91_000)
    logged.commit()
    assert [key for key, _, _ in logged.producer.sent] == [b"k" + struct.pack(">qi", 90_000, 0)]
    assert persisted_starts(logged) == [(1, 90_000)]


class CountingRanges:
    """An in-memory backend that records the key ranges read from it."""

    def __init__(self) -> None:
        self.backend = InMemoryKeyValueStore("store")
        self.name = "store"
        self.ranges: list[tuple[bytes, bytes | None]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.backend, name)

    def range(self, lower: bytes, upper: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        self.ranges.append((lower, upper))
        return self.backend.range(lower, upper)


def test_an_expired_segment_is_dropped_whole_reading_only_the_dead_segments_keys(tmp_path: Path) -> None:
    counting = CountingRanges()
    logged = LoggedStore("memory", tmp_path, wrap=lambda _: segmented()(counting))
    store = window_store(logged)
    for start in range(0, 250_000, 10_000):
        store.put("a", start, start, start)
        store.put("b", start, start, start)
        logged.commit()
    # stream time 240 000: horizon 120 000, segments 0 and 1 (starts < 120 000) dropped, 2..4 kept
    assert sorted({segment for segment, _ in persisted_starts_of(counting.backend)}) == [2, 3, 4]
    drops = [(lower, upper) for lower, upper in counting.ranges if upper is not None and len(upper) == 8]
    assert drops == [
        (struct.pack(">q", 0), struct.pack(">q", 1)),  # stream time 180 000 killed segment 0
        (struct.pack(">q", 1), struct.pack(">q", 2)),  # stream time 240 000 killed segment 1
    ]
    assert [w.start for w, _ in store.all() if w.key == "a"] == list(range(120_000, 250_000, 10_000))


def persisted_starts_of(backend: InMemoryKeyValueStore) -> list[tuple[int, int]]:
    return [
        (struct.unpack(">q", key[:8])[0], window_start_of(key)) for key, _ in backend.items() if key != SEGMENTS_KEY
    ]


def test_segments_are_dropped_only_as_of_committed_stream_time_so_a_replay_after_a_crash_finds_its_windows(
    logged: LoggedStore,
) -> None:
    store = window_store(logged)
    store.put("a", 1, 0, 0)
    logged.commit()
    store.put("a", 2, 500_000, 500_000)  # uncommitted: stream time jumps far past segment 0's retention
    assert logged.persistent.get(struct.pack(">q", 0) + b"a" + struct.pack(">qi", 0, 0)) is not None
    logged.commit()
    assert persisted_starts(logged) == [(8, 500_000)]


def test_writes_to_a_dead_segment_are_dropped_like_kafkas(logged: LoggedStore) -> None:
    key = b"a" + struct.pack(">qi", 300_000, 0)
    old = b"a" + struct.pack(">qi", 10_000, 0)
    logged.store.write({key: b"v1"}, 5)
    logged.store.write({old: b"late"}, 6)  # segment 0 < min live segment (300 000 - 120 000) // 60 000 = 3
    assert logged.store.get(old) is None
    assert persisted_starts(logged) == [(5, 300_000)]
    assert logged.store.changelog_offset() == 6


def test_a_store_restored_from_the_changelog_equals_the_one_that_wrote_it(logged: LoggedStore, tmp_path: Path) -> None:
    source = window_store(logged)
    for start in range(0, 400_000, 30_000):
        source.put("a", start, start, start + 1)
        source.put("b", start + 1, start, start + 2)
        logged.commit()
    source.put("a", None, 390_000, 390_000)
    logged.commit()
    changelog: dict[bytes, bytes | None] = {}
    for key, value, _ in logged.producer.sent:
        assert key is not None
        changelog[key] = value  # a compacted changelog: the last record per key
    target = LoggedStore("rocksdb", tmp_path / "restored", name="restored", wrap=segmented())
    for offset, (key, value) in enumerate(changelog.items()):
        target.store.write({key: value}, offset)  # ChangeLoggingKeyValueStore.restore's write, record by record
    assert window_store(target).all() == source.all()
    assert persisted_starts(target) == persisted_starts(logged)
    target.close()


def test_a_reopened_store_keeps_its_stream_time_so_expired_windows_stay_invisible(tmp_path: Path) -> None:
    first = LoggedStore("rocksdb", tmp_path, wrap=segmented())
    store = window_store(first)
    store.put("a", 1, 0, 0)
    store.put("a", 2, 70_000, 70_000)
    store.put("a", 3, 200_000, 200_000)
    first.commit()
    first.close()
    second = LoggedStore("rocksdb", tmp_path, wrap=segmented())
    assert second.store.observed_stream_time == 200_000
    reopened = window_store(second)
    # horizon 80 000: window 70 000 is expired though its segment (1) is live; segment 0 is gone
    assert reopened.fetch("a", 70_000) is None
    assert [w.start for w, _ in reopened.all()] == [200_000]
    reopened.put("a", 9, 10_000, 10_000)  # a put to an expired window is dropped, not buffered
    assert reopened.fetch_range("a", 0, 300_000) == [(200_000, WindowValue(3, 200_000))]
    second.close()


def write_unsegmented_store(tmp_path: Path, name: str, puts: list[tuple[str, int, int]]) -> list[Any]:
    """A window store as the release before segments wrote it: the changelog layout straight in RocksDB."""
    old = LoggedStore("rocksdb", tmp_path, name=name)
    store = window_store(old)
    for key, value, start in puts:
        store.put(key, value, start, start + 1)
    old.commit()
    windows = store.all()
    old.close()
    return windows


def test_a_store_written_before_segments_is_migrated_on_open_with_its_changelog_offset(tmp_path: Path) -> None:
    windows = write_unsegmented_store(tmp_path, "old", [("a", 1, 0), ("a", 2, 70_000), ("b", 3, 130_000)])
    assert [w.start for w, _ in windows] == [70_000, 130_000]  # window 0 expired: still on disk, invisible
    backend = RocksDBStore("old", tmp_path / "old", RocksDBMemory(16 << 20, 4 << 20))
    offset = backend.changelog_offset()
    assert offset is not None
    migrated = SegmentedBytesStore(
        backend, retention_ms=RETENTION, segment_interval=INTERVAL, time_offset=WINDOW_TIME_OFFSET
    )
    assert migrated.migrated_entries == 3
    assert migrated.changelog_offset() == offset
    assert migrated.observed_stream_time == 130_000
    # every entry under its segment; window 0 is expired but its segment 0 still live (horizon 10 000)
    assert [(struct.unpack(">q", k[:8])[0], window_start_of(k)) for k, _ in backend.items() if k != SEGMENTS_KEY] == [
        (0, 0),
        (1, 70_000),
        (2, 130_000),
    ]
    view = WindowStore(
        ChangeLoggingKeyValueStore(migrated, CHANGELOG, lambda: 0),
        STRING,
        LONG,
        retention_ms=RETENTION,
        window_size_ms=10,
    )
    assert view.all() == windows
    migrated.close()
    again = SegmentedBytesStore(
        RocksDBStore("old", tmp_path / "old", RocksDBMemory(16 << 20, 4 << 20)),
        retention_ms=RETENTION,
        segment_interval=INTERVAL,
        time_offset=WINDOW_TIME_OFFSET,
    )
    assert again.migrated_entries == 0  # migrated once
    again.close()


def test_sessions_are_segmented_by_end_and_found_across_segments(tmp_path: Path) -> None:
    logged = LoggedStore("rocksdb", tmp_path, wrap=segmented(time_offset=SESSION_TIME_OFFSET))
    store = SessionStore(logged.logged, STRING, LONG, retention_ms=RETENTION)
    store.put(Windowed("a", 50_000, 65_000), 1)
    store.put(Windowed("a", 100_000, 130_000), 2)
    logged.commit()
    store.put(Windowed("a", 170_000, 190_000), 3)
    assert store.find_sessions("a", 0, 2**62) == [
        (Windowed("a", 100_000, 130_000), 2),  # session ending 65 000 expired: 190 000 - 120 000 = 70 000
        (Windowed("a", 170_000, 190_000), 3),
    ]
    logged.commit()
    store.put(Windowed("a", 240_000, 250_000), 4)
    logged.commit()  # stream time 250 000: segment 1 (ends 60 000 - 119 999) dead
    assert [struct.unpack(">q", k[:8])[0] for k, _ in logged.persistent.items() if k != SEGMENTS_KEY] == [2, 3, 4]
    assert [s for s, _ in store.find_sessions("a", 0, 2**62)] == [
        Windowed("a", 100_000, 130_000),  # ends at the horizon 250 000 - 120 000: kept
        Windowed("a", 170_000, 190_000),
        Windowed("a", 240_000, 250_000),
    ]
    logged.close()


@pytest.mark.parametrize(
    ("spec", "segmented_type"),
    [
        (StoreSpec(name="w", type="window", retention_ms=7_200_000, window_size_ms=3_600_000), True),
        (StoreSpec(name="s", type="session", retention_ms=86_400_000), True),
        (StoreSpec(name="kv", type="key_value"), False),
    ],
)
def test_window_and_session_stores_open_segmented_with_kafkas_segment_interval(
    spec: StoreSpec, segmented_type: bool
) -> None:
    store = segmented_store(spec, InMemoryKeyValueStore(spec.name))
    assert isinstance(store, SegmentedBytesStore) is segmented_type
    if isinstance(store, SegmentedBytesStore):
        assert store.segment_interval == max(spec.retention_ms // 2, 60_000)  # type: ignore[operator]


def test_a_reopened_session_store_keeps_its_stream_time_so_expired_sessions_stay_invisible(tmp_path: Path) -> None:
    first = LoggedStore("rocksdb", tmp_path, wrap=segmented(time_offset=SESSION_TIME_OFFSET))
    store = SessionStore(first.logged, STRING, LONG, retention_ms=RETENTION)
    store.put(Windowed("a", 60_000, 70_000), 1)
    store.put(Windowed("a", 200_000, 200_000), 2)
    first.commit()
    first.close()
    second = LoggedStore("rocksdb", tmp_path, wrap=segmented(time_offset=SESSION_TIME_OFFSET))
    reopened = SessionStore(second.logged, STRING, LONG, retention_ms=RETENTION)
    # horizon 80 000: the session ending 70 000 is expired though its segment (1) is live
    assert reopened.find_sessions("a", 0, 2**62) == [(Windowed("a", 200_000, 200_000), 2)]
    assert reopened.fetch_session("a", 60_000, 70_000) is None
    second.close()
