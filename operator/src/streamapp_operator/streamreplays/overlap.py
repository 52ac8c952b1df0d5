"""Whether a backfill would write again what the live app already wrote (pure; issue 19, audit R19).

A backfill that writes a topic the running StreamApp writes, over input offsets the app's consumer group has
committed, produces that output a second time (every count of R19 appeared twice). Kafka Streams' committed offset
of a partition is the next record the app will process (``OffsetAndMetadata``): the records below it are processed
and their output written. Such a backfill needs ``spec.allowOverlap: true``; without it the replay fails with
:data:`RANGE_OVERLAPS_APP` before any topic or Job exists.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

#: The replay's reason when its range overlaps what the app processed and ``allowOverlap`` is not set.
RANGE_OVERLAPS_APP = "RangeOverlapsApp"
#: The Warning event's reason when ``allowOverlap: true`` lets such a backfill run.
OVERLAP_ALLOWED = "OverlapAllowed"

Offsets = Mapping[str, Mapping[int, int]]


@dataclass(frozen=True)
class Overlap:
    """The input offsets ``[start, end)`` of one partition that the replay reads and the app has processed."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def records(self) -> int:
        return self.end - self.start

    def __str__(self) -> str:
        return f"{self.topic}[{self.partition}] {self.start}-{self.end} ({self.records} records)"


def overlaps(start: Offsets, end: Offsets, committed: Offsets) -> list[Overlap]:
    """The part of the range ``[start, end)`` (per topic and partition, ``end`` exclusive) below the app group's
    committed offsets (``committed``: a partition without one was never processed), sorted by topic and partition;
    empty when the range starts at or after every committed offset."""
    found = []
    for topic, parts in sorted(start.items()):
        for partition, first in sorted(parts.items()):
            done = committed.get(topic, {}).get(partition)
            until = min(end.get(topic, {}).get(partition, first), done if done is not None else first)
            if until > first:
                found.append(Overlap(topic, partition, first, until))
    return found


@dataclass(frozen=True)
class Verdict:
    """``refused``: the replay fails with ``message``; otherwise ``message`` (when not empty) is a Warning event."""

    refused: bool
    message: str = ""


def verdict(app: str, group: str, found: Sequence[Overlap], shared: Sequence[str], allowed: bool) -> Verdict:
    """Refuse (or, with ``allowed``, warn about) a backfill that writes topics the app writes (``shared``) over input
    the app's consumer group ``group`` has committed (``found``, from :func:`overlaps`). A backfill into topics the
    app does not write rewrites nothing of it: no verdict."""
    if not found or not shared:
        return Verdict(refused=False)
    records = sum(o.records for o in found)
    what = (
        f"the range overlaps {records} records StreamApp {app} already processed (consumer group {group!r} "
        f"committed past them: {', '.join(str(o) for o in found)}), and the backfill writes "
        f"{', '.join(shared)}, which the app writes too: their output would be written there a second time"
    )
    if allowed:
        return Verdict(refused=False, message=f"{what}; allowOverlap: true, so the backfill runs")
    return Verdict(
        refused=True,
        message=f"{what}; set spec.allowOverlap: true to write it anyway, or start the range at the app's "
        "committed offsets",
    )
