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
   duplicates retained; puts older than the retention are dropped by the store).

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

import logging
import struct
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from streamapp.processors.base import BuildContext, Processor, ProcessorMetrics
from streamapp.processors.join import Joiner, JoinProcessor
from streamapp.serdes import Serde
from streamapp.state.window_store import BufferedRangeReader, LoggedBytesStore, WindowStore
from streamapp.topology.joins import StreamStreamJoinNode
from streamapp.topology.node_base import NodeBase
from streamapp.topology.windows import JoinWindowsSpec

__all__ = ["OuterJoinBuffer", "StreamStreamJoinProcessor", "build_stream_stream_join"]

log = logging.getLogger(__name__)

_TS = struct.Struct(">q")
_LEN = struct.Struct(">I")
_LEFT, _RIGHT = b"\x01", b"\x00"  # Kafka's TimestampedKeyAndJoinSide: boolean byte, left = 1


class OuterJoinBuffer:
    """Unmatched records of the preserved side(s), waiting for their window to close (Kafka's outer-shared
    join store).

    Store key ``timestamp (8-byte big-endian) + side byte (left 1, right 0) + serialized key``, so a scan
    runs oldest first; store value: the records' serialized values, each prefixed by its 4-byte length
    (Kafka's ``ListValueStore``: puts append). Values are serialized with the side's serde.
    """

    def __init__(self, store: LoggedBytesStore, key_serde: Serde, left_serde: Serde, right_serde: Serde) -> None:
        self._store = store
        self._reader = BufferedRangeReader(store)
        self._key_serde = key_serde
        self._serdes = {_LEFT: left_serde, _RIGHT: right_serde}

    def add(self, timestamp: int, left: bool, key: Any, value: Any) -> None:
        """Append ``value`` to the entry of ``(timestamp, side, key)``."""
        store_key = self._store_key(timestamp, left, key)
        raw = self._serdes[store_key[8:9]].serialize(value) or b""
        current = self._store.get(store_key) or b""
        self._write(store_key, current + _LEN.pack(len(raw)) + raw)

    def remove(self, timestamp: int, left: bool, key: Any) -> None:
        """Forget the entry of ``(timestamp, side, key)`` (a match arrived for it)."""
        store_key = self._store_key(timestamp, left, key)
        if self._store.get(store_key) is not None:
            self._write(store_key, None)

    def entries(self) -> Iterator[tuple[int, bool, Any, list[Any], bytes]]:
        """``(timestamp, is_left, key, values, store_key)`` oldest first; ``delete(store_key)`` is safe meanwhile."""
        for store_key, raw in self._reader.all():
            side = store_key[8:9]
            serde = self._serdes[side]
            values: list[Any] = []
            offset = 0
            while offset < len(raw):
                (length,) = _LEN.unpack_from(raw, offset)
                offset += _LEN.size
                values.append(serde.deserialize(raw[offset : offset + length]))
                offset += length
            key = self._key_serde.deserialize(store_key[9:])
            yield _TS.unpack_from(store_key)[0], side == _LEFT, key, values, store_key

    def delete(self, store_key: bytes) -> None:
        self._write(store_key, None)

    def _store_key(self, timestamp: int, left: bool, key: Any) -> bytes:
        raw_key = self._key_serde.serialize(key)
        if raw_key is None:
            raise ValueError(f"store '{self._store.name}': keys must not be null")
        return _TS.pack(timestamp) + (_LEFT if left else _RIGHT) + raw_key

    def _write(self, store_key: bytes, value: bytes | None) -> None:
        self._reader.forget_if_applied()
        self._store.put(store_key, value)
        self._reader.note_write(b"", store_key)


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
    ) -> None:
        super().__init__(left, right, children, metrics)
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
        """Oldest timestamp in the outer buffer, ``None`` when unknown (after a restart), +inf when empty."""

    def process_left(self, key: Any, value: Any, timestamp: int) -> None:
        self._process(self._left, key, value, timestamp)

    def process_right(self, key: Any, value: Any, timestamp: int) -> None:
        self._process(self._right, key, value, timestamp)

    def _process(self, side: _SideConfig, key: Any, value: Any, timestamp: int) -> None:
        if timestamp > self.stream_time:
            self.stream_time = timestamp
        if side.preserved and key is None and value is not None:
            self._forward(key, side.joiner(value, None), timestamp)
            return
        if key is None or value is None:
            self._drop("a null key or value", key)
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
        side.this_store.put(key, value, window_start=timestamp, timestamp=timestamp)

    def _emit_closed(self, outer: OuterJoinBuffer) -> None:
        """Forward and forget every buffered record whose window closed (``ts + after_side + grace < stream
        time``; after_side is ``after`` for left records, ``before`` for right ones)."""
        grace = self._windows.grace_ms
        shortest = min(self._windows.before_ms, self._windows.after_ms)
        if self._min_buffered is not None and self._min_buffered + shortest + grace >= self.stream_time:
            return  # nothing can have closed yet (exact: every entry is at least this young)
        left_open = right_open = False
        oldest_kept: int | None = None
        for timestamp, is_left, key, values, store_key in outer.entries():
            lookback = self._windows.after_ms if is_left else self._windows.before_ms
            if timestamp + lookback + grace >= self.stream_time:
                oldest_kept = timestamp if oldest_kept is None else oldest_kept
                left_open = left_open or is_left
                right_open = right_open or not is_left
                if left_open and right_open:
                    break
                continue
            for value in values:
                joined = self._left.joiner(value, None) if is_left else self._right.joiner(value, None)
                self._forward(key, joined, timestamp)
            outer.delete(store_key)
        self._min_buffered = oldest_kept if oldest_kept is not None else _INFINITY


_INFINITY = 2**63 - 1


def _swapped(joiner: Joiner) -> Joiner:
    """The joiner as the right side calls it: ``(right value, left value)`` -> ``joiner(left, right)``."""

    def right_side_joiner(this: Any, other: Any) -> Any:
        return joiner(other, this)

    return right_side_joiner


def build_stream_stream_join(node: NodeBase, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    assert isinstance(node, StreamStreamJoinNode)
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
    )
