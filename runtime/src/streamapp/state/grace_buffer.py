"""The grace buffer of a stream-table join (KIP-923, Kafka's ``RocksDBTimeOrderedKeyValueBuffer`` as
``KStreamKTableJoinProcessor`` uses it): stream records held until the join's stream time passes their timestamp
plus the grace period, then handed back in timestamp order.

Rules (Kafka's): the buffer's stream time is the largest timestamp put into it. ``put`` refuses (returns False) a
record older than ``stream time - grace`` (the caller joins it at once); otherwise it is stored. ``evict`` hands
back and deletes every record with ``timestamp <= stream time - grace``, ordered by the store key
``timestamp (8-byte BE) + serialized key + sequence number (4-byte BE)`` (Kafka's ``TimeFirstWindowKeySchema``:
by timestamp, then key bytes, then arrival).

Kept in a logged ``key_value`` store (changelog ``<app>-<store>-changelog``, compacted): one entry per buffered
record under that key, value = the serialized stream value; an evicted record is deleted (a tombstone in the
changelog). The stream time is kept under the empty key (8-byte BE), which no record key can be, so a restored
or moved task refuses and evicts exactly as the old owner would have. The whole buffer is mirrored in memory
(it holds at most a grace period of records) and rebuilt from the store on first use. Record headers are not
kept (Kafka keeps the buffered record's context); an evicted record is joined with the headers of the record
that evicted it.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Callable
from typing import Any

from streamapp.serdes import Serde
from streamapp.state.window_store import LoggedBytesStore

__all__ = ["GraceBuffer"]

_TIME = struct.Struct(">q")
_SEQ = struct.Struct(">i")
_STREAM_TIME_KEY = b""
_NO_TIMESTAMP = -1


class GraceBuffer:
    """Stream records waiting out a grace period (module docstring). ``grace_ms``: the grace period (ms)."""

    def __init__(self, store: LoggedBytesStore, key_serde: Serde, value_serde: Serde, grace_ms: int) -> None:
        self.name = store.name
        self._store = store
        self._key_serde = key_serde
        self._value_serde = value_serde
        self.grace_ms = grace_ms
        self._keys: list[bytes] | None = None  # sorted store keys, loaded on first use
        self._stream_time = _NO_TIMESTAMP
        self._seq = 0

    def _loaded(self) -> list[bytes]:
        if self._keys is None:
            keys = []
            for raw_key, raw in self._store.inner.items():
                if raw_key == _STREAM_TIME_KEY:
                    self._stream_time = int(_TIME.unpack(raw)[0])
                else:
                    keys.append(raw_key)
            self._keys = sorted(keys)
            self._seq = 1 + max((int(_SEQ.unpack_from(k, len(k) - _SEQ.size)[0]) for k in keys), default=-1)
        return self._keys

    @property
    def stream_time(self) -> int:
        """The largest timestamp put (ms), -1 before the first put."""
        self._loaded()
        return self._stream_time

    def __len__(self) -> int:
        return len(self._loaded())

    def put(self, key: Any, value: Any, timestamp: int) -> bool:
        """Buffer record ``(key, value)`` at ``timestamp`` (ms); False (nothing stored) when it is older than
        ``stream time - grace``."""
        keys = self._loaded()
        if self._stream_time - self.grace_ms > timestamp:
            return False
        raw_key = self._key_serde.serialize(key)
        if raw_key is None:
            raise ValueError(f"grace buffer '{self.name}': keys must not be null")
        store_key = _TIME.pack(timestamp) + raw_key + _SEQ.pack(self._seq)
        self._seq = (self._seq + 1) & 0x7FFFFFFF
        self._store.put(store_key, self._value_serde.serialize(value))
        bisect.insort(keys, store_key)
        if timestamp > self._stream_time:
            self._stream_time = timestamp
            self._store.put(_STREAM_TIME_KEY, _TIME.pack(timestamp))
        return True

    def evict(self, emit: Callable[[Any, Any, int], None]) -> None:
        """Delete and pass ``emit(key, value, timestamp)`` every record with ``timestamp <= stream time - grace``,
        in store-key order."""
        keys = self._loaded()
        horizon = self._stream_time - self.grace_ms
        while keys and _TIME.unpack_from(keys[0])[0] <= horizon:
            store_key = keys.pop(0)
            raw = self._store.get(store_key)
            self._store.put(store_key, None)
            timestamp = int(_TIME.unpack_from(store_key)[0])
            key = self._key_serde.deserialize(store_key[_TIME.size : -_SEQ.size])
            emit(key, self._value_serde.deserialize(raw), timestamp)
