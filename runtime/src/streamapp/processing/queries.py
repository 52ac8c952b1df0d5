"""A stream thread's answers to interactive queries (Kafka Streams' IQv2, KIP-796) from the stores it holds.

The supervisor (``streamapp.query.router``) sends a ``LocalQuery`` over the worker's query pipe
(``streamapp.query.channel``); the stream thread answers it between two loop iterations (no store is read while a
record is processed, as Kafka's ``StreamThread`` answers ``KafkaStreams#query`` from another thread under the
task's lock). ``answer`` reads, per requested partition, the task of the store's sub-topology that this thread
holds:

- a running active task: ``source="active"``, read THROUGH the record cache and the write buffer (a key-value
  store via ``StreamTask.read_store``, a window store via its caching view), as Kafka's ``CachingKeyValueStore``
  serves IQ reads; position = the last processed offset of each input partition;
- an active task still restoring (``source="restoring"``) or a standby task (``source="standby"``): the persistent
  store as far as the changelog was applied; position = the last changelog offset applied to the queried store.

Partitions this thread does not hold are left out (the router asks the other threads and instances).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from streamapp.kafka.types import TopicPartition
from streamapp.processing.standby import StandbyTask
from streamapp.processing.task import StreamTask, TaskState
from streamapp.processing.task_id import TaskId
from streamapp.query.requests import (
    KeyQuery,
    Position,
    Query,
    QueryResult,
    RangeQuery,
)
from streamapp.state.caching_window_store import CachingWindowStore
from streamapp.state.changelogging import ChangeLoggingKeyValueStore
from streamapp.state.record_cache import CachingKeyValueStore
from streamapp.state.stores import TypedKeyValueStore
from streamapp.state.window_store import WindowStore
from streamapp.state.windowed_access import WindowedStateAccess
from streamapp.topology import TopologyDescription

__all__ = ["LocalQuery", "answer"]


@dataclass(frozen=True)
class LocalQuery:
    """What the supervisor asks a worker: ``query`` on store ``store`` of sub-topology ``subtopology``, for
    ``partitions``. Keys are typed (the worker serializes them with the store's serdes)."""

    store: str
    subtopology: int
    query: Query
    partitions: tuple[int, ...]


def answer(
    request: LocalQuery,
    description: TopologyDescription,
    active: Mapping[TaskId, StreamTask],
    standbys: Mapping[TaskId, StandbyTask],
) -> list[QueryResult]:
    """The answers of the requested partitions this thread holds (module docstring), by partition."""
    results: list[QueryResult] = []
    for partition in request.partitions:
        task_id = TaskId(request.subtopology, partition)
        task = active.get(task_id)
        if task is not None and task.state is TaskState.RUNNING:
            rows = _run(request.query, *_active_views(task, request.store))
            results.append(QueryResult(partition, "active", rows, _input_position(task.consumed_offsets)))
        elif task is not None and task.state is TaskState.RESTORING:
            stores = task.stores
            rows = _run(request.query, *_persistent_views(description, stores, request.store))
            results.append(QueryResult(partition, "restoring", rows, _changelog_position(stores[request.store])))
        elif task_id in standbys:
            stores = standbys[task_id].stores
            rows = _run(request.query, *_persistent_views(description, stores, request.store))
            results.append(QueryResult(partition, "standby", rows, _changelog_position(stores[request.store])))
    return results


def _active_views(task: StreamTask, name: str) -> tuple[Any, ChangeLoggingKeyValueStore]:
    if task.description.store(name).type == "window":
        return task.windowed_state.cached_window_store(name), task.stores[name]
    return task.read_store(name), task.stores[name]


def _persistent_views(
    description: TopologyDescription, stores: Mapping[str, ChangeLoggingKeyValueStore], name: str
) -> tuple[Any, ChangeLoggingKeyValueStore]:
    access = WindowedStateAccess(description, stores)
    if description.store(name).type == "window":
        return access.window_store(name), stores[name]
    return TypedKeyValueStore(stores[name], *access.store_serdes(name)), stores[name]


def _run(query: Query, view: Any, logged: ChangeLoggingKeyValueStore) -> Any:
    if isinstance(query, KeyQuery):
        return view.get(query.key)
    if isinstance(query, RangeQuery):
        return _key_range(view, logged, query)
    windows = _live_windows(view, query.time_from, query.time_to)
    key = query.key
    return [[w.key, w.start, w.end, v.value] for w, v in windows if key is None or w.key == key]


def _key_range(view: TypedKeyValueStore, logged: ChangeLoggingKeyValueStore, query: RangeQuery) -> list[list[Any]]:
    """``[[key, value]]`` with ``lower <= key <= upper`` by serialized key: the persistent store's range, the
    buffered writes and the record cache's dirty entries merged, each read back through ``view``."""
    lower = view.raw_key(query.lower) if query.lower is not None else b""
    upper = view.raw_key(query.upper) if query.upper is not None else None
    exclusive = upper + b"\x00" if upper is not None else None  # the smallest key after ``upper``

    def within(raw: bytes) -> bool:
        return raw >= lower and (upper is None or raw <= upper)

    candidates: set[bytes] = {raw for raw, _ in logged.inner.range(lower, exclusive)}  # type: ignore[attr-defined]
    candidates.update(raw for raw in logged.pending_keys() if within(raw))
    if isinstance(view, CachingKeyValueStore):
        candidates.update(raw for raw in view.dirty_keys() if within(raw))
    rows: list[list[Any]] = []
    for raw in sorted(candidates):
        found = view.get_raw_key(raw)
        if found is not None:
            rows.append([view.key_of(raw), found[0]])
    return rows


def _live_windows(view: WindowStore | CachingWindowStore, time_from: int, time_to: int) -> list[Any]:
    """The windows starting in ``[time_from, time_to]`` not past retention, the record cache's included."""
    below = view.below if isinstance(view, CachingWindowStore) else view
    stream_time = below.stream_time()
    live = 0 if stream_time < 0 else max(0, stream_time - below.retention_ms)
    return view.fetch_all_by_start(max(time_from, live), time_to)


def _input_position(consumed: Mapping[TopicPartition, int]) -> Position:
    """The last processed offset per input partition (``consumed`` holds the next offset to read)."""
    return _position((tp, offset - 1) for tp, offset in consumed.items() if offset > 0)


def _changelog_position(store: ChangeLoggingKeyValueStore) -> Position:
    """The offset of the last changelog record applied to ``store`` (Kafka's position of one store)."""
    offset = store.changelog_offset()
    return {} if offset is None else _position([(store.changelog, offset)])


def _position(offsets: Iterable[tuple[TopicPartition, int]]) -> Position:
    position: Position = {}
    for tp, offset in offsets:
        position.setdefault(tp.topic, {})[tp.partition] = offset
    return position
