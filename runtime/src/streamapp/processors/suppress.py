"""``suppress(until_window_closes)``: forward only the final result of each window.

Kafka Streams' ``KTableSuppressProcessor`` with ``Suppressed.untilWindowCloses(unbounded())``: every update of
the windowed table goes into a ``SuppressionBuffer`` at buffer time = the window's end; after each record the
processor forwards (oldest window end first) every buffered update with ``end <= streamTime - closeGrace``,
where stream time is the largest record timestamp it has seen and ``closeGrace`` the upstream window's grace
(plus the gap for session windows). A forwarded record is ``(Windowed key, Change(new, prior), timestamp of the
last update)``; final tombstones (a session merged away) are not forwarded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from streamapp.processors.base import BuildContext, Change, Processor
from streamapp.state.suppression_buffer import SuppressionBuffer
from streamapp.topology.nodes.base import NodeBase
from streamapp.topology.nodes.windowed import SuppressNode
from streamapp.windowed import Windowed

__all__ = ["SuppressProcessor", "build_suppress"]


class SuppressProcessor:
    """Buffers windowed-table updates and forwards final results when their window closes.

    Raises TypeError for a key that is not ``Windowed`` (suppress follows a windowed aggregation).
    """

    def __init__(
        self, name: str, buffer: SuppressionBuffer, close_grace_ms: int, children: Sequence[Processor]
    ) -> None:
        self.name = name
        self.close_grace_ms = close_grace_ms
        self.observed_stream_time = -1
        """Largest record timestamp seen (ms), -1 before the first record."""
        self.emitted = 0
        """Final results forwarded (Kafka's ``suppression-emit-total``)."""
        self._buffer = buffer
        self._children = tuple(children)

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        if not isinstance(key, Windowed):
            raise TypeError(f"suppress node '{self.name}' needs Windowed keys, got {type(key).__name__}")
        self.observed_stream_time = max(self.observed_stream_time, timestamp)
        change = value if isinstance(value, Change) else Change(value, None)
        self._buffer.put(key.end, key, change.new_value, change.old_value, timestamp)
        for update in self._buffer.evict_until(self.observed_stream_time - self.close_grace_ms):
            if update.new_value is None:
                continue  # safe to drop final tombstones (Kafka's FinalResultsSuppressionBuilder)
            self.emitted += 1
            forwarded = Change(update.new_value, update.prior_value)
            for child in self._children:
                child.process(update.key, forwarded, update.timestamp)


def build_suppress(node: NodeBase, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    """The processor of a ``suppress`` node; its close grace comes from the upstream windowed aggregation."""
    assert isinstance(node, SuppressNode)
    return SuppressProcessor(node.name, ctx.suppression_buffer(node.store), ctx.close_grace(node.name), children)
