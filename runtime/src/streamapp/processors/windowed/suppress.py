"""``suppress`` is Kafka Streams' ``KTableSuppressProcessor``. ``until_window_closes``: every update of the windowed
table goes into a ``SuppressionBuffer`` at buffer time = the window's end; after each record the processor
forwards (oldest buffer time first) every buffered update with ``end <= streamTime - closeGrace``, where stream
time is the largest record timestamp it has seen and ``closeGrace`` the upstream window's grace (plus the gap
for session windows); final tombstones (a session merged away) are not forwarded. ``until_time_limit``: the
buffer time is the record's timestamp and the limit replaces the grace; tombstones are forwarded. A forwarded
record is ``(key, Change(new, prior), timestamp of the last update)``. A bounded buffer over its bound then
fails the record (strict, ``shut_down``) or forwards its oldest updates early until it fits (``emit_early``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from streamapp.processors.base import BuildContext, Change, FamilyBuilders, Processor, RecordContext
from streamapp.state.suppression_buffer import BufferedUpdate, SuppressionBuffer
from streamapp.topology.nodes.windowed import SuppressNode
from streamapp.windowed import Windowed

__all__ = ["BUILDERS", "SuppressProcessor", "SuppressionBufferFullError", "build_suppress"]

BUILDERS = FamilyBuilders("windowed")


class SuppressionBufferFullError(RuntimeError):
    """A suppress node's strict buffer exceeded its bound (Kafka's ``StreamsException`` from
    ``KTableSuppressProcessor`` with ``shutDownWhenFull``); it goes to the processing exception handler."""


class SuppressProcessor:
    """Buffers table updates and forwards them when their buffer time expires (``SuppressNode``).

    ``suppress_ms``: how far behind stream time an update's buffer time must be to be forwarded (the close grace
    for final results, the time limit otherwise). ``final_results``: buffer under the window end, require
    ``Windowed`` keys (TypeError otherwise) and drop final tombstones; else buffer under the record timestamp and
    forward tombstones. ``max_records`` / ``max_bytes`` (``None``: unbounded) and ``emit_early_when_full`` as in
    ``SuppressNode``; a strict buffer over its bound raises SuppressionBufferFullError. ``record_context``: the
    task's headers of the record being processed; an update is forwarded with the headers of the record that
    buffered it (Kafka's ``KTableSuppressProcessor`` sets the buffered record context back).
    """

    def __init__(
        self,
        name: str,
        buffer: SuppressionBuffer,
        suppress_ms: int,
        children: Sequence[Processor],
        *,
        final_results: bool = True,
        max_records: int | None = None,
        max_bytes: int | None = None,
        emit_early_when_full: bool = False,
        record_context: RecordContext | None = None,
    ) -> None:
        self.name = name
        self._context = record_context if record_context is not None else RecordContext()
        self.close_grace_ms = suppress_ms
        """How far behind stream time (ms) a buffered update is forwarded (named for final results)."""
        self.observed_stream_time = -1
        """Largest record timestamp seen (ms), -1 before the first record."""
        self.emitted = 0
        """Updates forwarded (Kafka's ``suppression-emit-total``)."""
        self._buffer = buffer
        self._children = tuple(children)
        self._final_results = final_results
        self._max_records = max_records
        self._max_bytes = max_bytes
        self._emit_early = emit_early_when_full

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        if self._final_results:
            if not isinstance(key, Windowed):
                raise TypeError(f"suppress node '{self.name}' needs Windowed keys, got {type(key).__name__}")
            buffer_time = key.end
        else:
            buffer_time = timestamp
        self.observed_stream_time = max(self.observed_stream_time, timestamp)
        change = value if isinstance(value, Change) else Change(value, None)
        self._buffer.put(buffer_time, key, change.new_value, change.old_value, timestamp, self._context.headers)
        for update in self._buffer.evict_until(self.observed_stream_time - self.close_grace_ms):
            self._emit(update)
        if self._over_capacity():
            if not self._emit_early:
                raise SuppressionBufferFullError(
                    f"{self.name} buffer exceeded its max capacity. Currently "
                    f"[{self._buffer.num_records}/{_bound(self._max_records)}] records and "
                    f"[{self._buffer.size_bytes}/{_bound(self._max_bytes)}] bytes."
                )
            while self._over_capacity():
                evicted = self._buffer.evict_oldest()
                if evicted is None:
                    break
                self._emit(evicted)

    def _over_capacity(self) -> bool:
        return (self._max_records is not None and self._buffer.num_records > self._max_records) or (
            self._max_bytes is not None and self._buffer.size_bytes > self._max_bytes
        )

    def _emit(self, update: BufferedUpdate) -> None:
        if update.new_value is None and self._final_results:
            return  # safe to drop final tombstones (Kafka's FinalResultsSuppressionBuilder)
        self.emitted += 1
        forwarded = Change(update.new_value, update.prior_value)
        context = self._context
        current, context.headers = context.headers, update.headers  # the buffered record's (Kafka's)
        try:
            for child in self._children:
                child.process(update.key, forwarded, update.timestamp)
        finally:
            context.headers = current


def _bound(limit: int | None) -> int:
    return 2**63 - 1 if limit is None else limit  # Kafka prints Long.MAX_VALUE for an unbounded limit


@BUILDERS.builds(SuppressNode)
def build_suppress(node: SuppressNode, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    """The processor of a ``suppress`` node; for final results its close grace comes from the upstream windowed
    aggregation, for a time limit it is ``time_limit_ms``."""
    final_results = node.until == "window_closes"
    suppress_ms = ctx.close_grace(node.name) if final_results else node.time_limit_ms
    assert suppress_ms is not None
    return SuppressProcessor(
        node.name,
        ctx.suppression_buffer(node.store),
        suppress_ms,
        children,
        final_results=final_results,
        max_records=node.max_records,
        max_bytes=node.max_bytes,
        emit_early_when_full=node.when_full == "emit_early",
        record_context=ctx.record_context,
    )
