"""WindowedStateAccess: one cached view per store, typed by the store spec, the record cache's views, and the
suppress close grace."""

from __future__ import annotations

import pytest
from streamapp import SessionWindows, StreamsBuilder, Suppressed, TimeWindows
from streamapp.kafka.types import TopicPartition
from streamapp.state.caching_window_store import CachingSlidingWindowStore, CachingWindowStore
from streamapp.state.changelogging import ChangeLoggingKeyValueStore
from streamapp.state.memory import InMemoryKeyValueStore
from streamapp.state.record_cache import ThreadCache
from streamapp.state.windowed_access import WindowedStateAccess


def access() -> WindowedStateAccess:
    builder = StreamsBuilder()
    grouped = builder.stream("in", key_serde="string", value_serde="json", name="in").group_by_key()
    counts = grouped.windowed_by(TimeWindows.of_size_and_grace(10, 3)).count(name="counts")
    counts.suppress(Suppressed.until_window_closes().with_name("final"))
    sessions = grouped.windowed_by(SessionWindows.of_inactivity_gap_and_grace(5, 2)).count(name="sessions")
    sessions.suppress(Suppressed.until_window_closes().with_name("final-sessions"))
    description = builder.build()
    stores = {
        spec.name: ChangeLoggingKeyValueStore(InMemoryKeyValueStore(spec.name), TopicPartition(spec.name, 0), int)
        for spec in description.stores
    }
    return WindowedStateAccess(description, stores)


def test_each_store_gets_one_cached_view_configured_from_its_spec() -> None:
    state = access()
    view = state.window_store("counts-store")
    assert state.window_store("counts-store") is view
    assert (view.retention_ms, view.window_size_ms) == (13, 10)
    assert state.session_store("sessions-store").retention_ms == 7
    assert state.suppression_buffer("final-store") is state.suppression_buffer("final-store")


def test_a_store_of_another_type_or_task_is_refused() -> None:
    state = access()
    with pytest.raises(ValueError, match="'counts-store' is a window store, not a session store"):
        state.session_store("counts-store")
    with pytest.raises(KeyError, match="not a store of this task"):
        state.logged_store("elsewhere")


def test_suppress_waits_for_the_grace_of_time_windows_and_gap_plus_grace_of_sessions() -> None:
    state = access()
    assert state.close_grace("final") == 3
    assert state.close_grace("final-sessions") == 7


def test_a_store_put_behind_the_record_cache_is_written_through_its_caching_view_over_the_plain_one() -> None:
    state = access()
    cache = ThreadCache(1 << 20)
    assert state.cached_window_store("counts-store") is state.window_store("counts-store")  # not cached yet
    assert state.cached_session_store("sessions-store") is state.session_store("sessions-store")

    windows = state.enable_cache("counts-store", cache, "0_0-counts-store", None)
    sliding = state.enable_cache("counts-store", cache, "0_1-counts-store", None, range_reads=True)
    sessions = state.enable_session_cache("sessions-store", cache, "0_0-sessions-store", None)

    assert type(windows) is CachingWindowStore and isinstance(sliding, CachingSlidingWindowStore)
    assert state.cached_window_store("counts-store") is sliding
    assert state.cached_session_store("sessions-store") is sessions
    assert sessions.below is state.session_store("sessions-store")
