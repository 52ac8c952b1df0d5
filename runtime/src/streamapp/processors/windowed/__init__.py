"""The ``windowed`` family's processors: windowed aggregations (time, sliding and session windows) and
``suppress``.

Each processor receives ``(key, value, timestamp)`` records of a grouped stream and forwards
``(Windowed(key, start, end), Change(new aggregate, old aggregate), timestamp)`` for every window it updates, or,
behind the record cache (``statestore.cache.max.bytes`` > 0, docs/record-cache.md), leaves forwarding to the
cache's flush (Kafka's caching window and session stores with their flush listeners).
Stream time is the largest timestamp the processor has seen (Kafka's per-processor ``observedStreamTime``, one
per task); a record whose window is closed (see ``streamapp.topology.windows``) is dropped, counted in the
task's dropped records under reason ``late`` (Kafka's ``dropped-records`` sensor) and logged, rate-limited, with
its topic, partition, offset, window and stream time (``streamapp.processors.drops``). Records with a negative
timestamp are dropped too (``invalid_timestamp``; Kafka's timestamp extractors refuse them before they reach a
processor). Each record's lateness behind the observed stream time is recorded (Kafka's ``record-lateness``).

Count and reduce are aggregates (Kafka's ``GroupedStreamAggregateBuilder``): count = ``(0, agg + 1, a + b)``;
reduce = ``(None, value if agg is None else reducer(agg, value), ...)``.

The modules by window kind: ``time_windows`` (tumbling and hopping), ``sliding``, ``session`` (what they share:
``base``), the builder of the aggregation nodes (``aggregate``), and ``suppress``.
"""

from __future__ import annotations

from streamapp.processors.base import FamilyBuilders
from streamapp.processors.windowed import aggregate, suppress
from streamapp.processors.windowed.session import SessionWindowAggregateProcessor
from streamapp.processors.windowed.sliding import SlidingWindowAggregateProcessor
from streamapp.processors.windowed.suppress import SuppressionBufferFullError, SuppressProcessor
from streamapp.processors.windowed.time_windows import TimeWindowAggregateProcessor

__all__ = [
    "BUILDERS",
    "SessionWindowAggregateProcessor",
    "SlidingWindowAggregateProcessor",
    "SuppressProcessor",
    "SuppressionBufferFullError",
    "TimeWindowAggregateProcessor",
]

BUILDERS = FamilyBuilders("windowed", aggregate.BUILDERS, suppress.BUILDERS)
