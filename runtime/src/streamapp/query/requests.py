"""The queries, request and labelled results of interactive queries (Kafka Streams' IQv2, KIP-796).

Queries (``org.apache.kafka.streams.query``):

- ``KeyQuery(key)``: the value of one key of a ``key_value`` store (``KeyQuery.withKey``);
- ``RangeQuery(lower, upper)``: the ``(key, value)`` pairs of a ``key_value`` store with ``lower <= key <= upper``
  in serialized-key order, either bound ``None`` = open (``RangeQuery.withRange`` / ``withLowerBound`` /
  ``withUpperBound`` / ``withNoBounds``);
- ``WindowKeyQuery(key, time_from, time_to)``: the windows of one key of a ``window`` store starting in
  ``[time_from, time_to]`` (epoch ms), by start (``WindowKeyQuery.withKeyAndWindowStartRange``);
- ``WindowRangeQuery(time_from, time_to, key=None)``: every key's windows starting in ``[time_from, time_to]``
  (``WindowRangeQuery.withWindowStartRange``), or with ``key`` all of one key's windows (``withKey``).

A ``StateQueryRequest`` (``StateQueryRequest.inStore(name).withQuery(q)``) names the store, the query, optionally
the partitions (``withPartitions``; default: the key's partition for key queries, all for the others),
``require_active`` (``requireActive``: never a standby's or a restoring task's answer) and a ``PositionBound``
(``withPositionBound``).

A ``Position`` (``org.apache.kafka.streams.query.Position``) is ``{topic: {partition: offset}}``: for a running
active task the offset of the last input record each input partition processed (its effect is in the answer,
the record cache included); for a standby or a restoring task the offset of the last changelog record applied to
the store. ``PositionBound.at_least(position)`` holds when the answer's position has every listed
``topic/partition`` at that offset or past it: a bound over input topics can only be met by a running active
task, and over changelog topics only by a standby or restoring copy (this runtime writes no position headers into
the changelog, unlike Kafka since KIP-796), so a bound names the positions of an earlier answer of the same kind.

Each partition's ``QueryResult`` is labelled with where it came from (``source``: ``active`` = a running active
task, ``restoring`` = an active task still restoring its stores, ``standby`` = a standby task) and ``stale``
(``source != "active"``: the answer may lag the input), so a stale answer is never returned silently. A failed
partition carries ``failure`` (Kafka's ``FailureReason``) and ``message``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "FailureReason",
    "KeyQuery",
    "Position",
    "PositionBound",
    "Query",
    "QueryError",
    "QueryResult",
    "RangeQuery",
    "StateQueryRequest",
    "StateQueryResult",
    "WindowKeyQuery",
    "WindowRangeQuery",
    "query_from_dict",
]

Position = dict[str, dict[int, int]]
"""``{topic: {partition: offset}}`` (Kafka's ``Position``): see the module docstring."""


class QueryError(ValueError):
    """A query that cannot be run at all (unknown store, wrong store type, a key the store's key serde refuses,
    a malformed request): the HTTP server answers 400, or 404 for an unknown store (``status``)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class FailureReason(enum.StrEnum):
    """Why one partition has no answer (``org.apache.kafka.streams.query.FailureReason``)."""

    NOT_PRESENT = "NOT_PRESENT"
    """No instance holds the partition's task (the group is rebalancing, or the owner cannot be reached)."""
    NOT_ACTIVE = "NOT_ACTIVE"
    """``require_active`` and only a standby or a restoring task holds it."""
    NOT_UP_TO_BOUND = "NOT_UP_TO_BOUND"
    """The holder's position does not meet the request's ``PositionBound``."""
    NOT_UP = "NOT_UP"
    """The instance is not running (yet)."""


@dataclass(frozen=True)
class KeyQuery:
    """``org.apache.kafka.streams.query.KeyQuery``: the value of ``key`` in a ``key_value`` store."""

    key: Any
    kind = "key"


@dataclass(frozen=True)
class RangeQuery:
    """``org.apache.kafka.streams.query.RangeQuery``: keys in ``[lower, upper]`` of a ``key_value`` store."""

    lower: Any = None
    upper: Any = None
    kind = "range"


@dataclass(frozen=True)
class WindowKeyQuery:
    """``org.apache.kafka.streams.query.WindowKeyQuery``: ``key``'s windows starting in ``[time_from, time_to]``."""

    key: Any
    time_from: int
    time_to: int
    kind = "window_key"


@dataclass(frozen=True)
class WindowRangeQuery:
    """``org.apache.kafka.streams.query.WindowRangeQuery``: every key's windows starting in ``[time_from,
    time_to]``, or (``key`` given) all of ``key``'s windows."""

    time_from: int = 0
    time_to: int = 2**63 - 1
    key: Any = None
    kind = "window_range"


Query = KeyQuery | RangeQuery | WindowKeyQuery | WindowRangeQuery

_STORE_TYPES = {"key": "key_value", "range": "key_value", "window_key": "window", "window_range": "window"}


def store_type_of(query: Query) -> str:
    """The ``StoreSpec.type`` a query reads (``key_value`` or ``window``)."""
    return _STORE_TYPES[query.kind]


@dataclass(frozen=True)
class PositionBound:
    """``org.apache.kafka.streams.query.PositionBound``: ``unbounded()`` or ``at_least(position)``."""

    position: Position | None = None

    @staticmethod
    def unbounded() -> PositionBound:
        return PositionBound(None)

    @staticmethod
    def at_least(position: Position) -> PositionBound:
        return PositionBound({topic: dict(offsets) for topic, offsets in position.items()})

    def satisfied_by(self, position: Position) -> bool:
        """Whether ``position`` has every bounded ``topic/partition`` at the bound's offset or past it."""
        if self.position is None:
            return True
        return all(
            position.get(topic, {}).get(partition, -1) >= offset
            for topic, offsets in self.position.items()
            for partition, offset in offsets.items()
        )


@dataclass(frozen=True)
class StateQueryRequest:
    """``org.apache.kafka.streams.query.StateQueryRequest`` (see the module docstring)."""

    store: str
    query: Query
    partitions: tuple[int, ...] | None = None
    require_active: bool = False
    bound: PositionBound = field(default_factory=PositionBound.unbounded)

    def to_dict(self) -> dict[str, Any]:
        """The JSON body of ``POST /query`` (``query_from_dict`` reads it back)."""
        body: dict[str, Any] = {"store": self.store, "type": self.query.kind, **_query_fields(self.query)}
        if self.partitions is not None:
            body["partitions"] = list(self.partitions)
        if self.require_active:
            body["require_active"] = True
        if self.bound.position is not None:
            body["position_bound"] = _position_json(self.bound.position)
        return body


@dataclass
class QueryResult:
    """One partition's answer (``org.apache.kafka.streams.query.QueryResult``), labelled (module docstring).

    ``result``: a ``KeyQuery``'s value (``None``: absent); a ``RangeQuery``'s ``[[key, value], ...]``; a window
    query's ``[[key, window start, window end, value], ...]``. ``instance``: the instance that answered.
    """

    partition: int
    source: str | None = None
    result: Any = None
    position: Position = field(default_factory=dict)
    instance: str | None = None
    failure: FailureReason | None = None
    message: str | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None

    @property
    def stale(self) -> bool:
        """Whether the answer may lag the input: it came from a standby or a restoring task."""
        return self.ok and self.source != "active"

    def to_dict(self) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "source": self.source,
            "stale": self.stale,
            "result": self.result,
            "position": _position_json(self.position),
            "instance": self.instance,
            "failure": self.failure.value if self.failure else None,
            "message": self.message,
        }

    @staticmethod
    def from_dict(data: dict[str, Any]) -> QueryResult:
        failure = data.get("failure")
        return QueryResult(
            partition=int(data["partition"]),
            source=data.get("source"),
            result=data.get("result"),
            position=_position_from_json(data.get("position") or {}),
            instance=data.get("instance"),
            failure=FailureReason(failure) if failure else None,
            message=data.get("message"),
        )


@dataclass
class StateQueryResult:
    """``org.apache.kafka.streams.query.StateQueryResult``: the answer of every queried partition.

    ``only_result()`` is a key query's one partition (``getOnlyPartitionResult``); ``rows()`` the range and
    window rows of every answered partition merged (range rows by key, window rows by start then key).
    """

    store: str
    partitions: dict[int, QueryResult]

    @property
    def stale(self) -> bool:
        return any(result.stale for result in self.partitions.values())

    @property
    def position(self) -> Position:
        """The merged position of every answered partition (``StateQueryResult.getPosition``)."""
        merged: Position = {}
        for result in self.partitions.values():
            for topic, offsets in result.position.items():
                merged.setdefault(topic, {}).update(offsets)
        return merged

    def only_result(self) -> QueryResult:
        if len(self.partitions) != 1:
            raise ValueError(f"{len(self.partitions)} partitions answered, not one")
        return next(iter(self.partitions.values()))

    def rows(self) -> list[Any]:
        rows = [row for r in self.partitions.values() if r.ok and isinstance(r.result, list) for row in r.result]
        if rows and len(rows[0]) == 4:
            return sorted(rows, key=lambda row: (row[1], repr(row[0])))
        return sorted(rows, key=lambda row: repr(row[0]))

    def to_dict(self) -> dict[str, Any]:
        return {
            "store": self.store,
            "stale": self.stale,
            "position": _position_json(self.position),
            "partitions": [self.partitions[p].to_dict() for p in sorted(self.partitions)],
        }

    @staticmethod
    def from_dict(data: dict[str, Any]) -> StateQueryResult:
        results = [QueryResult.from_dict(item) for item in data.get("partitions", [])]
        return StateQueryResult(str(data["store"]), {r.partition: r for r in results})


def query_from_dict(body: dict[str, Any]) -> StateQueryRequest:
    """A ``StateQueryRequest`` from the JSON body of ``POST /query`` (``StateQueryRequest.to_dict``); QueryError
    for a malformed one."""
    if not isinstance(body, dict):
        raise QueryError("the query must be a JSON object")
    store, kind = body.get("store"), body.get("type")
    if not isinstance(store, str) or not store:
        raise QueryError("'store' (the store name) is required")
    try:
        query: Query
        if kind == "key":
            query = KeyQuery(_required(body, "key"))
        elif kind == "range":
            query = RangeQuery(body.get("lower"), body.get("upper"))
        elif kind == "window_key":
            query = WindowKeyQuery(_required(body, "key"), _int(body, "time_from"), _int(body, "time_to"))
        elif kind == "window_range":
            query = WindowRangeQuery(_int(body, "time_from", 0), _int(body, "time_to", 2**63 - 1), body.get("key"))
        else:
            raise QueryError(f"'type' must be key, range, window_key or window_range, not {kind!r}")
        partitions = body.get("partitions")
        if partitions is not None and (
            not isinstance(partitions, list) or not all(isinstance(p, int) and p >= 0 for p in partitions)
        ):
            raise QueryError("'partitions' must be a list of partition numbers")
        bound = body.get("position_bound")
        return StateQueryRequest(
            store,
            query,
            tuple(partitions) if partitions is not None else None,
            bool(body.get("require_active", False)),
            PositionBound.at_least(_position_from_json(bound)) if bound else PositionBound.unbounded(),
        )
    except (TypeError, ValueError, AttributeError) as exc:
        if isinstance(exc, QueryError):
            raise
        raise QueryError(f"malformed query: {exc}") from exc


def _query_fields(query: Query) -> dict[str, Any]:
    if isinstance(query, KeyQuery):
        return {"key": query.key}
    if isinstance(query, RangeQuery):
        return {"lower": query.lower, "upper": query.upper}
    if isinstance(query, WindowKeyQuery):
        return {"key": query.key, "time_from": query.time_from, "time_to": query.time_to}
    return {"key": query.key, "time_from": query.time_from, "time_to": query.time_to}


def _required(body: dict[str, Any], name: str) -> Any:
    if body.get(name) is None:
        raise QueryError(f"'{name}' is required (keys must not be null)")
    return body[name]


def _int(body: dict[str, Any], name: str, default: int | None = None) -> int:
    value = body.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise QueryError(f"'{name}' must be an integer (epoch ms)")
    return value


def _position_json(position: Position) -> dict[str, dict[str, int]]:
    return {topic: {str(p): o for p, o in offsets.items()} for topic, offsets in position.items()}


def _position_from_json(data: dict[str, Any]) -> Position:
    if not isinstance(data, dict):
        raise QueryError("a position is {topic: {partition: offset}}")
    return {str(topic): {int(p): int(o) for p, o in offsets.items()} for topic, offsets in data.items()}
