"""Read views of a topology's state stores across all the driver's tasks.

A store of a sub-topology with N tasks exists N times, one instance per task (partition), each holding
the keys of its partition. A view reads through every instance, typed with the store's serdes, the way
Kafka Streams' interactive queries read a store across local tasks.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from streamapp.serdes import Serde
from streamapp.state.stores import PersistentKeyValueStore, decode_timestamped
from streamapp.state.versioned import VersionedRecord

__all__ = ["KeyValueStoreView", "SessionStoreView", "VersionedStoreView", "WindowStoreView"]


class KeyValueStoreView:
    """A read-only key-value store over the per-task instances of store ``name``.

    ``instances`` returns, when called, ``(read_store, persistent_store)`` for each task that owns the
    store: ``read_store.get(bytes)`` sees the task's latest writes, ``persistent_store.items()`` lists the
    applied (committed) data. The driver commits after every record, so both agree between calls.
    """

    def __init__(
        self,
        name: str,
        key_serde: Serde,
        value_serde: Serde,
        instances: Callable[[], Sequence[tuple[Any, PersistentKeyValueStore]]],
    ) -> None:
        self.name = name
        self._key_serde = key_serde
        self._value_serde = value_serde
        self._instances = instances

    def __repr__(self) -> str:
        return f"KeyValueStoreView({self.name!r}, instances={len(self._instances())})"

    def get(self, key: Any) -> Any:
        """The value of ``key`` (``None`` if absent). Raises ValueError for a null key."""
        raw = self._key_serde.serialize(key)
        if raw is None:
            raise ValueError(f"store '{self.name}': keys must not be null")
        for read_store, _ in self._instances():
            value = read_store.get(raw)
            if value is not None:
                return self._value_serde.deserialize(_plain(read_store, value))
        return None

    def all(self) -> Iterator[tuple[Any, Any]]:
        """Every ``(key, value)``, ordered by serialized key (as a RocksDB iterator returns them)."""
        merged = heapq.merge(
            *(_plain_items(read_store, persistent) for read_store, persistent in self._instances()),
            key=lambda kv: kv[0],
        )
        for raw_key, raw_value in merged:
            yield self._key_serde.deserialize(raw_key), self._value_serde.deserialize(raw_value)

    def to_dict(self) -> dict[Any, Any]:
        """The whole store as a dict (keys must be hashable)."""
        return dict(self.all())

    def approximate_num_entries(self) -> int:
        return sum(1 for _ in self.all())

    def __len__(self) -> int:
        return self.approximate_num_entries()


class VersionedStoreView:
    """A read-only versioned store (Kafka's ``VersionedKeyValueStore``) over the per-task instances of store
    ``name``: ``instances`` returns, when called, each owning task's typed store
    (``streamapp.state.versioned.VersionedKeyValueStore``)."""

    def __init__(self, name: str, instances: Callable[[], Sequence[Any]]) -> None:
        self.name = name
        self._instances = instances

    def __repr__(self) -> str:
        return f"VersionedStoreView({self.name!r}, instances={len(self._instances())})"

    def get(self, key: Any, as_of: int | None = None) -> VersionedRecord | None:
        """The latest version of ``key`` (``as_of`` ``None``) or the one valid at ``as_of`` (epoch ms), as a
        ``VersionedRecord(value, timestamp)``; ``None`` when there is none or it is a tombstone."""
        for store in self._instances():
            found = store.get(key, as_of)
            if found is not None:
                return found
        return None


def _plain(read_store: Any, raw: bytes) -> bytes:
    """The value bytes of a stored entry: without the timestamp of a timestamped store (KIP-258)."""
    return decode_timestamped(raw)[0] if getattr(read_store, "timestamped", False) else raw


def _plain_items(read_store: Any, persistent: PersistentKeyValueStore) -> Iterator[tuple[bytes, bytes]]:
    for raw_key, raw_value in persistent.items():
        yield raw_key, _plain(read_store, raw_value)


class WindowStoreView:
    """A read-only window store over the per-task instances of store ``name`` (Kafka's ``ReadOnlyWindowStore``).

    ``instances`` returns each owning task's ``streamapp.state.window_store.WindowStore``. Values are the
    aggregates (the timestamp a window store keeps next to each is dropped; ``fetch_with_timestamp`` has it).
    """

    def __init__(self, name: str, instances: Callable[[], Sequence[Any]]) -> None:
        self.name = name
        self._instances = instances

    def __repr__(self) -> str:
        return f"WindowStoreView({self.name!r}, instances={len(self._instances())})"

    def fetch(self, key: Any, window_start: int) -> Any:
        """The aggregate of ``key``'s window starting at ``window_start`` (ms), or ``None``."""
        found = self.fetch_with_timestamp(key, window_start)
        return None if found is None else found[0]

    def fetch_with_timestamp(self, key: Any, window_start: int) -> tuple[Any, int] | None:
        """``(aggregate, largest record timestamp in it)`` of one window, or ``None``."""
        for store in self._instances():
            found = store.fetch(key, window_start)
            if found is not None:
                return found.value, found.timestamp
        return None

    def fetch_range(self, key: Any, time_from: int, time_to: int) -> list[tuple[int, Any]]:
        """``[(window start, aggregate)]`` of ``key``'s live windows starting in ``[time_from, time_to]``, by start."""
        found = [
            (start, v.value) for store in self._instances() for start, v in store.fetch_range(key, time_from, time_to)
        ]
        return sorted(found, key=lambda pair: pair[0])

    def all(self) -> list[tuple[Any, Any]]:
        """``[(Windowed(key, start, end), aggregate)]`` of every live window, by window start (stable)."""
        found = [(window, v.value) for store in self._instances() for window, v in store.all()]
        return sorted(found, key=lambda pair: pair[0].start)

    def to_dict(self) -> dict[Any, Any]:
        return dict(self.all())


class SessionStoreView:
    """A read-only session store over the per-task instances of store ``name`` (Kafka's
    ``ReadOnlySessionStore``); ``instances`` returns each owning task's ``SessionStore``."""

    def __init__(self, name: str, instances: Callable[[], Sequence[Any]]) -> None:
        self.name = name
        self._instances = instances

    def __repr__(self) -> str:
        return f"SessionStoreView({self.name!r}, instances={len(self._instances())})"

    def find_sessions(self, key: Any, earliest_session_end: int, latest_session_start: int) -> list[tuple[Any, Any]]:
        """``[(Windowed, aggregate)]`` of ``key``'s sessions ending at or after ``earliest_session_end`` and
        starting at or before ``latest_session_start``, by end then start."""
        found = [
            pair
            for store in self._instances()
            for pair in store.find_sessions(key, earliest_session_end, latest_session_start)
        ]
        return sorted(found, key=lambda pair: (pair[0].end, pair[0].start))

    def fetch_session(self, key: Any, start: int, end: int) -> Any:
        """The aggregate of ``key``'s session ``[start, end]``, or ``None``."""
        for store in self._instances():
            value = store.fetch_session(key, start, end)
            if value is not None:
                return value
        return None

    def all(self) -> list[tuple[Any, Any]]:
        """``[(Windowed, aggregate)]`` of every live session, by end then start (stable)."""
        found = [pair for store in self._instances() for pair in store.all()]
        return sorted(found, key=lambda pair: (pair[0].end, pair[0].start))

    def to_dict(self) -> dict[Any, Any]:
        return dict(self.all())
