"""One task's typed views of its window, session and suppression stores (what windowed processors use).

A task builds one ``WindowedStateAccess`` over its logged stores (``name -> ChangeLoggingKeyValueStore``) when it
initializes, and hands it to its processors through ``BuildContext``. Views are created on first request and
cached, so every processor of the task shares one view per store (a view holds the store's observed stream time
and its notes of buffered writes). The test driver reads the same views (``StreamTask.windowed_state``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from streamapp.serdes import Serde, serde_for
from streamapp.state.caching_session_store import CachingSessionStore
from streamapp.state.caching_window_store import CachingSlidingWindowStore, CachingWindowStore
from streamapp.state.record_cache import HeadersContext, ThreadCache
from streamapp.state.session_store import SessionStore
from streamapp.state.suppression_buffer import SuppressionBuffer
from streamapp.state.versioned import VersionedChangeLoggingStore, VersionedKeyValueStore
from streamapp.state.window_store import LoggedBytesStore, WindowStore
from streamapp.topology import TopologyDescription
from streamapp.topology.nodes.windowed import suppression_grace_ms

__all__ = ["WindowedStateAccess"]


class WindowedStateAccess:
    """Typed views of a task's windowed stores, by store name; KeyError for a store the task does not own,
    ValueError for a store of another type."""

    def __init__(self, description: TopologyDescription, stores: Mapping[str, LoggedBytesStore]) -> None:
        self._description = description
        self._stores = stores
        self._views: dict[str, Any] = {}
        self._cached: dict[str, CachingWindowStore] = {}
        self._cached_sessions: dict[str, CachingSessionStore] = {}

    def enable_cache(
        self,
        name: str,
        cache: ThreadCache,
        namespace: str,
        record_context: HeadersContext | None,
        *,
        range_reads: bool = False,
    ) -> CachingWindowStore:
        """Put the ``window`` store ``name`` behind the record cache (``streamapp.state.caching_window_store``):
        ``cached_window_store(name)`` then returns the caching view (the task flushes it at commit).
        ``range_reads``: a ``CachingSlidingWindowStore``, whose ``fetch_range`` sees the cache (sliding windows)."""
        kind = CachingSlidingWindowStore if range_reads else CachingWindowStore
        view = self._cached[name] = kind(self.window_store(name), cache, namespace, record_context)
        return view

    def cached_window_store(self, name: str) -> WindowStore | CachingWindowStore:
        """The view a time-window or sliding-window aggregation writes through: the caching view when
        ``enable_cache`` was called for ``name``, else ``window_store(name)``."""
        cached = self._cached.get(name)
        return cached if cached is not None else self.window_store(name)

    def enable_session_cache(
        self, name: str, cache: ThreadCache, namespace: str, record_context: HeadersContext | None
    ) -> CachingSessionStore:
        """Put the ``session`` store ``name`` behind the record cache (``streamapp.state.caching_session_store``):
        ``cached_session_store(name)`` then returns the caching view (the task flushes it at commit)."""
        view = CachingSessionStore(self.session_store(name), cache, namespace, record_context)
        self._cached_sessions[name] = view
        return view

    def cached_session_store(self, name: str) -> SessionStore | CachingSessionStore:
        """The view a session-window aggregation writes through: the caching view when ``enable_session_cache``
        was called for ``name``, else ``session_store(name)``."""
        cached = self._cached_sessions.get(name)
        return cached if cached is not None else self.session_store(name)

    def window_store(self, name: str) -> WindowStore:
        """The ``window`` store ``name`` (retention, window size and duplicates from its spec)."""
        view = self._views.get(name)
        if view is None:
            spec = self._spec(name, "window")
            assert spec.retention_ms is not None and spec.window_size_ms is not None
            view = WindowStore(
                self.logged_store(name),
                *self._serdes(name, spec),
                retention_ms=spec.retention_ms,
                window_size_ms=spec.window_size_ms,
                retain_duplicates=bool(spec.retain_duplicates),
            )
            self._views[name] = view
        assert isinstance(view, WindowStore)
        return view

    def session_store(self, name: str) -> SessionStore:
        """The ``session`` store ``name``."""
        view = self._views.get(name)
        if view is None:
            spec = self._spec(name, "session")
            assert spec.retention_ms is not None
            view = SessionStore(
                self.logged_store(name),
                *self._serdes(name, spec),
                retention_ms=spec.retention_ms,
            )
            self._views[name] = view
        assert isinstance(view, SessionStore)
        return view

    def suppression_buffer(self, name: str) -> SuppressionBuffer:
        """The buffer kept in ``key_value`` store ``name`` (its key serde serializes the table's keys)."""
        view = self._views.get(name)
        if view is None:
            spec = self._spec(name, "key_value")
            view = SuppressionBuffer(self.logged_store(name), *self._serdes(name, spec))
            self._views[name] = view
        assert isinstance(view, SuppressionBuffer)
        return view

    def store_serdes(self, name: str) -> tuple[Serde, Serde]:
        """The key and value serdes of store ``name``, bound to its changelog topic."""
        return self._serdes(name, self._description.store(name))

    def store_type(self, name: str) -> str:
        """The ``StoreSpec.type`` of store ``name``; KeyError when the topology has none."""
        return str(self._description.store(name).type)

    def versioned_store(self, name: str) -> VersionedKeyValueStore:
        """The typed view of the task's ``versioned`` store ``name`` (``streamapp.state.versioned``)."""
        view = self._views.get(name)
        if view is None:
            spec = self._spec(name, "versioned")
            logged = self.logged_store(name)
            if not isinstance(logged, VersionedChangeLoggingStore):
                raise ValueError(f"store '{name}' was not opened as a versioned store")
            view = self._views[name] = VersionedKeyValueStore(logged, *self._serdes(name, spec))
        assert isinstance(view, VersionedKeyValueStore)
        return view

    def logged_store(self, name: str) -> LoggedBytesStore:
        """The task's buffered, changelogged bytes store ``name`` (raw access for custom layouts)."""
        try:
            return self._stores[name]
        except KeyError:
            raise KeyError(f"store '{name}' is not a store of this task") from None

    def close_grace(self, node: str) -> int:
        """How long (ms) after a window's end the suppress node ``node`` waits: its upstream window's grace
        (plus gap for sessions). ValueError when no windowed aggregation is upstream."""
        nodes = {n.name: n for n in self._description.nodes}
        return suppression_grace_ms(nodes, node)

    def _serdes(self, name: str, spec: Any) -> tuple[Serde, Serde]:
        """The store's key and value serdes, bound to its changelog topic (Kafka Streams serializes store data
        with the changelog topic as the serializer's topic; a Schema Registry serde needs it)."""
        changelog = getattr(self.logged_store(name), "changelog", None)
        topic = None if changelog is None else changelog.topic
        return serde_for(spec.key_serde, topic, is_key=True), serde_for(spec.value_serde, topic)

    def _spec(self, name: str, store_type: str) -> Any:
        spec = self._description.store(name)
        if spec.type != store_type:
            raise ValueError(f"store '{name}' is a {spec.type} store, not a {store_type} store")
        return spec
