"""Which instance holds which task, and where to reach it: Kafka Streams' ``StreamsMetadata`` and
``KeyQueryMetadata`` (``KafkaStreams#metadataForAllStreamsClients``, ``KafkaStreams#queryMetadataForKey``).

Computed by every instance from the same inputs, like the standby placement (``streamapp.processing.standby``):
the consumer group's description (each member's client id names its instance, stream thread and advertised
``application.server``, ``streamapp.kafka.types.parse_member_endpoint``; its assignment names its active tasks)
and ``num.standby.replicas`` (``plan_standbys`` places the standbys). A key's partition is the default
partitioner's (murmur2) over the key serialized by the store's key serde, the partition the key's records are
processed in (Kafka's ``KafkaStreams#queryMetadataForKey`` with the default ``StreamPartitioner``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from streamapp.kafka.types import GroupDescription, parse_member_endpoint
from streamapp.processing.standby import MemberRef, plan_standbys
from streamapp.processing.task_id import TaskId

__all__ = ["Assignment", "KeyQueryMetadata", "StreamsMetadata", "assignment_of"]


@dataclass(frozen=True)
class StreamsMetadata:
    """One instance (``org.apache.kafka.streams.StreamsMetadata``): its ``application.server`` (``endpoint``,
    ``host:port`` or ``None`` when it advertises none) and the partitions of each store it holds active and
    standby (``{store: [partition, ...]}``)."""

    instance: str
    endpoint: str | None
    stores: dict[str, list[int]] = field(default_factory=dict)
    standby_stores: dict[str, list[int]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "instance": self.instance,
            "endpoint": self.endpoint,
            "stores": self.stores,
            "standby_stores": self.standby_stores,
        }


@dataclass(frozen=True)
class KeyQueryMetadata:
    """``org.apache.kafka.streams.KeyQueryMetadata``: the key's ``partition``, the instance holding its task
    active (``active``, ``None`` while no member owns it) and those holding standbys, each as ``(instance,
    endpoint)``."""

    partition: int
    active: tuple[str, str | None] | None
    standbys: tuple[tuple[str, str | None], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        def host(ref: tuple[str, str | None]) -> dict[str, Any]:
            return {"instance": ref[0], "endpoint": ref[1]}

        return {
            "partition": self.partition,
            "active": host(self.active) if self.active else None,
            "standbys": [host(ref) for ref in self.standbys],
        }


@dataclass(frozen=True)
class Assignment:
    """The group's tasks: the active owner and the planned standbys of each task, and each instance's
    advertised endpoint (``None``: it sets no ``application.server``)."""

    owners: dict[TaskId, MemberRef]
    standbys: dict[TaskId, list[MemberRef]]
    endpoints: dict[str, str | None]

    def key_metadata(self, task: TaskId) -> KeyQueryMetadata:
        owner = self.owners.get(task)
        return KeyQueryMetadata(
            task.partition,
            (owner.instance, self.endpoints.get(owner.instance)) if owner else None,
            tuple((m.instance, self.endpoints.get(m.instance)) for m in self.standbys.get(task, [])),
        )

    def instances_metadata(self, stores_of: Mapping[int, Iterable[str]]) -> list[StreamsMetadata]:
        """Every instance's ``StreamsMetadata``; ``stores_of``: the store names of each sub-topology."""
        active: dict[str, dict[str, set[int]]] = {instance: {} for instance in self.endpoints}
        standby: dict[str, dict[str, set[int]]] = {instance: {} for instance in self.endpoints}
        for task, owner in self.owners.items():
            for store in stores_of.get(task.subtopology, ()):
                active.setdefault(owner.instance, {}).setdefault(store, set()).add(task.partition)
        for task, members in self.standbys.items():
            for member in members:
                for store in stores_of.get(task.subtopology, ()):
                    standby.setdefault(member.instance, {}).setdefault(store, set()).add(task.partition)
        return [
            StreamsMetadata(
                instance,
                self.endpoints.get(instance),
                {s: sorted(p) for s, p in sorted(active.get(instance, {}).items())},
                {s: sorted(p) for s, p in sorted(standby.get(instance, {}).items())},
            )
            for instance in sorted(self.endpoints)
        ]


def assignment_of(
    application_id: str,
    group: GroupDescription,
    topic_subtopologies: Mapping[str, int],
    stateful: Iterable[int],
    replicas: int,
) -> Assignment:
    """The ``Assignment`` the group description implies (module docstring); members whose client id is not a
    stream thread's are ignored. ``topic_subtopologies``: the sub-topology reading each source topic;
    ``stateful``: the sub-topologies with stores; ``replicas``: ``num.standby.replicas``."""
    stateful = set(stateful)
    owners: dict[TaskId, MemberRef] = {}
    members: list[MemberRef] = []
    endpoints: dict[str, str | None] = {}
    for member in group.members:
        parsed = parse_member_endpoint(application_id, member.client_id)
        if parsed is None:
            continue
        ref = MemberRef(parsed[0], parsed[1])
        members.append(ref)
        endpoints[ref.instance] = endpoints.get(ref.instance) or parsed[2]
        for tp in member.partitions:
            subtopology = topic_subtopologies.get(tp.topic)
            if subtopology is not None:
                owners[TaskId(subtopology, tp.partition)] = ref
    stateful_owners = {task: owner for task, owner in owners.items() if task.subtopology in stateful}
    # the very inputs the stream threads' StandbyManager gives plan_standbys, so both place the same standbys
    standbys = plan_standbys(stateful_owners, members, stateful_owners, replicas) if replicas > 0 else {}
    return Assignment(owners, standbys, endpoints)
