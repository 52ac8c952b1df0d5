"""A session store behind the record cache (Kafka's CachingSessionStore): reads merge the cache over the store
below, a cached delete hides the store's session, a flush writes below and forwards each dirty session once with
the value the store below held as the old value (a session created and merged away between flushes not at all),
an eviction flushes while processing, and a discard drops the cached sessions."""

from __future__ import annotations

import gc
from pathlib import Path

from logged_store_fixtures import LoggedStore
from streamapp.serdes import serde_for
from streamapp.state.caching_session_store import CachingSessionStore
from streamapp.state.record_cache import ThreadCache
from streamapp.state.session_store import SessionStore
from streamapp.windowed import Windowed

GAP = 10


class CachedSessions:
    """A caching session store (string -> long) over a logged in-memory session store, recording what it
    forwards; ``click`` is a session count's read-merge-write (Kafka's KStreamSessionWindowAggregate)."""

    def __init__(self, cache: ThreadCache, retention_ms: int = 1_000) -> None:
        self.logged = LoggedStore("memory", Path("."))
        self.below = SessionStore(self.logged.logged, serde_for("string"), serde_for("long"), retention_ms=retention_ms)
        self.store = CachingSessionStore(self.below, cache, "0_0-sessions")
        self.forwarded: list[tuple[Windowed, int | None, int | None, int]] = []
        self.store.set_flush_listener(lambda key, new, old, ts: self.forwarded.append((key, new, old, ts)))

    def click(self, key: str, t: int) -> None:
        start = end = t
        count = 0
        merged = self.store.find_sessions(key, t - GAP, t + GAP)
        for session, value in merged:
            count += value
            start, end = min(start, session.start), max(end, session.end)
        if (start, end) != (t, t):
            for session, _ in merged:
                self.store.remove(session)
        self.store.put(Windowed(key, start, end), count + 1)

    def commit(self) -> None:
        self.store.flush()
        self.logged.commit()


def test_find_sessions_merges_the_cached_sessions_over_the_store_below_in_end_order() -> None:
    sessions = CachedSessions(ThreadCache(10 << 20))
    sessions.click("a", 100)
    sessions.click("a", 300)
    sessions.commit()
    sessions.click("a", 200)  # cached only
    sessions.click("a", 305)  # replaces the stored [300, 300] in the cache: [300, 305]
    sessions.click("b", 250)  # another key's session is not in "a"'s reads

    assert sessions.below.find_sessions("a", 0, 1_000) == [
        (Windowed("a", 100, 100), 1),
        (Windowed("a", 300, 300), 1),
    ]
    assert sessions.store.find_sessions("a", 0, 1_000) == [
        (Windowed("a", 100, 100), 1),
        (Windowed("a", 200, 200), 1),
        (Windowed("a", 300, 305), 2),
    ]
    assert sessions.store.find_sessions("a", 150, 250) == [(Windowed("a", 200, 200), 1)]
    assert sessions.store.fetch_session("a", 300, 305) == 2
    assert sessions.store.fetch_session("a", 300, 300) is None  # deleted in the cache, still stored below
    assert sessions.store.fetch_session("a", 100, 100) == 1  # from the store below


def test_a_hot_session_is_written_below_and_forwarded_once_per_flush_with_the_last_flushed_value_as_old() -> None:
    sessions = CachedSessions(ThreadCache(10 << 20))
    for t in range(0, 50, 5):  # ten clicks 5 ms apart: one session [0, 45], replaced nine times in the cache
        sessions.click("a", t)
    assert sessions.forwarded == []
    sessions.commit()
    sessions.click("a", 45)  # inside the flushed session: one update, old = the flushed count
    sessions.commit()

    assert sessions.forwarded == [
        (Windowed("a", 0, 45), 10, None, 45),  # the sessions created and merged away before it: not forwarded
        (Windowed("a", 0, 45), 11, 10, 45),
    ]
    changelog = [(key, value) for key, value, _ in sessions.logged.producer.sent]
    assert [value for _, value in changelog] == [(10).to_bytes(8, "big"), (11).to_bytes(8, "big")]


def test_a_flushed_session_merged_away_becomes_a_tombstone_forwarded_before_the_merged_session() -> None:
    sessions = CachedSessions(ThreadCache(10 << 20))
    sessions.click("a", 0)
    sessions.click("a", 18)
    sessions.commit()
    sessions.click("a", 9)  # bridges [0, 0] and [18, 18]
    sessions.commit()

    assert sessions.forwarded[2:] == [
        (Windowed("a", 0, 0), None, 1, 0),
        (Windowed("a", 18, 18), None, 1, 18),
        (Windowed("a", 0, 18), 3, None, 18),
    ]
    assert sessions.below.find_sessions("a", 0, 100) == [(Windowed("a", 0, 18), 3)]
    assert sessions.store.find_sessions("a", 0, 100) == [(Windowed("a", 0, 18), 3)]
    assert sessions.store._sessions.snapshot() == {b"a": {b"a" + (18).to_bytes(8, "big") + (0).to_bytes(8, "big")}}


def test_eviction_flushes_the_dirty_sessions_while_processing_and_discard_drops_the_rest() -> None:
    sessions = CachedSessions(ThreadCache(500))  # room for two sessions (225 bytes each)
    sessions.click("a", 0)
    sessions.click("b", 0)
    sessions.click("c", 0)  # over the bound: the least recently used session "a" leaves, flushing all three

    assert [(session.key, new) for session, new, _, _ in sessions.forwarded] == [("a", 1), ("b", 1), ("c", 1)]
    sessions.click("a", 5)  # read from the store below after its eviction: [0, 5] replaces [0, 0]
    sessions.store.discard()
    sessions.store.flush()
    assert len(sessions.forwarded) == 3
    assert sessions.store.find_sessions("a", 0, 100) == [(Windowed("a", 0, 0), 1)]  # the flushed session


def test_sessions_expire_by_the_largest_session_end_put_as_in_the_store_below() -> None:
    sessions = CachedSessions(ThreadCache(10 << 20), retention_ms=100)
    sessions.click("a", 0)
    sessions.commit()
    sessions.click("a", 500)  # stream time 500: sessions ending before 400 expire
    sessions.store.put(Windowed("a", 50, 60), 7)  # dropped

    assert sessions.store.find_sessions("a", 0, 1_000) == [(Windowed("a", 500, 500), 1)]
    assert sessions.store.fetch_session("a", 0, 0) is None


def test_cached_sessions_of_immutable_aggregates_cost_the_garbage_collector_nothing() -> None:
    sessions = CachedSessions(ThreadCache(10 << 20), retention_ms=10_000)
    for t in range(0, 100 * GAP * 2, GAP * 2):
        sessions.click("a", t)
    sessions.commit()
    sessions.click("b", 0)
    gc.collect()
    gc.collect()
    entries = list(sessions.store._cache._entries.values())
    assert len(entries) == 101
    assert not any(gc.is_tracked(entry) for entry in entries)


def test_a_flushed_session_is_logged_at_its_writers_timestamp_and_forwarded_at_its_end() -> None:
    """Kafka's CachingSessionStore sets the entry's record context back while it flushes: the changelog record
    carries the timestamp of the record that last wrote the session, not of the record being processed at the
    commit; the forwarded update is timestamped with the session's end (SessionCacheFlushListener)."""
    sessions = CachedSessions(ThreadCache(10 << 20))
    sessions.logged.now = 7
    sessions.click("a", 100)
    sessions.logged.now = 9
    sessions.click("a", 105)  # [100, 105], written by the record at 9
    sessions.logged.now = 26  # the record being processed when the commit flushes
    sessions.commit()

    assert [timestamp for _, _, timestamp in sessions.logged.producer.sent] == [9]
    assert sessions.forwarded == [(Windowed("a", 100, 105), 2, None, 105)]


def test_fetch_all_by_end_merges_cached_sessions_and_deletes_over_the_stores_by_end_then_key_then_start() -> None:
    """What an ``EmitStrategy.onWindowClose()`` session aggregation reads (Kafka's time-ordered session store's
    ``findSessions(earliestEnd, latestEnd)``): flushed sessions from below, dirty ones and cached deletes from the
    cache, by end, then key bytes, then start, in range."""
    sessions = CachedSessions(ThreadCache(10 << 20))
    sessions.click("b", 5)
    sessions.click("a", 100)
    sessions.click("c", 300)
    sessions.commit()
    sessions.click("a", 5)  # dirty, only in the cache
    sessions.click("a", 108)  # merges [100, 100] into [100, 108]: a cached delete and a dirty session

    assert sessions.store.fetch_all_by_end(0, 200) == [
        (Windowed("a", 5, 5), 1),
        (Windowed("b", 5, 5), 1),
        (Windowed("a", 100, 108), 2),
    ]
    assert sessions.below.fetch_all_by_end(0, 200) == [(Windowed("b", 5, 5), 1), (Windowed("a", 100, 100), 1)]
