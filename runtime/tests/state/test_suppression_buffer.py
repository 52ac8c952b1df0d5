"""SuppressionBuffer: time-ordered eviction, prior values kept, and a buffer that survives a restart."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from logged_store_fixtures import LoggedStore
from streamapp.serdes import serde_for
from streamapp.state.suppression_buffer import BufferedUpdate, SuppressionBuffer
from streamapp.windowed import Windowed

KEYS = serde_for("windowed:string:10")
LONG = serde_for("long")


@pytest.fixture(params=["memory", "rocksdb"])
def logged(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LoggedStore]:
    store = LoggedStore(request.param, tmp_path)
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
