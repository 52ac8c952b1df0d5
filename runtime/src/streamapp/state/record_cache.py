"""The record cache (Kafka Streams' KIP-63: ``ThreadCache`` / ``NamedCache`` / ``CachingKeyValueStore``).

One ``ThreadCache`` per stream thread, bounded by ``statestore.cache.max.bytes``; one ``NamedCache`` in it per
cached store of each task (namespace ``<taskId>-<store>``). A write to a cached store goes into its named cache
as a *dirty* entry; nothing is forwarded downstream or written to the changelogging store below yet. Dirty
entries leave the cache, in one batch per named cache, through its flush listener:

- on **commit** (``flush``, before the changelog is sent and, under ``exactly_once_v2``, before the transaction
  commits): every dirty entry, in the order of their last update (Kafka's ``NamedCache.dirtyKeys``, a
  ``LinkedHashSet`` re-inserted on each put);
- on **eviction**: after a put, while the thread's cache holds more than its bound, the put's named cache
  evicts its least recently used entry (reads and writes both count as use); when that entry is dirty, the
  whole named cache is flushed, the evicted entry first (Kafka's ``NamedCache.evict`` / ``flush(evicted)``).

``CachingKeyValueStore`` is the store layer (Kafka's ``CachingKeyValueStore``): reads see the cache first; a
flushed entry is serialized, written to the store below and handed, with the value the store below held before
(the last flushed value: what downstream saw), to the flush listener, which forwards ``Change(new, old)`` (Kafka's
``TimestampedCacheFlushListener``). An entry whose new and old values are both absent is skipped. A hot key
therefore produces one downstream update and one changelog record per commit interval instead of one per record.

One deviation in form, not in what is forwarded when: the cache keeps *deserialized* values (keyed by the
serialized key), so a read-modify-write of a cached key costs no serde round trip; values are serialized when
they are flushed. Sizes: an entry counts its key bytes, its value's size (the length of a ``str`` / ``bytes``,
8 for a number, the serialized length otherwise) and ``CACHE_ENTRY_OVERHEAD_BYTES`` of Python memory. Any other
value (a container) is serialized for its size only when its key enters the cache; later puts keep that size
and each flush re-measures it from the bytes it writes below, so a hot aggregate costs no serialization per
record.

A value the store's value serde rejects (a string aggregate into a ``long`` store) fails where it is serialized:
a container when its key enters the cache, inside the processor's write, which names its node and store; a number
or a string at the flush, outside any record (at commit; on an eviction, inside the record that evicted). There
the cached store catches the serde's error around the serialization and raises a ``StoreSerializationError``
naming the store and the node its flush listener was set by (``set_flush_listener(..., node=...)``), so a value
that fits costs nothing more.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from streamapp.kafka.types import Headers
from streamapp.serdes import Serde, SerdeError
from streamapp.state.stores import (
    NO_TIMESTAMP,
    BytesKeyValueStore,
    StoreSerializationError,
    TypedKeyValueStore,
    store_mismatch,
)

__all__ = [
    "CACHE_ENTRY_OVERHEAD_BYTES",
    "CacheIndex",
    "CachedStore",
    "CachingKeyValueStore",
    "DirtyEntry",
    "FlushListener",
    "HeadersContext",
    "NamedCache",
    "ThreadCache",
    "cached_value_size",
]

CACHE_ENTRY_OVERHEAD_BYTES = 200
"""Python memory per cached entry beyond its key and value bytes (CPython 3.11, 64-bit): the ordered-dict
node and slot, the ``(value, timestamp, size, headers)`` tuple, the timestamp int, the bytes headers and the
dirty-set slot."""

DirtyEntry = tuple[bytes, Any, int, Headers | None]
"""A flushed entry: ``(serialized key, value or None for a delete, timestamp of the write in epoch ms, headers of
the record that made the write)``."""

FlushListener = Callable[[list[DirtyEntry]], None]

StoreFlushListener = Callable[[Any, Any, Any, int], None]
"""``(key, new value, old value, timestamp)`` of one flushed entry (values ``None`` when absent)."""


class HeadersContext(Protocol):
    """Where a task keeps the headers of the record being processed (``streamapp.processors.base.RecordContext``)."""

    headers: Headers | None


class ThreadCache:
    """The record cache of one stream thread: named caches sharing ``max_bytes`` (>= 1)."""

    def __init__(self, max_bytes: int) -> None:
        if max_bytes < 1:
            raise ValueError(f"a record cache needs a positive size, got {max_bytes} bytes (0 turns caching off)")
        self.max_bytes = max_bytes
        self.size_bytes = 0
        self._caches: dict[str, NamedCache] = {}
        self.evictions = 0
        """Entries evicted since the cache was created (Kafka's ``cache-evictions`` idea, as a total)."""

    def named_cache(self, namespace: str, listener: FlushListener) -> NamedCache:
        """The named cache ``namespace`` (``<taskId>-<store>``), created empty with ``listener`` if new."""
        cache = self._caches.get(namespace)
        if cache is None:
            cache = self._caches[namespace] = NamedCache(namespace, self, listener)
        return cache

    def close(self, namespace: str) -> None:
        """Drop a named cache and its entries, flushed or not (its task closed)."""
        cache = self._caches.pop(namespace, None)
        if cache is not None:
            cache.clear()

    def maybe_evict(self, cache: NamedCache) -> None:
        """After a put into ``cache``: evict its least recently used entries while the thread's cache is over
        its bound (Kafka's ``ThreadCache.maybeEvict``: only the cache that was written to evicts)."""
        while self.size_bytes > self.max_bytes and cache:
            cache.evict()
            self.evictions += 1


class NamedCache:
    """The entries of one store of one task, in LRU order, with the keys of the dirty ones in update order."""

    def __init__(self, namespace: str, thread: ThreadCache, listener: FlushListener) -> None:
        self.namespace = namespace
        self._thread = thread
        self._listener = listener
        self._entries: OrderedDict[bytes, tuple[Any, int, int, Headers | None]] = OrderedDict()
        """serialized key -> ``(value, timestamp, size, headers)``, least recently used first. Tuples, replaced on
        each put, not lists: the cyclic GC stops tracking a tuple of immutable values, so a full cache of counts
        costs the collector nothing (lists would be scanned at every full collection: ~25% of a windowed count)."""
        self._dirty: dict[bytes, None] = {}
        self.size_bytes = 0
        self.on_remove: Callable[[bytes], None] | None = None
        """Called with the key of each entry that leaves the cache by eviction or as a flushed delete (a store
        that indexes its cached keys, e.g. ``streamapp.state.caching_session_store``); ``clear`` does not call it."""

    def __bool__(self) -> bool:
        return bool(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def has_dirty(self) -> bool:
        return bool(self._dirty)

    def get(self, key: bytes) -> tuple[Any, int, int, Headers | None] | None:
        """The ``(value, timestamp, size, headers)`` entry of ``key`` (value ``None``: deleted), or ``None`` on a miss.
        A hit makes the entry the most recently used."""
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
        return entry

    def put(self, key: bytes, value: Any, timestamp: int, value_size: int, headers: Headers | None = None) -> None:
        """Write a dirty entry (the most recently used) with the ``headers`` of the record that wrote it (Kafka's
        ``LRUCacheEntry`` keeps the record context), then let the thread cache evict if it is full."""
        entries = self._entries
        entry = entries.get(key)
        size = len(key) + CACHE_ENTRY_OVERHEAD_BYTES + value_size
        entries[key] = (value, timestamp, size, headers)  # a tuple: the GC untracks it (a list it scans for ever)
        if entry is not None:
            size -= entry[2]
            entries.move_to_end(key)
        thread = self._thread
        if size:
            self.size_bytes += size
            thread.size_bytes += size
        dirty = self._dirty
        if key in dirty:
            del dirty[key]
        dirty[key] = None
        if thread.size_bytes > thread.max_bytes:
            thread.maybe_evict(self)

    def peek(self, key: bytes) -> tuple[Any, int, int, Headers | None] | None:
        """The ``(value, timestamp, size, headers)`` entry of ``key`` or ``None``, without making it a use."""
        return self._entries.get(key)

    def is_dirty(self, key: bytes) -> bool:
        """Whether ``key``'s entry waits to be flushed."""
        return key in self._dirty

    def value_size(self, key: bytes) -> int | None:
        """The value size (bytes) counted for ``key``'s entry, or ``None`` when it has none; not a use."""
        entry = self._entries.get(key)
        return None if entry is None else entry[2] - len(key) - CACHE_ENTRY_OVERHEAD_BYTES

    def resize(self, key: bytes, value_size: int) -> None:
        """Count ``value_size`` bytes for the value of ``key``'s entry from now on (no-op when it has none); the
        thread cache evicts at its next put if this made it full."""
        entry = self._entries.get(key)
        if entry is not None:
            size = len(key) + CACHE_ENTRY_OVERHEAD_BYTES + value_size
            self._entries[key] = (entry[0], entry[1], size, entry[3])
            grown = size - entry[2]
            self.size_bytes += grown
            self._thread.size_bytes += grown

    def evict(self) -> None:
        """Remove the least recently used entry; when it is dirty, flush it first and every other dirty entry
        after it (Kafka's ``NamedCache.evict``)."""
        key, (value, timestamp, size, headers) = self._entries.popitem(last=False)
        self._shrink(size)
        if self.on_remove is not None:
            self.on_remove(key)
        if key in self._dirty:
            del self._dirty[key]
            self._flush([(key, value, timestamp, headers)])

    def flush(self) -> None:
        """Hand every dirty entry to the listener, in update order, and mark them clean; deleted entries leave."""
        if self._dirty:
            self._flush([])

    def dirty_keys(self) -> Iterator[bytes]:
        """The dirty keys in the order a flush hands them over."""
        return iter(self._dirty)

    def clear(self) -> None:
        """Drop every entry without flushing (the task's uncommitted work is discarded)."""
        self._thread.size_bytes -= self.size_bytes
        self.size_bytes = 0
        self._entries.clear()
        self._dirty.clear()

    def _flush(self, batch: list[DirtyEntry]) -> None:
        entries = self._entries
        for key in self._dirty:
            value, timestamp, _, headers = entries[key]
            batch.append((key, value, timestamp, headers))
        self._dirty = {}  # cleared before the listener runs: forwarding may write to this cache again
        self._listener(batch)
        for key, value, _, _ in batch:
            if value is None:
                entry = entries.get(key)
                if entry is not None and entry[0] is None and key not in self._dirty:
                    del entries[key]
                    self._shrink(entry[2])
                    if self.on_remove is not None:
                        self.on_remove(key)

    def _shrink(self, size: int) -> None:
        self.size_bytes -= size
        self._thread.size_bytes -= size


class CacheIndex:
    """The keys of a named cache's entries grouped by record key bytes (a cache key is those bytes and a
    fixed-size ``suffix``: window start, session end and start), sorted, for stores whose reads are ranges of one
    record key (Kafka's cache is a sorted map it range-scans; ours is hashed, so the index keeps the order). Keys
    leave as their entries leave the cache (``NamedCache.on_remove``). Adding a key after the group's last one
    (the usual case: windows and sessions move forward with stream time) is an append."""

    def __init__(self, cache: NamedCache, suffix: int) -> None:
        self._groups: dict[bytes, list[bytes]] = {}
        self._suffix = suffix
        cache.on_remove = self.remove

    def add(self, group: bytes, key: bytes) -> None:
        keys = self._groups.get(group)
        if keys is None:
            self._groups[group] = [key]
        elif keys[-1] < key:
            keys.append(key)
        else:
            at = bisect.bisect_left(keys, key)
            if at == len(keys) or keys[at] != key:
                keys.insert(at, key)

    def range(self, group: bytes, lower: bytes, upper: bytes | None = None) -> list[bytes]:
        """The cached keys of ``group`` with ``lower <= key < upper`` (``None``: no upper bound), in order."""
        keys = self._groups.get(group)
        if not keys:
            return []
        first = bisect.bisect_left(keys, lower)
        return keys[first:] if upper is None else keys[first : bisect.bisect_left(keys, upper, first)]

    def remove(self, key: bytes) -> None:
        group = key[: -self._suffix]
        keys = self._groups.get(group)
        if keys is not None:
            at = bisect.bisect_left(keys, key)
            if at < len(keys) and keys[at] == key:
                del keys[at]
                if not keys:
                    del self._groups[group]

    def clear(self) -> None:
        self._groups.clear()

    def snapshot(self) -> dict[bytes, set[bytes]]:
        """A copy of the groups (tests)."""
        return {group: set(keys) for group, keys in self._groups.items()}


def cached_value_size(value: Any, serde: Serde, cache: NamedCache, key: bytes) -> int:
    """The size (bytes) an entry of ``key`` in ``cache`` counts for ``value``: 0 for ``None``, the length of a
    ``str`` / ``bytes``, 8 for a number; for a container, the size the entry already counts, or its serialized
    length (``serde``) when ``key`` enters the cache. Only a container looks the entry up."""
    if value is None:
        return 0
    if isinstance(value, (str, bytes)):
        return len(value)
    if isinstance(value, (int, float)):
        return 8
    known = cache.value_size(key)
    if known is not None:
        return known
    serialized = serde.serialize(value)
    return 0 if serialized is None else len(serialized)


class CachedStore:
    """What every store behind the record cache shares (the key-value and the window store): one named cache of
    the thread's cache, the flush protocol a task drives (``has_dirty``, ``flush``, ``discard``, ``close``), and the
    headers of each entry's writer, set in the task's ``record_context`` while the entry is forwarded (Kafka sets
    the cache entry's record context while it flushes it). Subclasses call ``_attach`` and implement
    ``_write_and_forward(key bytes, value, timestamp)``, called per flushed entry."""

    name: str
    _thread: ThreadCache
    _cache: NamedCache
    _context: HeadersContext | None
    _index: CacheIndex | None = None
    """The cached keys per record key, for a store with range reads (cleared with the cache)."""
    _node = ""
    """The processor that writes the store (its flush listener's), named by a flush's ``StoreSerializationError``."""

    def _attach(self, cache: ThreadCache, namespace: str, record_context: HeadersContext | None) -> None:
        self._thread = cache
        self._cache = cache.named_cache(namespace, self._flushed)
        self._context = record_context

    @property
    def has_dirty(self) -> bool:
        """Whether entries wait to be flushed."""
        return self._cache.has_dirty

    def flush(self) -> None:
        """Write down and forward every dirty entry (commit)."""
        self._cache.flush()

    def dirty_keys(self) -> list[bytes]:
        """The keys of the entries waiting to be flushed: the only ones whose value can differ from the store
        below (what an interactive range query merges over the store's range)."""
        return list(self._cache.dirty_keys())

    def discard(self) -> None:
        """Drop the cached entries unflushed (the task's uncommitted work is discarded)."""
        self._cache.clear()
        if self._index is not None:
            self._index.clear()

    def close(self) -> None:
        self._thread.close(self._cache.namespace)
        if self._index is not None:
            self._index.clear()

    def _cache_put(self, key: bytes, value: Any, timestamp: int, value_serde: Serde) -> None:
        """A dirty entry for ``key`` with the headers of the record being processed; a container value is
        serialized to size it only when its key enters the cache (``cached_value_size``)."""
        cache, context = self._cache, self._context
        size = cached_value_size(value, value_serde, cache, key)
        cache.put(key, value, timestamp, size, None if context is None else context.headers)

    def _write_and_forward(self, key: bytes, value: Any, timestamp: int) -> None:
        raise NotImplementedError

    def _unserializable(self, key: Any, value: Any, exc: SerdeError) -> StoreSerializationError:
        """The error for a flushed value the store's value serde rejected (``store_mismatch``: the store and the
        node; built only once the serialization failed)."""
        return store_mismatch(self._node, self.name, key, value, exc, flushed=True)

    def _flushed(self, entries: list[DirtyEntry]) -> None:
        """Each flushed entry with its writer's headers set, the headers of the record being processed restored
        afterwards (an eviction flushes in the middle of a record)."""
        context = self._context
        if context is None:
            for key, value, timestamp, _ in entries:
                self._write_and_forward(key, value, timestamp)
            return
        current = context.headers
        try:
            for key, value, timestamp, headers in entries:
                context.headers = headers
                self._write_and_forward(key, value, timestamp)
        finally:
            context.headers = current


class CachingKeyValueStore(TypedKeyValueStore, CachedStore):
    """A typed key-value store whose writes wait in the thread's record cache (Kafka's ``CachingKeyValueStore``),
    over the task's changelogging store ``below`` (timestamped: the cached stores are the DSL's, KIP-258).

    Reads see the cache first (a hit is a use, for the LRU order); ``put`` makes a dirty entry at the given
    timestamp (epoch ms: the result's, or the deleting record's). ``set_flush_listener`` receives each flushed entry
    with the value the store below held before it.

    ``record_context``: the task's headers of the record being processed; a put keeps them with the entry, and
    the flush of the entry sets them back while its listener forwards (Kafka's ``CachingKeyValueStore``
    ``putAndMaybeForward``: the flushed update carries the headers of the record that last wrote the key).
    """

    def __init__(
        self,
        below: BytesKeyValueStore,
        key_serde: Serde,
        value_serde: Serde,
        cache: ThreadCache,
        namespace: str,
        record_context: HeadersContext | None = None,
    ) -> None:
        super().__init__(below, key_serde, value_serde)
        self.cached = True
        self._attach(cache, namespace, record_context)
        self._listener: StoreFlushListener | None = None

    def set_flush_listener(self, listener: StoreFlushListener, *, node: str = "") -> None:
        """``TypedKeyValueStore.set_flush_listener``: ``listener`` gets each flushed entry; ``node`` (the
        processor that writes the store) is named when a flushed value does not fit the store's value serde."""
        self._listener = listener
        self._node = node

    def get(self, key: Any) -> Any:
        """``TypedKeyValueStore.get`` in one call: a stream-table join reads its table with it per stream record."""
        raw_key = self._key_serde.serialize(key)
        if raw_key is None:
            raise ValueError(f"store '{self.name}': keys must not be null")
        entry = self._cache.get(raw_key)
        if entry is not None:
            return entry[0]
        found = TypedKeyValueStore.get_raw_key(self, raw_key)
        return None if found is None else found[0]

    def get_raw_key(self, raw_key: bytes) -> tuple[Any, int] | None:
        entry = self._cache.get(raw_key)
        if entry is None:
            return super().get_raw_key(raw_key)
        value = entry[0]
        return None if value is None else (value, entry[1])

    def put_raw_key(self, raw_key: bytes, value: Any, timestamp: int = NO_TIMESTAMP) -> None:
        self._cache_put(raw_key, value, timestamp, self._value_serde)

    def _write_and_forward(self, raw_key: bytes, value: Any, timestamp: int) -> None:
        old = super().get_raw_key(raw_key)
        if value is None and old is None:
            return
        try:
            raw_value = self._value_serde.serialize(value)
        except SerdeError as exc:
            raise self._unserializable(self._key_serde.deserialize(raw_key), value, exc) from exc
        self.put_serialized(raw_key, raw_value, timestamp)
        if raw_value is not None and not isinstance(value, (str, bytes, int, float)):
            self._cache.resize(raw_key, len(raw_value))  # a container may have grown since it was sized
        if self._listener is not None:
            self._listener(self._key_serde.deserialize(raw_key), value, None if old is None else old[0], timestamp)
