"""Key-value store interfaces shared by every backend and wrapper.

Layers, innermost first (Kafka Streams' store builder stacks them the same way):

- a ``PersistentKeyValueStore`` of bytes (``RocksDBStore``, ``InMemoryKeyValueStore``) that applies a batch
  of writes atomically *together with* the changelog offset the batch corresponds to;
- ``ChangeLoggingKeyValueStore`` (``streamapp.state.changelogging``): buffers a task's writes between
  commits, sends them to the changelog at commit and applies them to the persistent store after it;
- ``TypedKeyValueStore``: serdes on top, the view processors use.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from streamapp.serdes import Serde

__all__ = ["BytesKeyValueStore", "PersistentKeyValueStore", "TypedKeyValueStore"]


class BytesKeyValueStore(Protocol):
    """A key-value store of raw bytes. ``put(key, None)`` deletes the key (a tombstone)."""

    name: str

    def get(self, key: bytes) -> bytes | None: ...

    def put(self, key: bytes, value: bytes | None) -> None: ...


class PersistentKeyValueStore(Protocol):
    """The storage engine under a store: batched atomic writes that carry their changelog offset.

    ``changelog_offset()`` is the offset of the last changelog record reflected in the store, or ``None``
    for a store that never applied one; restore resumes at that offset + 1.
    """

    name: str

    def get(self, key: bytes) -> bytes | None: ...

    def write(self, batch: Mapping[bytes, bytes | None], changelog_offset: int | None) -> None:
        """Apply every put/delete in ``batch`` and record ``changelog_offset`` in one atomic step."""
        ...

    def changelog_offset(self) -> int | None: ...

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        """Every key and value, in key order."""
        ...

    def close(self) -> None: ...


class TypedKeyValueStore:
    """A bytes store seen through key and value serdes: what processors read and write."""

    def __init__(self, inner: BytesKeyValueStore, key_serde: Serde, value_serde: Serde) -> None:
        self.name = inner.name
        self._inner = inner
        self._key_serde = key_serde
        self._value_serde = value_serde

    def get(self, key: Any) -> Any:
        """The value stored for ``key``, or ``None``."""
        raw_key = self._key_serde.serialize(key)
        if raw_key is None:
            raise ValueError(f"store '{self.name}': keys must not be null")
        return self._value_serde.deserialize(self._inner.get(raw_key))

    def put(self, key: Any, value: Any) -> None:
        """Store ``value`` for ``key``; ``None`` deletes it."""
        raw_key = self._key_serde.serialize(key)
        if raw_key is None:
            raise ValueError(f"store '{self.name}': keys must not be null")
        self._inner.put(raw_key, self._value_serde.serialize(value))
