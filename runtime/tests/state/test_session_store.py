"""SessionStore: Kafka's session key layout, find_sessions bounds and order, retention by session end."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from logged_store_fixtures import LoggedStore
from streamapp.serdes import serde_for
from streamapp.state.session_store import SessionStore
from streamapp.windowed import Windowed

STRING = serde_for("string")
LONG = serde_for("long")


@pytest.fixture(params=["memory", "rocksdb"])
def logged(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LoggedStore]:
    store = LoggedStore(request.param, tmp_path)
    yield store
    store.close()


def session_store(logged: LoggedStore, retention_ms: int = 1_000_000) -> SessionStore:
    return SessionStore(logged.logged, STRING, LONG, retention_ms=retention_ms)


def test_find_sessions_returns_sessions_ending_after_and_starting_before_the_bounds_by_end(
    logged: LoggedStore,
) -> None:
    store = session_store(logged)
    store.put(Windowed("a", 0, 10), 1)
    store.put(Windowed("a", 30, 40), 2)
    logged.commit()
    store.put(Windowed("a", 60, 60), 3)
    store.put(Windowed("b", 35, 35), 9)
    assert store.find_sessions("a", 35, 65) == [(Windowed("a", 30, 40), 2), (Windowed("a", 60, 60), 3)]
    assert store.find_sessions("a", 0, 30) == [(Windowed("a", 0, 10), 1), (Windowed("a", 30, 40), 2)]
    assert store.find_sessions("a", 41, 59) == []
    assert store.find_sessions("a", -100, 1000) == [
        (Windowed("a", 0, 10), 1),
        (Windowed("a", 30, 40), 2),
        (Windowed("a", 60, 60), 3),
    ]


def test_removing_a_session_hides_it_before_and_after_commit(logged: LoggedStore) -> None:
    store = session_store(logged)
    store.put(Windowed("a", 0, 10), 1)
    logged.commit()
    store.remove(Windowed("a", 0, 10))
    assert store.find_sessions("a", 0, 100) == []
    assert store.fetch_session("a", 0, 10) is None
    logged.commit()
    assert store.all() == []


def test_changelog_records_carry_kafkas_session_key_layout(logged: LoggedStore) -> None:
    store = session_store(logged)
    logged.now = 77
    store.put(Windowed("k", 5, 9), 3)
    logged.commit()
    assert logged.producer.sent == [(b"k" + struct.pack(">qq", 9, 5), struct.pack(">q", 3), 77)]


def test_sessions_ending_before_stream_time_minus_retention_are_invisible_and_deleted(
    logged: LoggedStore,
) -> None:
    store = session_store(logged, retention_ms=100)
    store.put(Windowed("a", 0, 10), 1)
    store.put(Windowed("a", 200, 200), 2)  # observed 200: sessions ending before 100 are expired
    assert store.find_sessions("a", 0, 1000) == [(Windowed("a", 200, 200), 2)]
    assert store.fetch_session("a", 0, 10) is None
    store.put(Windowed("a", 50, 99), 5)
    assert store.all() == [(Windowed("a", 200, 200), 2)]
    store.put(Windowed("a", 50, 100), 6)  # the boundary session is kept
    assert store.fetch_session("a", 50, 100) == 6
    logged.commit()
    # segment interval 60 s: once a committed stream time's horizon crosses 60 000, the next put deletes
    store.put(Windowed("a", 70_000, 70_000), 3)
    logged.commit()
    store.put(Windowed("b", 70_001, 70_001), 4)
    logged.commit()
    ends = [struct.unpack(">q", key[-16:-8])[0] for key, _ in logged.persistent.items()]
    assert ends == [70_000, 70_001]  # [0,10], [50,100] and [200,200] were deleted


def test_find_sessions_ignores_longer_keys_sharing_the_prefix(logged: LoggedStore) -> None:
    store = session_store(logged)
    store.put(Windowed("a", 5, 5), 1)
    store.put(Windowed("ab", 5, 5), 2)
    store.put(Windowed("a\x00\x00\x00\x00\x00\x00\x00", 5, 5), 3)
    assert store.find_sessions("a", 0, 10) == [(Windowed("a", 5, 5), 1)]
