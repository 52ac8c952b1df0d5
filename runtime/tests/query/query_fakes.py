"""Fakes behind ``InteractiveQueries``' two seams (the stream threads' query pipes, the other instances) and a
router over a one-store count topology (``counts`` on topic ``events``, ``PARTITIONS`` partitions)."""

from __future__ import annotations

from typing import Any

from streamapp import StreamsBuilder
from streamapp.config import StreamsConfig
from streamapp.kafka.types import GroupDescription, GroupMember, TopicPartition
from streamapp.partitioner import partition_for_key
from streamapp.processing.queries import LocalQuery
from streamapp.query.requests import QueryResult, StateQueryRequest, StateQueryResult
from streamapp.query.router import InteractiveQueries

APP = "iq-app"
PARTITIONS = 2


class FakeThread:
    """A stream thread's query pipe: answers from ``held`` ``{partition: (source, value)}``."""

    def __init__(self, held: dict[int, tuple[str, Any]]) -> None:
        self.held = held
        self.asked: list[LocalQuery] = []

    def ask(self, request: LocalQuery, timeout_s: float) -> list[QueryResult]:
        self.asked.append(request)
        return [
            QueryResult(p, self.held[p][0], self.held[p][1], {"events": {p: 10}})
            for p in request.partitions
            if p in self.held
        ]


class FakeInstances:
    """The other instances' ``POST /query?local=true``, by endpoint."""

    def __init__(self, answers: dict[str, dict[int, tuple[str, Any]]]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, tuple[int, ...] | None]] = []

    def __call__(self, endpoint: str, request: StateQueryRequest, timeout_s: float) -> StateQueryResult:
        self.calls.append((endpoint, request.partitions))
        held = self.answers[endpoint]
        found = {
            p: QueryResult(p, held[p][0], held[p][1], {"events": {p: 5}}, endpoint) for p in request.partitions or ()
        }
        return StateQueryResult(request.store, {p: r for p, r in found.items() if p in held})


def member(instance: str, *partitions: int, endpoint: str | None = None) -> GroupMember:
    client = f"{APP}-{instance}-StreamThread-1-consumer" + (f"@{endpoint}" if endpoint else "")
    return GroupMember(client, None, tuple(TopicPartition("events", p) for p in partitions))


def router(
    threads: list[FakeThread], members: list[GroupMember], instances: FakeInstances, standbys: int = 0
) -> InteractiveQueries:
    config = StreamsConfig.from_mapping(
        {"application.id": APP, "bootstrap.servers": "x:9092", "num.standby.replicas": standbys}
    )
    return InteractiveQueries(
        counts_builder().build(config.to_mapping()),
        config,
        "me",
        channels=lambda: threads,  # type: ignore[arg-type, return-value]
        describe_group=lambda: GroupDescription("stable", tuple(members)),
        partition_counts=lambda topics: dict.fromkeys(topics, PARTITIONS),
        forward=instances,
    )


def counts_builder() -> StreamsBuilder:
    builder = StreamsBuilder()
    builder.stream("events", key_serde="string", value_serde="string", name="events").group_by_key().count(
        name="count", store="counts"
    )
    return builder


def key_on(partition: int) -> str:
    return next(k for k in (f"k{i}" for i in range(100)) if partition_for_key(k.encode(), PARTITIONS) == partition)
