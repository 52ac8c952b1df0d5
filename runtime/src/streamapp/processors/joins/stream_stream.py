"""The windowed stream-stream join processor (Kafka's ``KStreamKStreamJoin`` with its left and right sides,
``KStreamJoinWindow`` and the outer-join store of KIP-633 / KAFKA-10847).

Shapes: records ``(key, value, timestamp)``, timestamps in epoch ms (non-negative, as in Kafka). Windows
``JoinWindowsSpec(before_ms, after_ms, grace_ms)``: a left record at ``t`` joins right records with the
same key and a timestamp in ``[t - before, t + after]``; symmetrically a right record at ``t`` joins left
records in ``[t - after, t + before]``.

Per record of either side (in this order, as Kafka):

1. shared stream time (both sides) advances to the record's timestamp;
2. a null key: a preserved side (left of a left join, both of an outer join) forwards
   ``joiner(value, None)`` at once; otherwise the record is dropped, as is any null value (counted);
3. if the record is at stream time, buffered unmatched records whose window has closed
   (``ts + after_side + grace < stream time``) are forwarded as ``joiner(v, None)`` / ``joiner(None, v)``
   at their own timestamp, oldest first (right before left at equal timestamps, as Kafka's
   ``TimestampedKeyAndJoinSide`` order);
4. the other side's window store is read; every match forwards ``joiner(left, right)`` at
   ``max(ts, other ts)`` and removes the matched record's key+timestamp from the outer buffer;
5. an unmatched record of a preserved side waits in the outer buffer until its window closes; if it has
   closed already (an out-of-order record more than ``grace`` behind), it is forwarded unmatched at once;
6. the record is put into its own side's window store (retention ``before + after + grace``,
   duplicates retained); a record older than the retention is not kept by the store, so later records of
   the other side cannot match it: it is counted as dropped (``late``) and logged, rate-limited, as Kafka's
   segmented store logs "Skipping record for expired segment" (its ``expired-window-record-drop``).

Each record's lateness behind the shared stream time is recorded (Kafka's ``record-lateness``).

Deliberate difference from Kafka 4.0 in step 5: Kafka emits an unmatched record at once when only its
window *end* is behind stream time, even within grace, and may later emit a matched result for it too
(KAFKA-19536, open). Here it waits for ``end + grace``, the documented ``JoinWindows`` grace semantics, so
every result is final: with records no more than ``grace`` out of order, the output is exactly the
batch join (checked by ``runtime/tests/properties/test_join_properties.py``). Kafka's wall-clock throttle
of the outer-buffer scan (``emit.interval.ms.kstreams.outer.join.spurious.results.fix``, default 1 s) is
not applied: it is a cost optimisation that makes output timing depend on the wall clock; a cheap exact
pre-check (oldest buffered timestamp) skips scans that cannot emit instead.
"""

from __future__ import annotations

import bisect
import heapq
import logging
import struct
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from streamapp.processors.base import BuildContext, FamilyBuilders, Processor, ProcessorMetrics
from streamapp.processors.joins.tables import Joiner, JoinProcessor
from streamapp.serdes import Serde
from streamapp.state.window_store import LoggedBytesStore, WindowStore
from streamapp.topology.nodes.joins import StreamStreamJoinNode
from streamapp.topology.windows import JoinWindowsSpec

__all__ = ["BUILDERS", "OuterJoinBuffer", "StreamStreamJoinProcessor"]

log = logging.getLogger(__name__)

BUILDERS = FamilyBuilders("joins")

_TS = struct.Struct(">q")
_LEN = struct.Struct(">I")
_LEFT, _RIGHT = b"\x01", b"\x00"  # Kafka's TimestampedKeyAndJoinSide: boolean byte, left = 1


class OuterJoinBuffer:
    """Unmatched records of the preserved side(s), waiting for their window to close (Kafka's outer-shared
    join store).

    Store key ``timestamp (8-byte big-endian) + side byte (left 1, right 0) + serialized key``, so a scan
    runs oldest first; store value: the records' serialized values, each prefixed by its 4-byte length
    (Kafka's ``ListValueStore``: puts append). Values are serialized with the side's serde.

    Scans stay proportional to what they return: they start at a *floor* below which every entry is known
    to be gone (raised by ``raise_floor`` after a scan, lowered by an ``add`` below it), read the persistent
    store lazily, and merge the writes buffered since the last commit from a sorted index of live keys and
    a set of deleted ones (a deleted entry is never visited again).
    """

    def __init__(self, store: LoggedBytesStore, key_serde: Serde, left_serde: Serde, right_serde: Serde) -> None:
        self._store = store
        self._key_serde = key_serde
        self._serdes = {_LEFT: left_serde, _RIGHT: right_serde}
        self._live: list[bytes] = []
        """Sorted keys written with a value since the store's buffer was last applied."""
        self._live_set: set[bytes] = set()
        self._deleted: set[bytes] = set()
        """Keys deleted since the store's buffer was last applied (they may still be persisted)."""
        self._floor = b""

    def add(self, timestamp: int, left: bool, key: Any, value: Any) -> None:
        """Append ``value`` to the entry of ``(timestamp, side, key)``."""
        store_key = self._store_key(timestamp, left, key)
        raw = self._serdes[store_key[8:9]].serialize(value) or b""
        current = self._store.get(store_key) or b""
        self._write(store_key, current + _LEN.pack(len(raw)) + raw)
        self._floor = min(self._floor, store_key)

    def remove(self, timestamp: int, left: bool, key: Any) -> None:
        """Forget the entry of ``(timestamp, side, key)`` (a match arrived for it)."""
        store_key = self._store_key(timestamp, left, key)
        if self._store.get(store_key) is not None:
            self._write(store_key, None)

    def entries(self, before: int) -> Iterator[tuple[int, bool, Any, list[Any], bytes]]:
        """``(timestamp, is_left, key, values, store_key)`` of the entries older than ``before`` (ms), oldest
        first. ``delete(store_key)`` is safe meanwhile."""
        if before <= 0:
            return
        self._forget_if_applied()
        upper = _TS.pack(before)
        if self._floor >= upper:
            return
        persisted = (
            (store_key, raw)
            for store_key, raw in self._store.inner.range(self._floor, upper)
            if store_key not in self._deleted and store_key not in self._live_set
        )
        buffered = [
            (store_key, self._store.get(store_key))
            for store_key in self._live[
                bisect.bisect_left(self._live, self._floor) : bisect.bisect_left(self._live, upper)
            ]
        ]
        for store_key, raw in heapq.merge(persisted, buffered, key=lambda item: item[0]):
            if raw is None:
                continue
            side = store_key[8:9]
            yield (
                _TS.unpack_from(store_key)[0],
                side == _LEFT,
                self._key_serde.deserialize(store_key[9:]),
                (self._decode_values(side, raw)),
                store_key,
            )

    def delete(self, store_key: bytes) -> None:
        self._write(store_key, None)

    def raise_floor(self, store_key: bytes) -> None:
        """Every entry below ``store_key`` is gone: later scans start there."""
        self._floor = max(self._floor, store_key)

    @staticmethod
    def floor_key(timestamp: int) -> bytes:
        """The smallest store key at ``timestamp`` (ms)."""
        return _TS.pack(max(timestamp, 0))

    def _decode_values(self, side: bytes, raw: bytes) -> list[Any]:
        serde = self._serdes[side]
        values: list[Any] = []
        offset = 0
        while offset < len(raw):
            (length,) = _LEN.unpack_from(raw, offset)
            offset += _LEN.size
            values.append(serde.deserialize(raw[offset : offset + length]))
            offset += length
        return values

    def _store_key(self, timestamp: int, left: bool, key: Any) -> bytes:
        raw_key = self._key_serde.serialize(key)
        if raw_key is None:
            raise ValueError(f"store '{self._store.name}': keys must not be null")
        return _TS.pack(timestamp) + (_LEFT if left else _RIGHT) + raw_key

    def _forget_if_applied(self) -> None:
        """Drop the buffered-write index once the store applied (or discarded) its buffer."""
        if (self._live or self._deleted) and not self._store.has_pending:
            self._live.clear()
            self._live_set.clear()
            self._deleted.clear()

    def _write(self, store_key: bytes, value: bytes | None) -> None:
        self._forget_if_applied()
        self._store.put(store_key, value)
        if value is None:
            self._deleted.add(store_key)
            if store_key in self._live_set:
                self._live_set.discard(store_key)
                del self._live[bisect.bisect_left(self._live, store_key)]
        else:
            self._deleted.discard(store_key)
            if store_key not in self._live_set:
                self._live_set.add(store_key)
                bisect.insort(self._live, store_key)


class _SideConfig:
    """What differs between the two sides of the join (Kafka's ``KStreamKStreamJoinLeftSide`` / ``RightSide``)."""

    __slots__ = ("after", "before", "is_left", "joiner", "other_store", "preserved", "this_store")

    def __init__(
        self,
        is_left: bool,
        before: int,
        after: int,
        preserved: bool,
        joiner: Joiner,
        this_store: WindowStore,
        other_store: WindowStore,
    ) -> None:
        self.is_left = is_left
        self.before = before
        self.after = after
        self.preserved = preserved
        self.joiner = joiner
        self.this_store = this_store
        self.other_store = other_store


class StreamStreamJoinProcessor(JoinProcessor):
    """A windowed KStream-KStream join, inner, left or outer (see the module docstring for the steps)."""

    def __init__(
        self,
        left: str,
        right: str,
        joiner: Joiner,
        join: str,
        windows: JoinWindowsSpec,
        stores: tuple[WindowStore, WindowStore],
        outer: OuterJoinBuffer | None,
        children: Sequence[Processor],
        metrics: ProcessorMetrics,
        name: str = "",
    ) -> None:
        super().__init__(left, right, children, metrics, name)
        self._lateness = metrics.lateness_of(name)
        left_store, right_store = stores
        if join != "inner" and outer is None:
            raise ValueError(f"a {join} stream-stream join needs an outer-join store")
        self._windows = windows
        self._outer = outer if join != "inner" else None
        self._left = _SideConfig(
            True, windows.before_ms, windows.after_ms, join in ("left", "outer"), joiner, left_store, right_store
        )
        self._right = _SideConfig(
            False, windows.after_ms, windows.before_ms, join == "outer", _swapped(joiner), right_store, left_store
        )
        self.stream_time = -1
        """Largest timestamp seen on either side (ms): Kafka's shared ``TimeTracker.streamTime``."""
        self._min_buffered: int | None = None
        """A lower bound of the oldest timestamp in the outer buffer (ms), ``None`` when unknown (after a restart)."""

    def process_left(self, key: Any, value: Any, timestamp: int) -> None:
        self._process(self._left, key, value, timestamp)

    def process_right(self, key: Any, value: Any, timestamp: int) -> None:
        self._process(self._right, key, value, timestamp)

    def _process(self, side: _SideConfig, key: Any, value: Any, timestamp: int) -> None:
        if timestamp > self.stream_time:
            self.stream_time = timestamp
        self._lateness.record(self.stream_time - timestamp)
        if side.preserved and key is None and value is not None:
            self._forward(key, side.joiner(value, None), timestamp)
            return
        if key is None or value is None:
            self._drop("null key or value")
            return
        if self._outer is not None and timestamp == self.stream_time:
            self._emit_closed(self._outer)
        time_from = max(0, timestamp - side.before)
        time_to = max(0, timestamp + side.after)
        matches = side.other_store.fetch_range(key, time_from, time_to)
        for other_timestamp, other in matches:
            if self._outer is not None:
                self._outer.remove(other_timestamp, not side.is_left, key)
            self._forward(key, side.joiner(value, other.value), max(timestamp, other_timestamp))
        if side.preserved and not matches:
            if self._outer is None or time_to + self._windows.grace_ms < self.stream_time:
                self._forward(key, side.joiner(value, None), timestamp)
            else:
                self._outer.add(timestamp, side.is_left, key, value)
                if self._min_buffered is not None:
                    self._min_buffered = min(self._min_buffered, timestamp)
        store = side.this_store
        expiration = store.observed_stream_time - store.retention_ms
        if timestamp < expiration:  # the store drops the put: later records of the other side cannot match it
            window = f"[{time_from},{time_to}]"
            self._metrics.late(self.name, timestamp, window, expiration, self.stream_time)
        store.put(key, value, window_start=timestamp, timestamp=timestamp)

    def _emit_closed(self, outer: OuterJoinBuffer) -> None:
        """Forward and forget every buffered record whose window closed (``ts + after_side + grace < stream
        time``; after_side is ``after`` for left records, ``before`` for right ones)."""
        grace = self._windows.grace_ms
        shortest = min(self._windows.before_ms, self._windows.after_ms)
        if self._min_buffered is not None and self._min_buffered + shortest + grace >= self.stream_time:
            return  # nothing can have closed yet (exact: every entry is at least this young)
        horizon = self.stream_time - shortest - grace  # entries at or after it are open on either side
        left_open = right_open = False
        oldest_kept: int | None = None
        first_kept: bytes | None = None
        for timestamp, is_left, key, values, store_key in outer.entries(before=horizon):
            lookback = self._windows.after_ms if is_left else self._windows.before_ms
            if timestamp + lookback + grace >= self.stream_time:
                if oldest_kept is None:
                    oldest_kept, first_kept = timestamp, store_key
                left_open = left_open or is_left
                right_open = right_open or not is_left
                if left_open and right_open:
                    break
                continue
            for value in values:
                joined = self._left.joiner(value, None) if is_left else self._right.joiner(value, None)
                self._forward(key, joined, timestamp)
            outer.delete(store_key)
        # every entry below the first one kept (or below the horizon) is gone now
        outer.raise_floor(first_kept if first_kept is not None else outer.floor_key(horizon))
        # a lower bound of the oldest entry left: the pre-check above never skips a scan that could emit
        self._min_buffered = oldest_kept if oldest_kept is not None else max(horizon, 0)


def _swapped(joiner: Joiner) -> Joiner:
    """The joiner as the right side calls it: ``(right value, left value)`` -> ``joiner(left, right)``."""

    def right_side_joiner(this: Any, other: Any) -> Any:
        return joiner(other, this)

    return right_side_joiner


@BUILDERS.builds(StreamStreamJoinNode)
def build_stream_stream_join(node: StreamStreamJoinNode, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    left_store: WindowStore = ctx.window_store(node.left_store)
    right_store: WindowStore = ctx.window_store(node.right_store)
    outer: OuterJoinBuffer | None = None
    if node.outer_store is not None:
        outer = OuterJoinBuffer(
            ctx.logged_store(node.outer_store), left_store.key_serde, left_store.value_serde, right_store.value_serde
        )
    joiner: Callable[[Any, Any], Any] = ctx.function(node.name, "joiner")
    return StreamStreamJoinProcessor(
        node.left,
        node.right,
        joiner,
        node.join,
        node.windows,
        (left_store, right_store),
        outer,
        children,
        ctx.metrics,
        node.name,
    )
