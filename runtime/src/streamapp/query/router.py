"""Answers an interactive query for the whole application, from any instance (Kafka Streams' IQv2
``KafkaStreams#query`` plus the forwarding an application builds on ``queryMetadataForKey``).

``InteractiveQueries.query(request)``:

1. checks the request against the topology: an unknown store is ``QueryError`` 404; a store of another type
   than the query reads (``KeyQuery`` / ``RangeQuery``: ``key_value``; ``WindowKeyQuery`` / ``WindowRangeQuery``:
   ``window``), a global store, or a key (or bound) the store's key serde refuses is ``QueryError`` 400;
2. picks the partitions: the request's, else the key's partition (key queries) or every partition;
3. asks each partition's active owner (``streamapp.query.metadata``, refreshed from the group description at
   most every ``GROUP_TTL_S``): its own stream threads over their query pipes (``streamapp.query.channel``), or
   the owning instance's ``POST /query?local=true`` at its ``application.server``;
4. for a partition whose owner gave no answer from a running active task (it restores, or the task is moving),
   asks the instances that hold its standbys;
5. keeps per partition the best answer (a running active task, else a standby, else a restoring task) that meets
   ``require_active`` and the ``PositionBound``; otherwise the partition fails with ``NOT_ACTIVE``,
   ``NOT_UP_TO_BOUND`` or ``NOT_PRESENT`` (``streamapp.query.requests.FailureReason``). A standby's or a restoring
   task's answer is labelled (``source``, ``stale``), never passed off as a fresh one.

``query_local`` answers from this instance's stream threads only (what a forwarded request runs).
"""

from __future__ import annotations

import base64
import json
import logging
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from streamapp.config import StreamsConfig
from streamapp.kafka.types import GroupDescription, KafkaClientError
from streamapp.partitioner import partition_for_key
from streamapp.processing.queries import LocalQuery
from streamapp.processing.task_id import TaskId
from streamapp.query.channel import QueryChannel, QueryTimeoutError, WorkerQueryError
from streamapp.query.metadata import Assignment, KeyQueryMetadata, StreamsMetadata, assignment_of
from streamapp.query.requests import (
    FailureReason,
    KeyQuery,
    QueryError,
    QueryResult,
    RangeQuery,
    StateQueryRequest,
    StateQueryResult,
    WindowKeyQuery,
    store_type_of,
)
from streamapp.serdes import Serde, serde_for
from streamapp.topology import TopologyDescription

__all__ = ["GROUP_TTL_S", "QUERY_TIMEOUT_S", "InteractiveQueries", "http_forward", "to_json"]

log = logging.getLogger(__name__)

GROUP_TTL_S = 0.5
"""How long a described group's assignment is reused before the group is described again."""
QUERY_TIMEOUT_S = 5.0
"""How long a stream thread, or a forwarded instance, gets to answer."""

_RANK = {"active": 0, "standby": 1, "restoring": 2}
"""Which answer wins for one partition: fresh first, then the standby (kept current from the changelog), then a
task still restoring."""

Forward = Callable[[str, StateQueryRequest, float], StateQueryResult]
"""``forward(endpoint, request, timeout_s)``: another instance's ``query_local`` answer (``http_forward``)."""


@dataclass(frozen=True)
class _Store:
    name: str
    subtopology: int
    source_topic: str
    key_serde: Serde


class InteractiveQueries:
    """One instance's query entry point (see the module docstring).

    ``instance``: this instance's name in the client ids; ``channels()``: the query pipes of its live stream
    threads; ``describe_group()``: the application's consumer group; ``partition_counts(topics)``: the topics'
    partition counts; ``running()``: whether the instance runs (else queries fail with 503); ``forward``: asks
    another instance (default ``http_forward``).
    """

    def __init__(
        self,
        description: TopologyDescription,
        config: StreamsConfig,
        instance: str,
        *,
        channels: Callable[[], Sequence[QueryChannel]],
        describe_group: Callable[[], GroupDescription],
        partition_counts: Callable[[list[str]], Mapping[str, int]],
        running: Callable[[], bool] = lambda: True,
        forward: Forward | None = None,
        timeout_s: float = QUERY_TIMEOUT_S,
    ) -> None:
        self.instance = instance
        self._description = description
        self._config = config
        self._channels = channels
        self._describe_group = describe_group
        self._partition_counts = partition_counts
        self._running = running
        self._forward = forward or http_forward
        self._timeout_s = timeout_s
        self._topics: dict[str, int] = {}
        self._stores_of: dict[int, list[str]] = {}
        for sub in description.subtopologies():
            self._stores_of[sub.id] = list(sub.stores)
            for ref in sub.source_topics:
                self._topics[ref.resolve(config.application_id)] = sub.id
        self._counts: dict[str, int] = {}
        self._assignment: tuple[float, Assignment] | None = None

    # -- public ------------------------------------------------------------------------------------

    def query(self, request: StateQueryRequest) -> StateQueryResult:
        """The whole application's answer (module docstring). Raises QueryError for a bad request (or 503 when
        the instance does not run)."""
        store = self._resolve(request)
        partitions = self._partitions(store, request)
        assignment = self._current_assignment()
        answers: dict[int, list[QueryResult]] = {p: [] for p in partitions}
        owners: dict[str, list[int]] = {}
        for p in partitions:
            owner = assignment.owners.get(TaskId(store.subtopology, p))
            if owner is not None:
                owners.setdefault(owner.instance, []).append(p)
        self._ask_each(owners, store, request, assignment, answers)
        if not request.require_active:
            standbys: dict[str, list[int]] = {}
            for p in partitions:
                if any(a.source == "active" for a in answers[p]):
                    continue
                for member in assignment.standbys.get(TaskId(store.subtopology, p), []):
                    standbys.setdefault(member.instance, []).append(p)
            self._ask_each(standbys, store, request, assignment, answers)
        return StateQueryResult(store.name, {p: _choose(p, answers[p], request) for p in partitions})

    def query_local(self, request: StateQueryRequest) -> StateQueryResult:
        """This instance's stream threads' answers only (a forwarded request); a partition they do not hold fails
        with ``NOT_PRESENT``."""
        store = self._resolve(request)
        partitions = self._partitions(store, request)
        found = self._ask_local(store, request, partitions)
        return StateQueryResult(store.name, {p: _choose(p, found.get(p, []), request) for p in partitions})

    def query_metadata_for_key(self, store_name: str, key: Any) -> KeyQueryMetadata:
        """``KafkaStreams#queryMetadataForKey``: the key's partition and who holds its task (active, standbys).
        QueryError for an unknown store or a key its key serde refuses."""
        store = self._resolve(StateQueryRequest(store_name, KeyQuery(key)), check_type=False)
        partition = self._key_partition(store, key)
        return self._current_assignment().key_metadata(TaskId(store.subtopology, partition))

    def metadata_for_all_clients(self) -> list[StreamsMetadata]:
        """``KafkaStreams#metadataForAllStreamsClients``: every instance with the store partitions it holds."""
        return self._current_assignment().instances_metadata(self._stores_of)

    # -- steps -------------------------------------------------------------------------------------

    def _resolve(self, request: StateQueryRequest, check_type: bool = True) -> _Store:
        if not self._running():
            raise QueryError("the instance is not running yet (or any more)", status=503)
        try:
            spec = self._description.store(request.store)
        except KeyError:
            known = ", ".join(sorted(s.name for s in self._description.stores)) or "none"
            raise QueryError(f"unknown store '{request.store}' (stores: {known})", status=404) from None
        subtopology = next((sid for sid, names in self._stores_of.items() if request.store in names), None)
        if subtopology is None or not any(s == subtopology for s in self._topics.values()):
            raise QueryError(f"store '{request.store}' is a global store: read it on any instance's tables")
        if check_type and spec.type != store_type_of(request.query):
            raise QueryError(
                f"store '{request.store}' is a {spec.type} store; a {type(request.query).__name__} needs a "
                f"{store_type_of(request.query)} store"
            )
        topic = self._description.changelog_topic(self._config.application_id, spec.name)
        source = min(t for t, s in self._topics.items() if s == subtopology)
        store = _Store(spec.name, subtopology, source, serde_for(spec.key_serde, topic, is_key=True))
        for key in _keys(request):
            _serialize(store, key)  # a key of the wrong type is the caller's error, found before any routing
        return store

    def _partitions(self, store: _Store, request: StateQueryRequest) -> list[int]:
        count = self._partition_count(store)
        if request.partitions is not None:
            bad = [p for p in request.partitions if p >= count]
            if bad:
                raise QueryError(f"store '{store.name}' has partitions 0..{count - 1}, not {bad}")
            return sorted(set(request.partitions))
        query = request.query
        if isinstance(query, (KeyQuery, WindowKeyQuery)):
            return [self._key_partition(store, query.key)]
        return list(range(count))

    def _key_partition(self, store: _Store, key: Any) -> int:
        return partition_for_key(_serialize(store, key), self._partition_count(store))

    def _partition_count(self, store: _Store) -> int:
        count = self._counts.get(store.source_topic)
        if count is None:
            try:
                count = self._partition_counts([store.source_topic]).get(store.source_topic)
            except KafkaClientError as exc:
                raise QueryError(f"cannot read the partition count of {store.source_topic}: {exc}", 503) from exc
            if not count:
                raise QueryError(f"topic {store.source_topic} does not exist", status=503)
            self._counts[store.source_topic] = count
        return count

    def _current_assignment(self) -> Assignment:
        now = time.monotonic()
        if self._assignment is None or now - self._assignment[0] >= GROUP_TTL_S:
            try:
                group = self._describe_group()
            except KafkaClientError as exc:
                raise QueryError(f"cannot describe the application's group: {exc}", status=503) from exc
            stateful = [sid for sid, names in self._stores_of.items() if names]
            assignment = assignment_of(
                self._config.application_id, group, self._topics, stateful, self._config.num_standby_replicas
            )
            self._assignment = (now, assignment)
        return self._assignment[1]

    def _ask_each(
        self,
        by_instance: Mapping[str, list[int]],
        store: _Store,
        request: StateQueryRequest,
        assignment: Assignment,
        answers: dict[int, list[QueryResult]],
    ) -> None:
        for instance, partitions in sorted(by_instance.items()):
            if instance == self.instance:
                found = self._ask_local(store, request, partitions)
            else:
                found = self._ask_remote(assignment.endpoints.get(instance), instance, request, partitions)
            for p, results in found.items():
                answers[p].extend(results)

    def _ask_local(
        self, store: _Store, request: StateQueryRequest, partitions: Iterable[int]
    ) -> dict[int, list[QueryResult]]:
        local = LocalQuery(store.name, store.subtopology, request.query, tuple(partitions))
        found: dict[int, list[QueryResult]] = {}
        for channel in self._channels():
            try:
                results = channel.ask(local, self._timeout_s)
            except (QueryTimeoutError, WorkerQueryError) as exc:
                log.info("A stream thread could not answer a query on '%s': %s", store.name, exc)
                continue
            for result in results:
                result.instance = self.instance
                found.setdefault(result.partition, []).append(result)
        return found

    def _ask_remote(
        self, endpoint: str | None, instance: str, request: StateQueryRequest, partitions: list[int]
    ) -> dict[int, list[QueryResult]]:
        if endpoint is None:
            log.info("Instance %s advertises no application.server; its partitions cannot be queried", instance)
            return {}
        forwarded = StateQueryRequest(request.store, request.query, tuple(partitions), request.require_active)
        try:
            answer = self._forward(endpoint, forwarded, self._timeout_s)
        except (OSError, ValueError, QueryError) as exc:
            log.info("Instance %s (%s) could not answer a query on '%s': %s", instance, endpoint, request.store, exc)
            return {}
        return {p: [r] for p, r in answer.partitions.items() if r.ok}


def _choose(partition: int, candidates: list[QueryResult], request: StateQueryRequest) -> QueryResult:
    """The best answer for one partition (module docstring, step 5), or the reason there is none."""
    ranked = sorted((c for c in candidates if c.ok), key=lambda c: _RANK.get(c.source or "", 9))
    if not ranked:
        return QueryResult(partition, failure=FailureReason.NOT_PRESENT, message="no instance holds the task now")
    if request.require_active:
        ranked = [c for c in ranked if c.source == "active"]
        if not ranked:
            return QueryResult(
                partition, failure=FailureReason.NOT_ACTIVE, message="only a standby or a restoring task holds it"
            )
    bounded = [c for c in ranked if request.bound.satisfied_by(c.position)]
    if not bounded:
        best = ranked[0]
        return QueryResult(
            partition,
            best.source,
            position=best.position,
            instance=best.instance,
            failure=FailureReason.NOT_UP_TO_BOUND,
            message=f"the {best.source} task's position does not reach the bound yet",
        )
    return bounded[0]


def _keys(request: StateQueryRequest) -> list[Any]:
    query = request.query
    if isinstance(query, RangeQuery):
        return [k for k in (query.lower, query.upper) if k is not None]
    return [query.key] if query.key is not None else []


def _serialize(store: _Store, key: Any) -> bytes:
    try:
        raw = store.key_serde.serialize(key)
    except (ValueError, TypeError, OverflowError, AttributeError) as exc:
        raise QueryError(f"store '{store.name}': the key {key!r} does not fit its key serde: {exc}") from None
    if raw is None:
        raise QueryError(f"store '{store.name}': keys must not be null")
    return raw


def to_json(document: Any) -> bytes:
    """A JSON document of query answers: bytes (of a ``bytes`` serde) as ``{"base64": "..."}``."""

    def default(value: Any) -> Any:
        if isinstance(value, (bytes, bytearray)):
            return {"base64": base64.b64encode(value).decode()}
        if isinstance(value, (set, frozenset, tuple)):
            return list(value)
        raise TypeError(f"{type(value).__name__} is not JSON serializable")

    return json.dumps(document, default=default).encode()


def http_forward(endpoint: str, request: StateQueryRequest, timeout_s: float) -> StateQueryResult:
    """Ask the instance at ``endpoint`` (``host:port``) for its local answer: ``POST /query?local=true``.
    Raises OSError (unreachable, timeout, an HTTP error) or ValueError (an answer that is not a result)."""
    http = urllib.request.Request(
        f"http://{endpoint}/query?local=true",
        data=to_json(request.to_dict()),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(http, timeout=timeout_s) as response:
            return StateQueryResult.from_dict(json.loads(response.read()))
    except urllib.error.HTTPError as exc:
        raise OSError(f"HTTP {exc.code}: {exc.read().decode(errors='replace').strip()}") from None
