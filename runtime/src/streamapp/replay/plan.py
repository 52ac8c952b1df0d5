"""The replay plan: what a replay reads, runs and writes, checked before any Spark job starts (pure, no I/O).

A ``ReplayPlan`` names the topology, the app config of the version the replay fills (its ``application.id``
names the changelog and repartition topics), explicit per-partition offset ranges ``[start, end)`` of every
external source topic (resolved beforehand: the replay never asks Kafka for "latest"), the partition counts
of the topics it writes, and a ``replay_id`` that keys its transactional writes (``streamapp.replay.output``).

``ReplayPlan.check`` refuses what the replay cannot run, naming the node or topic, before a job starts:
node types the replay does not support (``streamapp.replay.translate.UNSUPPORTED``), sinks whose topic a
function picks per record, sinks into a topic the topology reads, and offset ranges that do not cover every
partition.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from streamapp.replay.stages import replay_stages
from streamapp.replay.translate import UnsupportedTopologyError, check_supported
from streamapp.topology import SinkNode, TopologyDescription

__all__ = ["EMIT_EVERY_UPDATE", "EMIT_FINAL", "ReplayPlan"]

EMIT_EVERY_UPDATE = "every_update"
"""Every update of every aggregation reaches its sink: a streaming run with the record cache off (the default)."""
EMIT_FINAL = "final"
"""Each aggregation's sink gets the final value per key (and window) of each task only: what a streaming run whose
record cache flushes once, at the end, writes (Kafka Streams' record cache may hold back any intermediate
update; only the latest value per key is its contract). Only for sub-topologies that run Spark-native."""

Offsets = dict[str, dict[int, int]]
"""``{topic: {partition: offset}}``."""


@dataclass(frozen=True)
class ReplayPlan:
    """One replay (see the module docstring).

    ``config``: the new version's Kafka Streams config (``application.id`` required; exception handlers and
    serde settings apply as in the runtime). ``start_offsets`` / ``end_offsets``: per external source topic and
    partition, the first offset read and the offset after the last (Spark's ``endingOffsets``, exclusive).
    ``partitions``: partition count of every external topic the topology writes. ``write_repartition_topics``:
    also write the repartition records to Kafka (the replay feeds them from stage to stage in Spark; they are
    written only to inspect them). ``wall_clock_ms``: what processors read as wall-clock time.
    """

    description: TopologyDescription
    config: Mapping[str, Any]
    bootstrap_servers: str
    start_offsets: Offsets
    end_offsets: Offsets
    partitions: Mapping[str, int]
    replay_id: str
    write_repartition_topics: bool = False
    wall_clock_ms: int = 0
    kafka_settings: Mapping[str, str] = field(default_factory=dict)
    """Extra librdkafka client settings (e.g. SASL) for the reads and the writes."""
    emit: str = EMIT_EVERY_UPDATE
    """``EMIT_EVERY_UPDATE`` or ``EMIT_FINAL`` (see those)."""

    @property
    def application_id(self) -> str:
        return str(self.config["application.id"])

    def source_partitions(self) -> dict[str, int]:
        """Partition count of every external source topic (from the offset ranges)."""
        return {topic: len(offsets) for topic, offsets in self.end_offsets.items()}

    def topic_partitions(self) -> dict[str, int]:
        """Partition count of every topic the replay reads or writes: external sources and sinks, repartition
        and changelog topics (the counts the topology implies)."""
        sources = self.source_partitions()
        counts = {**sources, **self.partitions}
        for internal in self.description.internal_topics(self.application_id, sources):
            counts[internal.name] = internal.partitions
        return counts

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> ReplayPlan:
        """A plan from its document form (the replay job's input, e.g. a YAML file)::

            replayId: flights-v2-1
            bootstrapServers: kafka:9092
            topology: {nodes: [...], stores: [...]}     # a topology description document
            config: {application.id: flights-v2}        # the new version's Kafka Streams config
            from: {flights: {0: 0, 1: 0}}               # start offsets per topic and partition
            to: {flights: {0: 812, 1: 790}}             # end offsets (exclusive)
            partitions: {departures: 2}                 # sink topics' partition counts
            writeRepartitionTopics: false               # optional
            wallClockMs: 0                              # optional
            kafka: {security.protocol: SASL_SSL}        # optional client settings
            emit: every_update                          # optional: or final (EMIT_FINAL)

        Raises TopologyError, ValueError or KeyError (a missing field).
        """
        return cls(
            TopologyDescription.from_dict(document["topology"]),
            dict(document["config"]),
            str(document["bootstrapServers"]),
            _offsets(document["from"]),
            _offsets(document["to"]),
            {str(t): int(n) for t, n in (document.get("partitions") or {}).items()},
            str(document["replayId"]),
            write_repartition_topics=bool(document.get("writeRepartitionTopics", False)),
            wall_clock_ms=int(document.get("wallClockMs", 0)),
            kafka_settings={str(k): str(v) for k, v in (document.get("kafka") or {}).items()},
            emit=str(document.get("emit", EMIT_EVERY_UPDATE)),
        )

    def to_document(self) -> dict[str, Any]:
        """The document form (``from_document`` inverts it)."""
        return {
            "replayId": self.replay_id,
            "bootstrapServers": self.bootstrap_servers,
            "topology": self.description.to_dict(),
            "config": dict(self.config),
            "from": {t: dict(parts) for t, parts in self.start_offsets.items()},
            "to": {t: dict(parts) for t, parts in self.end_offsets.items()},
            "partitions": dict(self.partitions),
            "writeRepartitionTopics": self.write_repartition_topics,
            "wallClockMs": self.wall_clock_ms,
            "kafka": dict(self.kafka_settings),
            "emit": self.emit,
        }

    def check(self) -> ReplayPlan:
        """Raise UnsupportedTopologyError or ValueError when the replay cannot run this plan; return it."""
        if not self.config.get("application.id"):
            raise ValueError("replay plan: config needs 'application.id' (the new version's)")
        if not self.replay_id or not all(c.isalnum() or c in "-_." for c in self.replay_id):
            raise ValueError(f"replay plan: replay_id {self.replay_id!r} must be non-empty [A-Za-z0-9._-]")
        if self.emit not in (EMIT_EVERY_UPDATE, EMIT_FINAL):
            raise ValueError(f"replay plan: emit must be '{EMIT_EVERY_UPDATE}' or '{EMIT_FINAL}', got {self.emit!r}")
        check_topology(self.description)
        for topic in sorted(self.description.external_source_topics()):
            _check_range(topic, self.start_offsets.get(topic), self.end_offsets.get(topic))
        for topic in self.description.sink_topics():
            if self.partitions.get(topic, 0) < 1:
                raise ValueError(f"replay plan: partitions has no count for sink topic '{topic}'")
        self.description.internal_topics(self.application_id, self.source_partitions())  # co-partitioning
        return self


def check_topology(description: TopologyDescription) -> None:
    """Raise UnsupportedTopologyError naming the node or topic when the replay cannot run this topology, whatever
    the offsets: an unsupported node type, a sink whose topic is picked per record, a topic the topology both
    writes and reads, a cycle between sub-topologies other than a foreign-key join's (``streamapp.replay.stages``).
    Plain Python (no pyspark): the operator calls it before it launches a replay Job."""
    check_supported(description)
    check_sinks(description)
    replay_stages(description, "check")  # the application id only names the internal topics
    read = set(description.external_source_topics())
    for topic in description.sink_topics():
        if topic in read:
            raise UnsupportedTopologyError(
                f"topic '{topic}' is written and read by the topology; the replay reads a fixed offset range, "
                "so it cannot see its own writes"
            )


def check_sinks(description: TopologyDescription) -> None:
    """Raise UnsupportedTopologyError for a sink whose topic a function picks per record."""
    for node in description.nodes:
        if isinstance(node, SinkNode) and node.topic is None:
            raise UnsupportedTopologyError(
                f"node '{node.name}': the replay does not support a sink whose topic a topicExtractor picks per "
                "record (its topics and their partition counts are not known before the job)"
            )


def _offsets(raw: Mapping[str, Mapping[Any, Any]]) -> Offsets:
    return {str(topic): {int(p): int(o) for p, o in parts.items()} for topic, parts in raw.items()}


def _check_range(topic: str, start: Mapping[int, int] | None, end: Mapping[int, int] | None) -> None:
    if start is None or end is None:
        raise ValueError(f"replay plan: source topic '{topic}' needs start and end offsets")
    if set(start) != set(end) or set(end) != set(range(len(end))) or not end:
        raise ValueError(
            f"replay plan: topic '{topic}': start offsets {dict(start)} and end offsets {dict(end)} must name "
            "the same partitions 0..n-1"
        )
    for p in sorted(end):
        if not 0 <= start[p] <= end[p]:
            raise ValueError(
                f"replay plan: topic '{topic}' partition {p}: need 0 <= start <= end, got [{start[p]}, {end[p]})"
            )
