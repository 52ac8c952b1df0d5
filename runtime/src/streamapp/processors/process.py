"""The ``process`` family's processor: the runtime side of the Processor API (``streamapp.processor``),
process and process_values nodes, their contexts, and the punctuation queues of a task.

A task owns one ``ProcessorHooks``: it creates the process nodes' contexts, calls the user processors'
``init`` when the task starts running and ``close`` when it closes, and keeps two punctuation queues
(Kafka's ``PunctuationQueue``): stream time, checked after each processed record, and wall-clock time,
checked when the stream thread calls ``StreamTask.punctuate_wall_clock(now_ms)``.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from streamapp.kafka.types import Headers
from streamapp.processor import (
    Cancellable,
    FixedKeyProcessor,
    FixedKeyProcessorContext,
    FixedKeyRecord,
    KeyValueStore,
    ProcessorContext,
    PunctuationType,
    Punctuator,
    Record,
)
from streamapp.processor import (
    Headers as RecordHeaders,
)
from streamapp.processor import (
    Processor as UserProcessor,
)
from streamapp.processors.base import BuildContext, FamilyBuilders, Processor, RecordContext
from streamapp.state.stores import TypedKeyValueStore
from streamapp.topology.nodes.process import ProcessNode, ProcessValuesNode

__all__ = [
    "BUILDERS",
    "NodeFixedKeyProcessorContext",
    "NodeProcessorContext",
    "ProcessNodeProcessor",
    "ProcessorHooks",
    "PunctuationError",
    "PunctuationQueue",
]

log = logging.getLogger(__name__)

BUILDERS = FamilyBuilders("process")


class PunctuationError(RuntimeError):
    """A punctuator raised; the message names the node and the punctuation type."""


class _Schedule:
    """One registered punctuation: next due time (ms), interval (ms), callback and owning node context."""

    __slots__ = ("cancelled", "context", "interval", "punctuator", "timestamp")

    def __init__(self, context: _NodeContext, timestamp: int, interval: int, punctuator: Punctuator) -> None:
        self.context = context
        self.timestamp = timestamp
        self.interval = interval
        self.punctuator = punctuator
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True

    def advance(self, now: int) -> None:
        """Move to the next due time after ``now`` (Kafka's ``PunctuationSchedule.next``: missed intervals are
        skipped, the alignment kept)."""
        next_time = self.timestamp + self.interval
        if now >= next_time:
            missed = (now - self.timestamp) // self.interval
            next_time = self.timestamp + (missed + 1) * self.interval
        self.timestamp = next_time


class PunctuationQueue:
    """Schedules ordered by due time (Kafka's ``PunctuationQueue``)."""

    def __init__(self, punctuation_type: PunctuationType) -> None:
        self.type = punctuation_type
        self._heap: list[tuple[int, int, _Schedule]] = []
        self._sequence = itertools.count()

    def __bool__(self) -> bool:
        """True while any schedule (possibly cancelled) is queued: the per-record fast check."""
        return bool(self._heap)

    def add(self, schedule: _Schedule) -> Cancellable:
        heapq.heappush(self._heap, (schedule.timestamp, next(self._sequence), schedule))
        return schedule

    def next_due(self) -> int | None:
        """Due time (ms) of the earliest live schedule, or ``None``."""
        while self._heap and self._heap[0][2].cancelled:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def may_punctuate(self, now: int) -> bool:
        """Run every schedule due at ``now`` (each at most once per call), with ``now`` as the timestamp.

        Returns True when a punctuator ran. Raises PunctuationError when one raises (its schedule stays).
        """
        punctuated = False
        due: list[_Schedule] = []
        while self._heap and self._heap[0][0] <= now:
            due.append(heapq.heappop(self._heap)[2])
        for i, schedule in enumerate(due):
            if schedule.cancelled:
                continue
            try:
                schedule.context.run_punctuator(schedule.punctuator, now, self.type)
            except Exception:
                for rest in due[i:]:
                    self.add(rest)
                raise
            punctuated = True
            if not schedule.cancelled:
                schedule.advance(now)
                self.add(schedule)
        return punctuated

    def clear(self) -> None:
        self._heap.clear()


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


class ProcessorHooks:
    """The Processor API state of one task: process nodes, their lifecycle, and the punctuation queues.

    ``stream_time`` returns the task's stream time (ms, -1 when unknown); ``clock_ms`` the thread's wall
    clock; ``set_timestamp`` is told the punctuation time before a punctuator runs (store writes made in it
    carry that timestamp in the changelog).
    """

    def __init__(
        self,
        task_id: str,
        application_id: str,
        stream_time: Callable[[], int],
        clock_ms: Callable[[], int] = _wall_clock_ms,
        set_timestamp: Callable[[int], None] | None = None,
    ) -> None:
        self.task_id = task_id
        self.application_id = application_id
        self.stream_time = stream_time
        self.clock_ms = clock_ms
        self._set_timestamp = set_timestamp
        self.stream_time_queue = PunctuationQueue(PunctuationType.STREAM_TIME)
        self.wall_clock_queue = PunctuationQueue(PunctuationType.WALL_CLOCK_TIME)
        self._nodes: list[ProcessNodeProcessor] = []
        self.initialized = False

    def register(self, node: ProcessNodeProcessor) -> None:
        self._nodes.append(node)

    def init_processors(self) -> None:
        """Call every user processor's ``init`` (once; later calls do nothing)."""
        if self.initialized:
            return
        self.initialized = True
        for node in self._nodes:
            node.init()

    def close_processors(self) -> None:
        """Call every initialized user processor's ``close`` (errors are logged) and drop the schedules."""
        if self.initialized:
            for node in self._nodes:
                try:
                    node.close()
                except Exception:
                    log.exception("Processor of node %s in task %s failed to close", node.context.node, self.task_id)
        self.initialized = False
        self.stream_time_queue.clear()
        self.wall_clock_queue.clear()

    def punctuate_stream_time(self) -> bool:
        """Run the stream-time punctuations due at the current stream time; True when one ran."""
        if not self.stream_time_queue:
            return False
        now = self.stream_time()
        due = self.stream_time_queue.next_due()
        if now < 0 or due is None or due > now:
            return False
        return self._punctuate(self.stream_time_queue, now)

    def punctuate_wall_clock(self, now_ms: int) -> bool:
        """Run the wall-clock punctuations due at ``now_ms``; True when one ran."""
        due = self.wall_clock_queue.next_due()
        if due is None or due > now_ms:
            return False
        return self._punctuate(self.wall_clock_queue, now_ms)

    def _punctuate(self, queue: PunctuationQueue, now: int) -> bool:
        if self._set_timestamp is not None:
            self._set_timestamp(now)
        return queue.may_punctuate(now)


class _StoreView:
    """A ``TypedKeyValueStore`` as the public ``KeyValueStore``."""

    def __init__(self, store: TypedKeyValueStore) -> None:
        self.name = store.name
        self._store = store

    def get(self, key: Any) -> Any:
        return self._store.get(key)

    def put(self, key: Any, value: Any) -> None:
        self._store.put(key, value)

    def put_if_absent(self, key: Any, value: Any) -> Any:
        previous = self._store.get(key)
        if previous is None:
            self._store.put(key, value)
        return previous

    def delete(self, key: Any) -> Any:
        previous = self._store.get(key)
        if previous is not None:
            self._store.put(key, None)
        return previous


class _NodeContext:
    """What the contexts of a process node and of a process_values node share (Kafka's ``ProcessingContext``
    part of ``ProcessorContextImpl``): the stores, schedules, times, and running the user code."""

    def __init__(
        self,
        node: str,
        hooks: ProcessorHooks,
        stores: dict[str, TypedKeyValueStore],
        children: Sequence[Processor],
        record_context: RecordContext | None = None,
    ) -> None:
        self.node = node
        self.record_context = record_context if record_context is not None else RecordContext()
        """The task's headers of the record being processed: a ``Record`` handed to ``process`` carries them, and
        ``forward(record)`` passes the forwarded record's headers downstream (Kafka's ``ProcessorContextImpl``)."""
        self._hooks = hooks
        self._stores = {name: _StoreView(store) for name, store in stores.items()}
        self._children = tuple(children)
        self._timestamp: int | None = None

    @property
    def application_id(self) -> str:
        return self._hooks.application_id

    @property
    def task_id(self) -> str:
        return self._hooks.task_id

    def _forward_record(self, record: Record | FixedKeyRecord) -> None:
        """Send ``record`` to the children with its headers as the record context's."""
        context = self.record_context
        current, context.headers = context.headers, _kafka_headers(record.headers)
        try:
            for child in self._children:
                child.process(record.key, record.value, record.timestamp)
        finally:
            context.headers = current

    def get_state_store(self, name: str) -> KeyValueStore:
        try:
            return self._stores[name]
        except KeyError:
            raise KeyError(
                f"node '{self.node}' has no store '{name}'; its stores: {', '.join(self._stores) or '(none)'}"
            ) from None

    def schedule(self, interval_ms: int, punctuation_type: PunctuationType, punctuator: Punctuator) -> Cancellable:
        if interval_ms < 1:
            raise ValueError(f"the minimum punctuation interval is 1 ms, got {interval_ms}")
        if punctuation_type is PunctuationType.STREAM_TIME:
            return self._hooks.stream_time_queue.add(_Schedule(self, 0, interval_ms, punctuator))
        if punctuation_type is PunctuationType.WALL_CLOCK_TIME:
            start = self._hooks.clock_ms() + interval_ms
            return self._hooks.wall_clock_queue.add(_Schedule(self, start, interval_ms, punctuator))
        raise ValueError(f"unknown punctuation type {punctuation_type!r}")

    def current_stream_time_ms(self) -> int:
        return self._hooks.stream_time()

    def current_system_time_ms(self) -> int:
        return self._hooks.clock_ms()

    def run_processor(self, process: Callable[[Any], None], record: Record | FixedKeyRecord) -> None:
        """``process(record)``: the user processor's ``process``, with ``record``'s time as the current time."""
        self._timestamp = record.timestamp
        try:
            process(record)
        finally:
            self._timestamp = None

    def run_punctuator(self, punctuator: Punctuator, timestamp: int, punctuation_type: PunctuationType) -> None:
        self._timestamp = timestamp
        try:
            punctuator(timestamp)
        except Exception as exc:
            raise PunctuationError(
                f"node '{self.node}': {punctuation_type.name} punctuator failed at {timestamp}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        finally:
            self._timestamp = None


class NodeProcessorContext(_NodeContext, ProcessorContext):
    """The ``ProcessorContext`` of one process node in one task."""

    def forward(self, record: Record | Any, value: Any = ..., *, timestamp: int | None = None) -> None:
        if value is ...:
            if not isinstance(record, Record):
                raise TypeError("forward(record) needs a Record; use forward(key, value) for a key and a value")
            self._forward_record(record)
            return
        if self._timestamp is None:
            raise RuntimeError(
                f"node '{self.node}': forward is only allowed in process or a punctuator, not in init or close"
            )
        ts = self._timestamp if timestamp is None else timestamp
        for child in self._children:
            child.process(record, value, ts)


class NodeFixedKeyProcessorContext(_NodeContext, FixedKeyProcessorContext):
    """The ``FixedKeyProcessorContext`` of one process_values node in one task: it forwards ``FixedKeyRecord``
    objects only, so the key of every forwarded record is an input record's (Kafka's KIP-820)."""

    def forward(self, record: FixedKeyRecord) -> None:
        if not isinstance(record, FixedKeyRecord):
            raise TypeError(
                f"node '{self.node}': a FixedKeyProcessor forwards FixedKeyRecord objects "
                f"(record.with_value(...)), not {type(record).__name__}: it cannot change keys"
            )
        self._forward_record(record)


def _kafka_headers(headers: RecordHeaders) -> Headers | None:
    """A ``Record``'s headers as the task's record context keeps them (``None`` for none)."""
    return [(name, value) for name, value in headers] if headers else None  # type: ignore[misc]


class ProcessNodeProcessor:
    """Feeds a process node's records to its user processor as ``Record`` objects (a process_values node's as
    ``FixedKeyRecord`` objects), with the headers of the record being processed (Kafka's ``Record.headers()``)."""

    def __init__(
        self,
        processor: UserProcessor | FixedKeyProcessor,
        context: NodeProcessorContext | NodeFixedKeyProcessorContext,
        record_type: type[Record] | type[FixedKeyRecord] = Record,
    ) -> None:
        self.processor = processor
        self.context = context
        self._record_type = record_type

    def init(self) -> None:
        self.processor.init(self.context)  # type: ignore[arg-type]  # each processor kind gets its context kind

    def close(self) -> None:
        self.processor.close()

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        headers = self.context.record_context.headers
        make = self._record_type
        record = make(key, value, timestamp, tuple(headers)) if headers else make(key, value, timestamp)
        self.context.run_processor(self.processor.process, record)


@BUILDERS.builds(ProcessNode, ProcessValuesNode)
def build_process(node: ProcessNode, children: Sequence[Processor], ctx: BuildContext) -> Processor:
    """A process node (a ``Processor``) or a process_values node (a ``FixedKeyProcessor``): one user processor
    instance for this task.

    With ``ctx.processor_hooks`` (a task), ``init`` runs when the task starts running; without (a bare
    processor graph), it runs now. Raises TypeError when the class does not build the node's processor kind.
    """
    fixed_key = isinstance(node, ProcessValuesNode)
    kind: type[UserProcessor] | type[FixedKeyProcessor] = FixedKeyProcessor if fixed_key else UserProcessor
    factory = ctx.function(node.name, "processor")
    processor = factory()
    if not isinstance(processor, kind):
        raise TypeError(
            f"node '{node.name}': {node.processor} made a {type(processor).__name__}, "
            f"not a streamapp.processor.{kind.__name__}"
        )
    hooks = ctx.processor_hooks
    standalone = hooks is None
    if hooks is None:
        hooks = ProcessorHooks(f"?_{ctx.partition}", ctx.application_id, lambda: -1)
    stores = {name: ctx.store(name) for name in node.stores()}
    context_type = NodeFixedKeyProcessorContext if fixed_key else NodeProcessorContext
    context = context_type(node.name, hooks, stores, children, ctx.record_context)
    adapter = ProcessNodeProcessor(processor, context, FixedKeyRecord if fixed_key else Record)
    if standalone:
        adapter.init()
    else:
        hooks.register(adapter)
    return adapter
