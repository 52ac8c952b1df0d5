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
from streamapp.state.stores import PersistentKeyValueStore

__all__ = ["KeyValueStoreView"]


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
                return self._value_serde.deserialize(value)
        return None

    def all(self) -> Iterator[tuple[Any, Any]]:
        """Every ``(key, value)``, ordered by serialized key (as a RocksDB iterator returns them)."""
        merged = heapq.merge(*(persistent.items() for _, persistent in self._instances()), key=lambda kv: kv[0])
        for raw_key, raw_value in merged:
            yield self._key_serde.deserialize(raw_key), self._value_serde.deserialize(raw_value)

    def to_dict(self) -> dict[Any, Any]:
        """The whole store as a dict (keys must be hashable)."""
        return dict(self.all())

    def approximate_num_entries(self) -> int:
        return sum(1 for _ in self.all())

    def __len__(self) -> int:
        return self.approximate_num_entries()
