"""Partition counts of sub-topologies and the internal topics they need.

Rules (Kafka Streams' ``RepartitionTopics`` / ``ChangelogTopics``):

- A sub-topology has one task per partition of its source topics, which must all have the same partition
  count (co-partitioning: task ``<subtopology>_<p>`` reads partition ``p`` of each of them).
- A repartition topic has the node's ``partitions`` if set. Otherwise, when the sub-topology that reads it
  also reads external topics (a join or merge with a topic), it takes their partition count, so both sides
  of the join are co-partitioned (Kafka's ``CopartitionedTopicsEnforcer``); else, when that sub-topology's
  other repartition topics set ``partitions``, it takes theirs; else the maximum partition count of the
  source topics of the sub-topology that writes it (recursively through upstream repartition topics).
- A changelog topic has one partition per task of the sub-topology that owns the store. A global store
  (owned by a ``global_table`` node, in no sub-topology) has no changelog: its topic is its changelog.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict

from streamapp.topology.errors import TopologyError
from streamapp.topology.nodes.base import changelog_topic_suffix
from streamapp.topology.nodes.io import RepartitionNode
from streamapp.topology.stores import StoreSpec
from streamapp.topology.subtopologies import Subtopology, TopicRef

REPARTITION_TOPIC_CONFIG: dict[str, str] = {"cleanup.policy": "delete", "retention.ms": "-1"}
"""Kafka Streams' ``RepartitionTopicConfig``: never expire by time. Records keep their event time, so with
historical data (timestamps older than the broker's ``log.retention.ms``) time retention would delete them
before the downstream sub-topology reads them."""
CHANGELOG_TOPIC_CONFIG: dict[str, str] = {"cleanup.policy": "compact"}


class InternalTopic(BaseModel):
    """A topic the application needs besides its external topics, with its partition count and configs."""

    model_config = ConfigDict(frozen=True)

    name: str
    partitions: int
    config: dict[str, str]


class PartitionCounts:
    """Partition counts of every topic of a topology, given those of its external source topics."""

    def __init__(
        self,
        subtopologies: Sequence[Subtopology],
        repartitions: Mapping[str, RepartitionNode],
        external: Mapping[str, int],
    ) -> None:
        self._subtopologies = subtopologies
        self._external = external
        self._by_suffix = {node.topic_suffix: node for node in repartitions.values()}
        self._writer = {ref.name: sub for sub in subtopologies for ref in sub.sink_topics if ref.internal}
        self._reader = {ref.name: sub for sub in subtopologies for ref in sub.source_topics if ref.internal}
        self._resolved: dict[str, int] = {}
        self._resolving: set[str] = set()

    def topic(self, ref: TopicRef) -> int:
        """Partition count of a source or repartition topic; TopologyError when it cannot be known."""
        if not ref.internal:
            count = self._external.get(ref.name)
            if count is None:
                raise TopologyError(f"topic '{ref.name}': partition count unknown (topic missing?)")
            if count < 1:
                raise TopologyError(f"topic '{ref.name}': partition count must be at least 1, got {count}")
            return count
        return self._repartition(ref.name)

    def _repartition(self, suffix: str) -> int:
        if suffix in self._resolved:
            return self._resolved[suffix]
        node = self._by_suffix[suffix]
        if node.partitions is not None:
            count = node.partitions
        else:
            reader = self._reader.get(suffix)
            group = reader.source_topics if reader is not None else [TopicRef(name=suffix, internal=True)]
            external = [ref for ref in group if not ref.internal]
            enforced = [
                self._by_suffix[ref.name].partitions
                for ref in group
                if ref.internal and self._by_suffix[ref.name].partitions is not None
            ]
            if external:
                count = max(self.topic(ref) for ref in external)
            elif enforced:
                count = max(p for p in enforced if p is not None)
            else:
                count = max(self._upstream(ref.name) for ref in group)
        self._resolved[suffix] = count
        return count

    def _upstream(self, suffix: str) -> int:
        """The maximum partition count of the source topics of the sub-topology writing ``suffix``."""
        node = self._by_suffix[suffix]
        if suffix in self._resolving:
            raise TopologyError(
                f"node '{node.name}': partition count of repartition topic '{suffix}' depends on "
                "itself; set partitions on the node"
            )
        self._resolving.add(suffix)
        try:
            return max(self.topic(src) for src in self._writer[suffix].source_topics)
        finally:
            self._resolving.discard(suffix)

    def tasks(self, sub: Subtopology) -> int:
        """The task count of a sub-topology; TopologyError when its source topics are not co-partitioned."""
        counts = {ref.name: self.topic(ref) for ref in sub.source_topics}
        if len(set(counts.values())) > 1:
            listed = ", ".join(f"'{name}' ({n})" for name, n in counts.items())
            raise TopologyError(
                f"sub-topology {sub.id}: source topics are not co-partitioned: {listed}; "
                "every source topic of a sub-topology needs the same partition count"
            )
        return next(iter(counts.values()))


def internal_topics(
    application_id: str,
    subtopologies: Sequence[Subtopology],
    repartitions: Mapping[str, RepartitionNode],
    stores: Sequence[StoreSpec],
    counts: PartitionCounts,
) -> list[InternalTopic]:
    """Repartition topics (in node order), then changelog topics (in store order), resolved by app id."""
    topics = [
        InternalTopic(
            name=f"{application_id}-{node.topic_suffix}",
            partitions=counts.topic(TopicRef(name=node.topic_suffix, internal=True)),
            config=dict(REPARTITION_TOPIC_CONFIG),
        )
        for node in repartitions.values()
    ]
    for sub in subtopologies:
        counts.tasks(sub)  # co-partitioning holds everywhere, not only where stores live
    owner = {store: sub for sub in subtopologies for store in sub.stores}
    for store in stores:
        if store.name not in owner:
            continue  # a global store (validation guarantees every other store has an owner)
        topics.append(
            InternalTopic(
                name=f"{application_id}-{changelog_topic_suffix(store.name)}",
                partitions=counts.tasks(owner[store.name]),
                config=changelog_topic_config(store),
            )
        )
    return topics


WINDOWED_CHANGELOG_ADDITIONAL_RETENTION_MS = 86_400_000
"""Kafka's ``windowstore.changelog.additional.retention.ms`` default: one day on top of the store's retention."""


VERSIONED_CHANGELOG_ADDITIONAL_COMPACTION_LAG_MS = 86_400_000
"""Kafka's ``VersionedChangelogTopicConfig`` lag added to a versioned store's history retention: one day."""


def changelog_topic_config(store: StoreSpec) -> dict[str, str]:
    """Topic configs of a store's changelog: ``compact`` for key-value stores; ``compact,delete`` with
    ``retention.ms`` = retention + 1 day for window and session stores (Kafka's ``WindowedChangelogTopicConfig``);
    ``compact`` with ``min.compaction.lag.ms`` = history retention + 1 day for versioned stores (Kafka's
    ``VersionedChangelogTopicConfig``: older versions stay in the changelog as long as the store may read them)."""
    if store.type == "versioned" and store.history_retention_ms is not None:
        lag = store.history_retention_ms + VERSIONED_CHANGELOG_ADDITIONAL_COMPACTION_LAG_MS
        return {**CHANGELOG_TOPIC_CONFIG, "min.compaction.lag.ms": str(lag)}
    if store.type == "key_value" or store.retention_ms is None:
        return dict(CHANGELOG_TOPIC_CONFIG)
    retention = store.retention_ms + WINDOWED_CHANGELOG_ADDITIONAL_RETENTION_MS
    return {"cleanup.policy": "compact,delete", "retention.ms": str(retention)}
