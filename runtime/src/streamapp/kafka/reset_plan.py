"""The application reset as a plan: Kafka's ``kafka-streams-application-reset`` (``StreamsResetter``) for StreamApp
applications, decided from plain data; ``TopicAdmin.execute_reset`` (``streamapp.kafka.admin``) carries it out.

What a reset does, in ``StreamsResetter``'s order:

1. Refuse while the consumer group ``<application.id>`` has members (``ActiveMembersError`` names them): the
   committed offsets of a live group cannot be changed, and a running instance would rewrite its state.
2. Set the group's committed offsets of every partition of the input topics to the target: ``ToEarliest``
   (each partition's earliest offset, the resetter's ``--to-earliest``, its default), ``ToDatetime`` (the first
   offset whose record timestamp is at or after the time, ``offsetsForTimes``; the end offset when none is),
   ``ToOffsets`` (explicit offsets, moved into ``[earliest, end]`` as the resetter's ``checkOffsetRange`` does;
   partitions not named go to the earliest offset).
3. Delete the application's internal topics: every topic named ``<application.id>-...-repartition`` or
   ``<application.id>-...-changelog`` (``StreamsResetter.isInternalTopic``); never an input topic, never another
   topic.
4. Optionally delete the local state ``<state.dir>/<application.id>`` (``KafkaStreams.cleanUp()``); the caller
   does this (it is not Kafka).

Pure: no I/O. Bad input raises ``ResetError`` (a ValueError) naming the topic, partition or member.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from streamapp.kafka.types import TopicPartition

__all__ = [
    "INTERNAL_TOPIC_SUFFIXES",
    "ActiveMembersError",
    "ResetError",
    "ResetPlan",
    "ResetTarget",
    "ToDatetime",
    "ToEarliest",
    "ToOffsets",
    "is_internal_topic",
    "offsets_to_commit",
    "parse_datetime",
    "parse_offsets",
    "plan_reset",
]

INTERNAL_TOPIC_SUFFIXES = ("-repartition", "-changelog")
"""The suffixes of the internal topics Kafka Streams (and StreamApp) creates."""


class ResetError(ValueError):
    """The reset cannot be planned as asked (unknown topic, offsets of a partition the inputs do not have...)."""


class ActiveMembersError(ResetError):
    """The application's consumer group still has members; ``members`` are their client ids."""

    def __init__(self, group_id: str, members: Sequence[str]) -> None:
        self.members = tuple(members)
        super().__init__(
            f"consumer group '{group_id}' has {len(members)} active member(s): {', '.join(members)}; stop every "
            "instance of the application (and wait for the group to be empty) before resetting it"
        )


@dataclass(frozen=True)
class ToEarliest:
    """Reset to each partition's earliest offset (``--to-earliest``)."""

    def describe(self) -> str:
        return "earliest"


@dataclass(frozen=True)
class ToDatetime:
    """Reset to the first offset whose timestamp is at or after ``at`` (timezone-aware; ``--to-datetime``)."""

    at: datetime

    def __post_init__(self) -> None:
        if self.at.tzinfo is None:
            raise ResetError(f"datetime {self.at.isoformat()} has no time zone; give an offset or Z (RFC 3339)")

    @property
    def timestamp_ms(self) -> int:
        """``at`` as milliseconds since the epoch (the record timestamp unit)."""
        return int(self.at.timestamp() * 1000)

    def describe(self) -> str:
        return f"datetime {self.at.isoformat()} ({self.timestamp_ms} ms)"


@dataclass(frozen=True)
class ToOffsets:
    """Reset the named partitions to explicit offsets (``--to-offsets``; others to the earliest offset)."""

    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)

    def describe(self) -> str:
        return "offsets " + ", ".join(f"{tp.topic}:{tp.partition}={o}" for tp, o in sorted(self.offsets.items()))


ResetTarget = ToEarliest | ToDatetime | ToOffsets


@dataclass(frozen=True)
class ResetPlan:
    """What a reset of ``application_id`` will do: the partitions whose committed offsets are reset to
    ``target``, the internal topics to delete, and the local state directory to delete (or ``None``)."""

    application_id: str
    partitions: tuple[TopicPartition, ...]
    target: ResetTarget
    internal_topics: tuple[str, ...]
    state_dir: Path | None = None

    @property
    def group_id(self) -> str:
        """The consumer group: ``application.id``."""
        return self.application_id

    def describe(self) -> str:
        """The plan as the lines ``--dry-run`` prints."""
        topics = sorted({tp.topic for tp in self.partitions})
        lines = [
            f"Reset of application '{self.application_id}' (consumer group '{self.group_id}'):",
            f"  reset committed offsets of {len(self.partitions)} partition(s) of {', '.join(topics) or '-'} "
            f"to {self.target.describe()}",
        ]
        if self.internal_topics:
            lines += ["  delete internal topics:", *(f"    {name}" for name in self.internal_topics)]
        else:
            lines.append("  delete internal topics: none found")
        if self.state_dir is not None:
            lines.append(f"  delete local state directory {self.state_dir}")
        return "\n".join(lines) + "\n"


def is_internal_topic(application_id: str, topic: str) -> bool:
    """True for ``<application_id>-<name>-repartition`` and ``<application_id>-<name>-changelog`` (Kafka's
    ``StreamsResetter.isInternalTopic``)."""
    prefix = f"{application_id}-"
    return topic.startswith(prefix) and len(topic) > len(prefix) and topic.endswith(INTERNAL_TOPIC_SUFFIXES)


def plan_reset(
    application_id: str,
    input_topics: Iterable[str],
    target: ResetTarget,
    *,
    topics: Mapping[str, int],
    members: Sequence[str] = (),
    state_dir: Path | None = None,
) -> ResetPlan:
    """The plan for resetting ``application_id`` over ``input_topics``.

    ``topics`` are the cluster's topics with their partition counts, ``members`` the client ids of the group's
    members, ``state_dir`` Kafka Streams' ``state.dir`` (the plan deletes ``<state_dir>/<application_id>``).
    An input topic is never deleted, even when its name looks internal. Raises ActiveMembersError when the
    group has members, ResetError when there are no input topics, for an input topic that does not exist, or
    for explicit offsets of a partition the input topics do not have.
    """
    if members:
        raise ActiveMembersError(application_id, members)
    inputs = list(dict.fromkeys(input_topics))
    if not inputs:
        raise ResetError("no input topics: name them (--input-topics) or give the topology (--topology)")
    missing = [t for t in inputs if t not in topics]
    if missing:
        raise ResetError(f"input topic(s) {', '.join(missing)} do not exist")
    partitions = tuple(TopicPartition(t, p) for t in inputs for p in range(topics[t]))
    if isinstance(target, ToOffsets):
        unknown = sorted(set(target.offsets) - set(partitions))
        if unknown:
            listed = ", ".join(f"{tp.topic}:{tp.partition}" for tp in unknown)
            raise ResetError(f"--to-offsets names {listed}, which is not a partition of the input topics")
    internal = tuple(sorted(t for t in topics if is_internal_topic(application_id, t) and t not in inputs))
    app_state = Path(state_dir) / application_id if state_dir is not None else None
    return ResetPlan(application_id, partitions, target, internal, app_state)


def offsets_to_commit(
    plan: ResetPlan,
    *,
    earliest: Mapping[TopicPartition, int],
    end: Mapping[TopicPartition, int],
    by_time: Mapping[TopicPartition, int | None] | None = None,
) -> dict[TopicPartition, int]:
    """The offset to commit for every partition of ``plan``, given each partition's ``earliest`` and ``end``
    offsets and, for ``ToDatetime``, the first offset at or after the time (``None`` / -1: no such record, so
    the end offset). Explicit offsets are moved into ``[earliest, end]``. Raises ResetError for a partition
    without watermarks (or without a time lookup for ``ToDatetime``)."""
    result: dict[TopicPartition, int] = {}
    for tp in plan.partitions:
        if tp not in earliest or tp not in end:
            raise ResetError(f"no earliest/end offsets of {tp.topic}:{tp.partition}")
        low, high = earliest[tp], end[tp]
        target = plan.target
        if isinstance(target, ToDatetime):
            if by_time is None or tp not in by_time:
                raise ResetError(f"no offset for the time of {tp.topic}:{tp.partition}")
            found = by_time[tp]
            result[tp] = high if found is None or found < 0 else found
        elif isinstance(target, ToOffsets) and tp in target.offsets:
            result[tp] = min(max(target.offsets[tp], low), high)
        else:
            result[tp] = low
    return result


def parse_datetime(text: str) -> ToDatetime:
    """``ToDatetime`` of an RFC 3339 time (``2026-11-24T20:00:00Z``, ``...+01:00``, fractions allowed); ResetError
    for another shape or a time without a zone."""
    try:
        at = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ResetError(f"'{text}' is not an RFC 3339 time such as 2026-11-24T20:00:00Z") from None
    return ToDatetime(at)


def parse_offsets(text: str) -> ToOffsets:
    """``ToOffsets`` of ``topic:partition=offset,...``; ResetError naming the item for another shape, a negative
    partition or offset, or a partition named twice."""
    offsets: dict[TopicPartition, int] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        where, sep, offset_text = item.rpartition("=")
        topic, colon, partition_text = where.rpartition(":")
        try:
            partition, offset = int(partition_text), int(offset_text)
        except ValueError:
            partition = offset = -1
        if not sep or not colon or not topic or partition < 0 or offset < 0:
            raise ResetError(f"'{item}' is not topic:partition=offset (partition and offset >= 0)")
        tp = TopicPartition(topic, partition)
        if tp in offsets:
            raise ResetError(f"{topic}:{partition} is named twice")
        offsets[tp] = offset
    if not offsets:
        raise ResetError("--to-offsets needs at least one topic:partition=offset")
    return ToOffsets(offsets)
