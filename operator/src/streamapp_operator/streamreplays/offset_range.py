"""The replay's offset range: explicit per-partition ``[from, to)`` offsets from the spec's positions and what
Kafka answered (earliest, latest, offsets for a timestamp; the consumer's ``ListOffsets``). Pure.

The replay never asks Spark for "latest": the end offsets are resolved here, recorded in
``status.resolvedOffsets`` before the Job exists, and are the new version's starting point (handover).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from streamapp_operator.streamreplays.resources import (
    PerPartition,
    ReplayFrom,
    ReplayTo,
)

Offsets = dict[str, dict[int, int]]


"""``{topic: {partition: offset}}``."""


class RangeError(ValueError):
    """The spec's range does not fit the topics (a partition missing, an offset out of the retained range)."""


@dataclass(frozen=True)
class KafkaPositions:
    """What Kafka answered for the input topics: earliest and latest offsets of every partition, and the
    offsets of the first record at or after ``from``/``to`` timestamps (-1: none, i.e. the end)."""

    earliest: Offsets
    latest: Offsets
    from_time: Offsets | None = None
    to_time: Offsets | None = None


def timestamp_ms(instant: str) -> int:
    """Milliseconds since the epoch of an RFC 3339 instant."""
    return int(datetime.fromisoformat(instant.replace("Z", "+00:00")).timestamp() * 1000)


def resolve_range(start: ReplayFrom, end: ReplayTo, kafka: KafkaPositions) -> tuple[Offsets, Offsets]:
    """``(from, to)`` per topic and partition; raises RangeError naming the topic and partition."""
    first = _position(_Asked(start.earliest, start.offsets, kafka.from_time, kafka.earliest), kafka, "from")
    last = _position(_Asked(None if end.now is None else True, end.offsets, kafka.to_time, kafka.latest), kafka, "to")
    for topic, parts in first.items():
        for p, offset in parts.items():
            if offset > last[topic][p]:
                raise RangeError(f"topic '{topic}' partition {p}: from {offset} is after to {last[topic][p]}")
    return first, last


@dataclass(frozen=True)
class _Asked:
    """One end of the range as the spec asks it: the whole retained range (``whole``), explicit ``offsets``, the
    ``by_time`` offsets Kafka found for an instant, else ``default`` (earliest or latest)."""

    whole: bool | None
    offsets: PerPartition | None
    by_time: Offsets | None
    default: Offsets


def _position(asked: _Asked, kafka: KafkaPositions, which: str) -> Offsets:
    whole, offsets, by_time, default = asked.whole, asked.offsets, asked.by_time, asked.default
    if offsets is not None:
        given = {t: {int(p): int(o) for p, o in parts.items()} for t, parts in offsets.items()}
        resolved: Offsets = {}
        for topic, parts in kafka.latest.items():
            if set(given.get(topic, {})) != set(parts):
                raise RangeError(
                    f"{which}.offsets: topic '{topic}' needs an offset for each of partitions "
                    f"{sorted(parts)}, got {sorted(given.get(topic, {}))}"
                )
            for p, offset in given[topic].items():
                low, high = kafka.earliest[topic][p], parts[p]
                if not low <= offset <= high:
                    raise RangeError(
                        f"{which}.offsets: topic '{topic}' partition {p}: {offset} is outside the retained "
                        f"range [{low}, {high}]"
                    )
            resolved[topic] = dict(sorted(given[topic].items()))
        unknown = sorted(set(given) - set(kafka.latest))
        if unknown:
            raise RangeError(f"{which}.offsets: {', '.join(unknown)} is not an input topic of the app")
        return resolved
    if by_time is not None and not whole:
        return {
            topic: {p: kafka.latest[topic][p] if o < 0 else o for p, o in sorted(parts.items())}
            for topic, parts in by_time.items()
        }
    return {topic: dict(sorted(parts.items())) for topic, parts in default.items()}


def to_wire(offsets: Offsets) -> PerPartition:
    """Offsets with string partition keys (status, JSON)."""
    return {t: {str(p): o for p, o in sorted(parts.items())} for t, parts in sorted(offsets.items())}


def from_wire(offsets: Mapping[str, Mapping[str, int]]) -> Offsets:
    return {t: {int(p): int(o) for p, o in parts.items()} for t, parts in offsets.items()}
