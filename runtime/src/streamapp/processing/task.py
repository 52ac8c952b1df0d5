"""StreamTask: one sub-topology applied to one partition of its input topics.

Task ``<subtopology>_<p>`` reads partition ``p`` of every source topic of its sub-topology, owns one
instance of each of the sub-topology's stores (folder ``<state.dir>/<application.id>/<taskId>/rocksdb/
<store>``, changelog partition ``p``) through its ``StateManager`` (``streamapp.processing.state_manager``, which
a standby of the task on the same thread hands over open, and takes back) and keeps its stream time (the largest
record timestamp processed).

Input (Kafka's ``StreamTask.addRecords`` / ``process``): consumed records are buffered per input partition
(``add_record``); ``process_ready`` takes them in timestamp order across partitions, waiting for empty
partitions as ``max.task.idle.ms`` says (``streamapp.processing.partition_group``). A record's key and value
are deserialized, and its timestamp extracted (the source node's ``timestampExtractor``), when it reaches the
head of its queue. Failures go to the thread's exception handlers (``streamapp.processing.errors``): a
deserialization error, a processor raising, a sink that cannot serialize or send. A handler that continues
skips the record (its offset is still committed); one that fails raises ProcessingError naming the record.

Lifecycle: ``CREATED`` (partitions assigned) → ``initialize()`` opens the stores (or takes over a recycled
standby's open ones) and builds the processors → ``RESTORING`` (the changelog reader brings the stores up to date)
→ ``RUNNING`` (processes records) → ``CLOSED`` (``close``; ``close_and_recycle_state`` keeps the stores open for a
standby). Commits are driven from outside (``streamapp.processing.commit``).
"""

from __future__ import annotations

import enum
import logging
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, cast

from streamapp.drop_reasons import DESERIALIZATION_ERROR, INVALID_TIMESTAMP, PROCESSING_ERROR
from streamapp.kafka.types import (
    ConsumerRecord,
    DeliveryError,
    KafkaClientError,
    OffsetAndMetadata,
    ProducerClient,
    TopicPartition,
)
from streamapp.processing.commit_metadata import encode_emitted, merge_emitted
from streamapp.processing.errors import ExceptionHandlers, ProcessingError
from streamapp.processing.partition_group import PartitionGroup, RecordQueue, StampedRecord
from streamapp.processing.state_manager import StateManager, StoreFactory
from streamapp.processing.table_value_getters import JoinTableView, join_tables, table_value_getter
from streamapp.processing.task_id import TaskId
from streamapp.processing.timestamps import InvalidTimestampError, TimestampExtractor, build_extractor
from streamapp.processors import (
    BuildContext,
    Processor,
    ProcessorMetrics,
    build_task_processors,
    source_node_names,
    source_node_of_topic,
)
from streamapp.processors.base import EmitProgress, RecordContext
from streamapp.processors.io import RecordSerializationError
from streamapp.processors.process import ProcessorHooks, PunctuationError
from streamapp.sensors import RecordingLevel, TaskSensors, WindowedStat
from streamapp.serdes import Serde, serde_for
from streamapp.state.caching_session_store import CachingSessionStore
from streamapp.state.caching_window_store import CachingWindowStore
from streamapp.state.changelogging import ChangeLoggingKeyValueStore
from streamapp.state.record_cache import CachingKeyValueStore, ThreadCache
from streamapp.state.stores import TypedKeyValueStore
from streamapp.state.windowed_access import WindowedStateAccess
from streamapp.topology import SourceNode, Subtopology, TopologyDescription
from streamapp.topology.nodes.windowed import WindowedAggregationNode
from streamapp.topology.stores import cached_stores

__all__ = ["STORE_METRICS_SCOPE", "UNBOUNDED", "ProcessingError", "StoreFactory", "StreamTask", "TaskId", "TaskState"]

log = logging.getLogger(__name__)

UNBOUNDED = sys.maxsize
"""``max_records`` of a ``process_ready`` call that takes everything ready."""


class TaskState(enum.Enum):
    CREATED = "created"
    RESTORING = "restoring"
    RUNNING = "running"
    CLOSED = "closed"


Watermarks = Callable[[TopicPartition], tuple[int, int] | None]
"""``(low, high)`` offsets of an input partition from the consumer's last fetch, or ``None``."""


class _FetchedWatermarks:
    """A ``Watermarks`` read once per partition and then remembered: one ``process_ready`` call sees each empty
    partition's lag as of one moment, as Kafka Streams' ``PartitionGroup`` sees the lags its consumer fetched by the
    last poll (and the consumer is asked once per partition, not once per record)."""

    __slots__ = ("_marks", "_watermarks")

    def __init__(self, watermarks: Watermarks) -> None:
        self._watermarks = watermarks
        self._marks: dict[TopicPartition, tuple[int, int] | None] = {}

    def __call__(self, partition: TopicPartition) -> tuple[int, int] | None:
        marks = self._marks
        if partition in marks:
            return marks[partition]
        found = marks[partition] = self._watermarks(partition)
        return found


def _only_buffered(group: PartitionGroup) -> RecordQueue | None:
    """The one queue of ``group`` holding records when every other queue is empty, else ``None``."""
    found = None
    for queue in group.queues.values():
        if queue.head is not None or queue.records:
            if found is not None:
                return None
            found = queue
    return found


STORE_METRICS_SCOPE = "rocksdb"
"""The store type in a key-value store's metric tag (``rocksdb-state-id``): Kafka's
``RocksDbKeyValueBytesStoreSupplier.metricsScope()``, the stores here being RocksDB ones."""


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


def cached_window_stores(description: TopologyDescription) -> dict[str, bool]:
    """The ``window`` stores a task puts behind the record cache when it is on (``streamapp.state.
    caching_window_store``), each with whether its aggregation reads ranges: those of tumbling and hopping window
    aggregations (single windows: False) and of sliding-window aggregations (True)."""
    return {
        node.store: node.windows.type == "sliding"
        for node in description.nodes
        if isinstance(node, WindowedAggregationNode) and node.windows.type in ("tumbling", "hopping", "sliding")
    }


def cached_session_stores(description: TopologyDescription) -> frozenset[str]:
    """The ``session`` stores a task puts behind the record cache when it is on: those of session-window
    aggregations (``streamapp.state.caching_session_store``, Kafka's ``CachingSessionStore``)."""
    return frozenset(
        node.store
        for node in description.nodes
        if isinstance(node, WindowedAggregationNode) and node.windows.type == "session"
    )


class _Route:
    """How a record of one source topic goes through the task: the source node's ``deserialize`` (``None``:
    the node takes the raw bytes), its ``forward`` (or ``process``), the topic's timestamp extractor, and
    whether that extractor is the plain record timestamp (the common case, read without a call)."""

    __slots__ = ("deserialize", "e2e", "extractor", "forward", "node", "record_time")

    def __init__(self, source: Processor, extractor: TimestampExtractor, node: str, e2e: WindowedStat) -> None:
        self.node = node
        self.e2e = e2e
        """The source node's ``record-e2e-latency`` (``streamapp.sensors``)."""
        self.deserialize: Callable[[Any, Any], tuple[Any, Any]] | None = getattr(source, "deserialize", None)
        forward = getattr(source, "forward", None)
        self.forward: Callable[[Any, Any, int], None] = forward if forward is not None else source.process
        self.extractor = extractor
        self.record_time = extractor.spec.type == "record"


class StreamTask:
    """One task: its input partitions, stores, processors, consumed offsets and stream time."""

    def __init__(
        self,
        task_id: TaskId,
        description: TopologyDescription,
        subtopology: Subtopology,
        application_id: str,
        task_dir: Path,
        producer: ProducerClient,
        functions: dict[str, dict[str, Callable[..., Any]]],
        store_factory: StoreFactory,
        *,
        handlers: ExceptionHandlers | None = None,
        clock_ms: Callable[[], int] = _wall_clock_ms,
        max_task_idle_ms: int = 0,
        global_tables: Callable[[str], TypedKeyValueStore] | None = None,
        record_cache: ThreadCache | None = None,
        state_manager: StateManager | None = None,
        recording_level: RecordingLevel = RecordingLevel.INFO,
    ) -> None:
        """``state_manager``: the task's state handed over open by this thread's standby of the task (recycled, not
        reopened); ``None`` creates a closed one that ``initialize`` opens. ``recording_level``:
        ``metrics.recording.level`` (what ``sensors`` record)."""
        self.id = task_id
        self.record_cache = record_cache
        """The stream thread's record cache (``statestore.cache.max.bytes`` > 0), or ``None``: caching off. Set
        before ``initialize``."""
        self._caching: dict[str, CachingKeyValueStore | CachingWindowStore | CachingSessionStore] = {}
        """The task's stores behind the record cache, flushed at commit (key-value, time-window and session
        stores)."""
        self._join_tables: dict[str, str] = {}
        """Store of each stream-table join of the task -> the table node it joins (set while the cache is on: the
        join then reads the table through its value getter, ``streamapp.processing.table_value_getters``)."""
        self.description = description
        self.subtopology = subtopology
        self.application_id = application_id
        self.task_dir = task_dir
        self.state = TaskState.CREATED
        self.input_partitions: set[TopicPartition] = set()
        if state_manager is None:
            state_manager = StateManager(task_id, task_dir, store_factory, description, subtopology, application_id)
        self.state_manager = state_manager
        """The task's stores, changelog partitions and checkpoint (``streamapp.processing.state_manager``)."""
        self.stores: dict[str, ChangeLoggingKeyValueStore] = state_manager.stores
        self.windowed_state = WindowedStateAccess(description, self.stores)
        """Typed views of the window / session / suppression stores (rebuilt by ``initialize``)."""
        self.records_processed = 0
        self.metrics = ProcessorMetrics(str(task_id))
        self.sensors = TaskSensors(recording_level)
        """Kafka Streams' task, processor-node and state-store sensors (``streamapp.sensors``)."""
        self.sensors.timestamp = lambda: self._timestamp
        self.consumed_offsets: dict[TopicPartition, int] = {}
        """Next offset to read per input partition (last processed + 1): what a commit commits."""
        self.committed_offsets: dict[TopicPartition, int] = {}
        self._producer = producer
        self._functions = functions
        self._global_tables = global_tables
        self._sources: dict[str, Processor] = {}
        self._extractors: dict[str, TimestampExtractor] = {}
        self._routes: dict[str, _Route] = {}
        """Per source topic, the bound methods a record goes through (built with the processors)."""
        self._timestamp = -1
        self._handlers = handlers
        self._clock_ms = clock_ms
        self.input = PartitionGroup(max_task_idle_ms)
        self.processor_hooks = ProcessorHooks(
            str(task_id), application_id, lambda: self.stream_time, clock_ms, self._set_punctuation_timestamp
        )
        """Processor API state: process nodes' init/close and the punctuation queues (``processors.api``)."""
        self._current: ConsumerRecord | None = None
        """The source record being processed (what error handlers and dead letters refer to)."""
        self.record_context = RecordContext()
        """The headers of the record being processed, which every record forwarded for it carries (Kafka's
        ``ProcessorRecordContext``); ``None`` during punctuations."""
        self._final_results: dict[str, EmitProgress] = {}
        """Store -> final results of each emit-on-close aggregation (built by ``initialize``): what the task's
        commit metadata carries."""

    def __repr__(self) -> str:
        return f"StreamTask({self.id}, {self.state.value})"

    # -- lifecycle ---------------------------------------------------------------------------------

    def initialize(self) -> None:
        """Open the stores from local state (or take over the open stores of a recycled standby) and build the
        processor graph.

        Raises StoreLockedError (from the store factory) or TaskDirectoryLockedError while a previous owner
        (another stream thread of this instance, a standby) still holds the task's state; the task stays
        CREATED and may try again. Stores opened before the failure are closed again.
        """
        try:
            self.state_manager.open(self._current_timestamp)
            if self.record_cache is not None:
                self._join_tables = join_tables(self.description, self.subtopology.nodes)
                cached = cached_stores(self.description.nodes, self.description.stores)
                for name in (n for n in self.subtopology.stores if n in cached):
                    namespace = f"{self.id}-{name}"
                    self._caching[name] = CachingKeyValueStore(
                        self.stores[name], *self._serdes(name), self.record_cache, namespace, self.record_context
                    )
        except Exception:
            self._close_stores()
            raise
        self.windowed_state = WindowedStateAccess(self.description, self.stores)
        if self.record_cache is not None:
            for name, range_reads in cached_window_stores(self.description).items():
                if name in self.subtopology.stores:
                    self._caching[name] = self.windowed_state.enable_cache(
                        name, self.record_cache, f"{self.id}-{name}", self.record_context, range_reads=range_reads
                    )
            for name in cached_session_stores(self.description) & set(self.subtopology.stores):
                self._caching[name] = self.windowed_state.enable_session_cache(
                    name, self.record_cache, f"{self.id}-{name}", self.record_context
                )
        ctx = BuildContext(
            application_id=self.application_id,
            partition=self.id.partition,
            source_nodes=source_node_names(self.description, self.subtopology),
            functions=self._functions,
            topic_of=lambda node: self.description.repartition_topic(self.application_id, node),
            store=self._typed_store,
            send=self._producer.send,
            metrics=self.metrics,
            kinds=self.description.output_kinds(),
            global_tables=self._global_tables,
            windowed=self.windowed_state,
            record_context=self.record_context,
            processor_hooks=self.processor_hooks,
            sensors=self.sensors,
        )
        self._sources = build_task_processors(self.description, self.subtopology, ctx)
        self._final_results = ctx.final_results
        self._extractors = self._build_extractors()
        nodes = source_node_of_topic(self.description, self.subtopology, ctx)
        self._routes = {
            topic: _Route(source, self._extractors[topic], nodes[topic], self.sensors.e2e_of(nodes[topic]))
            for topic, source in self._sources.items()
        }
        self.state = TaskState.RESTORING

    def mark_running(self) -> None:
        """The stores are restored: run the Processor API's ``init`` of every process node (Kafka's
        ``StreamTask.initializeTopology`` after restoration), then process."""
        self.processor_hooks.init_processors()
        self.state = TaskState.RUNNING

    def punctuate_wall_clock(self, now_ms: int) -> bool:
        """Run the wall-clock punctuations due at ``now_ms`` (epoch ms of the thread's clock); True when one
        ran. The stream thread calls it for every RUNNING task each loop iteration (Kafka's
        ``StreamTask.maybePunctuateSystemTime``). Raises ProcessingError when a punctuator fails."""
        if self.state is not TaskState.RUNNING:
            return False
        self.sensors.now_ms = now_ms
        self.record_context.headers = self.record_context.source = None  # no input record (Kafka's punctuation)
        try:
            return self.processor_hooks.punctuate_wall_clock(now_ms)
        except PunctuationError as exc:
            raise ProcessingError(f"task {self.id}: {exc}") from exc

    @property
    def stream_time(self) -> int:
        """The largest timestamp (epoch ms) of a record this task processed; -1 before the first."""
        return self.input.stream_time

    def set_input_positions(self, positions: Mapping[TopicPartition, int | None]) -> None:
        """Where the consumer starts reading each input partition (the committed offsets; ``None``: unknown),
        so an empty partition's lag is known before its first record (``max.task.idle.ms``)."""
        for tp, offset in positions.items():
            queue = self._queue(tp)
            if queue.fetch_position is None and offset is not None:
                queue.fetch_position = offset

    def restore_commit_metadata(self, committed: Mapping[TopicPartition, OffsetAndMetadata | None]) -> None:
        """Before the first record: resume every emit-on-close aggregation from the close time the task's input
        partitions' committed metadata holds (``committed``: the group's committed offsets with their metadata;
        ``streamapp.processing.commit_metadata``), -1 for a store it does not name (nothing emitted as of that
        commit). Kafka's ``StreamTask.initializeTaskTimeAndProcessorMetadata``. Without metadata of the runtime
        (no commit yet, an older runtime's commit) they derive it from their restored stores at their first record
        (``FinalResults.resume``)."""
        if not self._final_results:
            return
        emitted = merge_emitted(found.metadata for found in committed.values() if found is not None)
        if emitted is None:
            return
        for store, final in self._final_results.items():
            final.restore_committed(emitted.get(store, -1))
        log.info("Task %s resumes its final results from the committed close times %s", self.id, emitted)

    def close(self, clean: bool) -> None:
        """Close the stores. ``clean``: the task was just committed, so its checkpoint is written; otherwise
        buffered writes are dropped and the stores stay at their last applied batch."""
        if self.state is TaskState.CLOSED:
            return
        self.processor_hooks.close_processors()
        self.discard_input()
        if clean and self.has_pending_writes():
            raise RuntimeError(f"task {self.id}: clean close with uncommitted store writes")
        if clean:
            self.state_manager.checkpoint()
        self._close_stores()
        self.state = TaskState.CLOSED
        log.info("Closed task %s (%s)", self.id, "clean" if clean else "dirty")

    def close_and_recycle_state(self) -> StateManager:
        """Close the task cleanly (it was just committed) but keep its state open, and return it for a standby of
        the task on this thread (Kafka's ``StreamTask.prepareRecycle`` / ``closeCleanAndRecycleState``): the
        record cache's entries of the task are evicted, the checkpoint is written, the stores and the folder lock
        stay held by the returned manager. Raises RuntimeError when the task has uncommitted store writes."""
        self.processor_hooks.close_processors()
        self.discard_input()
        if self.has_pending_writes():
            raise RuntimeError(f"task {self.id}: recycled with uncommitted store writes")
        self.state_manager.checkpoint()
        self._close_caches()
        self.state = TaskState.CLOSED
        log.info("Closed task %s (clean), its state recycled", self.id)
        return self.state_manager

    # -- processing --------------------------------------------------------------------------------

    def add_record(self, record: ConsumerRecord, partition: TopicPartition) -> int:
        """Buffer a consumed record of input ``partition``; returns how many that partition has buffered."""
        queue = self.input_queue(partition)
        queue.add(record)
        return len(queue)

    def input_queue(self, partition: TopicPartition) -> RecordQueue:
        """The buffer of input ``partition`` (created on first use); ``RecordQueue.add`` buffers a record."""
        queue = self.input.queues.get(partition)
        return queue if queue is not None else self._queue(partition)

    def process_ready(self, watermarks: Watermarks, now_ms: int | None = None, max_records: int = UNBOUNDED) -> int:
        """Process buffered records while the task is ready (see the module docstring), at most ``max_records`` of
        them (Kafka's ``TaskExecutor.processTask`` with ``maxNumRecords``: the stream thread's round-robin slice);
        returns how many.

        Raises ProcessingError when a handler fails, KafkaClientError from the producer (fatal, fenced or an
        aborted transaction: the caller closes the task dirty).
        """
        group = self.input
        processed = 0
        now = self._clock_ms() if now_ms is None else now_ms
        self.sensors.now_ms = now  # Kafka's cached wall clock of the iteration (record-e2e-latency)
        if len(group.queues) == 1:
            (queue,) = group.queues.values()
            return self._drain(queue, max_records)
        fetched = _FetchedWatermarks(watermarks)
        while processed < max_records:
            enforced = group.enforced_processing
            if not group.ready(now, fetched):
                break
            alone = _only_buffered(group)
            if alone is not None:
                # The other queues are empty and stay so during this call (records are added between calls), and
                # their lags are this call's: every ready() until ``alone`` drains answers as this one did.
                # Drain it as a task's only queue, counting the enforced processing ready() would have counted.
                enforcing = group.enforced_processing != enforced
                taken = self._drain(alone, max_records - processed)
                if enforcing and taken > 1:
                    group.enforced_processing += taken - 1
                processed += taken
                if alone.head is None and not alone.records:
                    continue
                break  # the slice is used up
            head = group.next_record()
            if head is None:
                break
            self._process_stamped(head)
            processed += 1
        return processed

    def process(self, record: ConsumerRecord, partition: TopicPartition | None = None) -> None:
        """Buffer one consumed record and process everything buffered at once, without waiting for empty
        partitions (a one-record step, e.g. for tests). Raises ProcessingError."""
        tp = partition or record.topic_partition
        self.add_record(record, tp)
        self.sensors.now_ms = self._clock_ms()
        while (stamped := self.input.next_record()) is not None:
            self._process_stamped(stamped)

    def discard_input(self) -> None:
        """Drop the buffered, unprocessed records (the task is closed or rewound)."""
        self.input.clear()

    def remove_input_partition(self, partition: TopicPartition) -> None:
        self.input.remove_queue(partition)

    def _drain(self, queue: RecordQueue, max_records: int) -> int:
        """Process the buffered records of a task's only queue, in offset order, at most ``max_records`` (records
        a handler or the extractor skipped count too); returns how many were processed.

        The same steps as ``peek`` / ``pop`` / ``_process_stamped`` record by record (stamp the head, advance
        partition and stream time, process it), without a ``StampedRecord`` per record: the hot path.
        """
        group = self.input
        processed = 0
        head = queue.head
        if head is not None and max_records > 0:
            queue.head = None
            if head.timestamp > group.stream_time:
                group.stream_time = head.timestamp
            self._process_stamped(head)
            processed += 1
        records = queue.records
        partition = queue.partition
        routes = self._routes
        for _ in range(min(len(records), max_records - processed)):
            record = records.popleft()
            route = routes.get(record.topic)
            if route is None:
                raise ProcessingError(f"task {self.id}: no source node reads topic {record.topic}")
            stamped = self._stamp_values(route, queue, record)
            if stamped is None:
                queue.on_skipped(record)
                continue
            key, value, timestamp = stamped
            if timestamp > queue.partition_time:
                queue.partition_time = timestamp
            if timestamp > group.stream_time:
                group.stream_time = timestamp
            self._process_record(route, record, key, value, timestamp, partition)
            processed += 1
        return processed

    def _process_stamped(self, stamped: StampedRecord) -> None:
        record = stamped.record
        route, partition = self._routes[record.topic], TopicPartition(record.topic, record.partition)
        self._process_record(route, record, stamped.key, stamped.value, stamped.timestamp, partition)

    def _process_record(
        self, route: _Route, record: ConsumerRecord, key: Any, value: Any, timestamp: int, partition: TopicPartition
    ) -> None:
        """Process one stamped record of input ``partition`` through its source node; errors go to the handlers."""
        self._current = record
        self._timestamp = timestamp
        context = self.record_context
        context.headers, context.source = record.headers, record
        sensors = self.sensors
        route.e2e.record(sensors.now_ms - timestamp, sensors.now_ms)  # Kafka's StreamTask.doProcess, at the source
        if sensors.level:  # DEBUG or TRACE: the source node's process-total
            sensors.count_node(route.node)
        try:
            route.forward(key, value, timestamp)
            hooks = self.processor_hooks
            if hooks.stream_time_queue:
                context.headers = context.source = None  # a punctuation has no input record (Kafka's)
                hooks.punctuate_stream_time()  # Kafka's maybePunctuateStreamTime
        except (RecordSerializationError, DeliveryError) as exc:
            self._on_error("production", record, exc)
        except (KafkaClientError, ProcessingError):
            raise
        except Exception as exc:
            self._on_error("processing", record, exc)
        self.consumed_offsets[partition] = record.offset + 1
        self.records_processed += 1

    def _stamp(self, queue: RecordQueue, record: ConsumerRecord) -> StampedRecord | None:
        """Deserialize and time-stamp a head record (``RecordQueue``'s callback); ``None`` skips it."""
        route = self._routes.get(record.topic)
        if route is None:
            raise ProcessingError(f"task {self.id}: no source node reads topic {record.topic}")
        stamped = self._stamp_values(route, queue, record)
        if stamped is None:
            return None
        return StampedRecord(record, *stamped)

    def _stamp_values(self, route: _Route, queue: RecordQueue, record: ConsumerRecord) -> tuple[Any, Any, int] | None:
        """``(key, value, timestamp)`` of a record: deserialized, timestamp extracted; ``None`` skips it (a
        handler continued, or the extractor said skip). Raises ProcessingError (fail handlers, invalid time)."""
        key: Any = record.key
        value: Any = record.value
        deserialize = route.deserialize
        if deserialize is not None:
            try:
                key, value = deserialize(key, value)
            except Exception as exc:
                self._on_error("deserialization", record, exc)
                return None
        timestamp: int | None = record.timestamp
        if not route.record_time or timestamp is None or timestamp < 0:
            try:
                timestamp = route.extractor.extract(key, value, record.timestamp, queue.partition_time)
            except InvalidTimestampError as exc:
                raise ProcessingError(
                    f"task {self.id}: record {record.topic}-{record.partition}@{record.offset}: {exc}"
                ) from exc
            if timestamp is None:
                self.metrics.count_drop(INVALID_TIMESTAMP)
                return None
        return key, value, timestamp

    def _on_skipped(self, record: ConsumerRecord) -> None:
        self.consumed_offsets[TopicPartition(record.topic, record.partition)] = record.offset + 1

    def _on_error(self, stage: str, record: ConsumerRecord, exc: Exception) -> None:
        """Let the handler of ``stage`` decide; without handlers (unit tests) every failure is fatal."""
        handlers = self._handlers
        if handlers is None:
            raise ProcessingError(
                f"task {self.id}: failed to process record {record.topic}-{record.partition}@{record.offset}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        if stage == "deserialization":
            handlers.deserialization_failed(record, exc, str(self.id))
        elif stage == "production":
            handlers.production_failed(record, exc, str(self.id))
        else:
            handlers.processing_failed(record, exc, str(self.id))
        self.metrics.count_drop(DESERIALIZATION_ERROR if stage == "deserialization" else PROCESSING_ERROR)

    def _queue(self, partition: TopicPartition) -> RecordQueue:
        queue = self.input.queues.get(partition)
        if queue is None:
            queue = RecordQueue(partition, self._stamp, self._on_skipped)
            self.input.add_queue(queue)
        return queue

    def _build_extractors(self) -> dict[str, TimestampExtractor]:
        """The timestamp extractor of every topic this task reads (repartition topics: the record timestamp,
        which the upstream task set to the extracted time)."""
        extractors: dict[str, TimestampExtractor] = {}
        record = build_extractor(None, self._clock_ms)
        for topic in self._sources:
            extractors[topic] = record
        for name in source_node_names(self.description, self.subtopology):
            node = self.description.node(name)
            if isinstance(node, SourceNode):
                spec = getattr(node, "timestamp_extractor", None)
                if spec is not None:
                    extractor = build_extractor(spec, self._clock_ms)
                    for topic in node.topics:
                        extractors[topic] = extractor
        return extractors

    # -- commit ------------------------------------------------------------------------------------

    def commit_needed(self) -> bool:
        return self.consumed_offsets != self.committed_offsets or self.has_pending_writes()

    def has_pending_writes(self) -> bool:
        return self.state_manager.has_pending or any(caching.has_dirty for caching in self._caching.values())

    def flush_cache(self) -> None:
        """Commit step 0: flush the record cache's dirty entries of this task's stores, which forwards them
        downstream and writes them to the changelogging stores (Kafka's ``StreamTask.prepareCommit`` ->
        ``flushCache``). Stores flush in the sub-topology's order, again while a flush dirtied another one."""
        for _ in range(len(self._caching) + 1):
            if not any(caching.has_dirty for caching in self._caching.values()):
                return
            for caching in self._caching.values():
                caching.flush()

    @property
    def pending_bytes(self) -> int:
        return self.state_manager.pending_bytes

    def send_changelog(self) -> None:
        """Commit step 1: queue the buffered store writes to the changelog partitions."""
        self.state_manager.send_changelog(self._producer)

    def offsets_to_commit(self) -> dict[TopicPartition, int]:
        """Commit step 2: the consumed offsets not committed yet."""
        return {tp: off for tp, off in self.consumed_offsets.items() if self.committed_offsets.get(tp) != off}

    def commit_metadata(self) -> str | None:
        """Commit step 2: the metadata committed with each of ``offsets_to_commit`` (Kafka's
        ``StreamTask.committableOffsetsAndMetadata``): the close times of the emit-on-close aggregations' last
        emissions (``streamapp.processing.commit_metadata``). ``None`` (commit no metadata) for a task without such
        aggregations, or while one has not resumed yet (skipped records moved the offsets before its first record:
        committing -1 would make the next owner emit every closed window again)."""
        finals = self._final_results
        if not finals or not all(final.resumed for final in finals.values()):
            return None
        return encode_emitted({store: final.last_close_time for store, final in finals.items()})

    def complete_commit(self) -> None:
        """Commit step 3, after the offsets were committed: apply store batches, write the checkpoint."""
        self.state_manager.apply()
        self.committed_offsets = dict(self.consumed_offsets)

    def discard_pending(self) -> None:
        """Drop cached and buffered store writes and uncommitted progress (the commit failed)."""
        for caching in self._caching.values():
            caching.discard()
        self.state_manager.discard()
        self.consumed_offsets = dict(self.committed_offsets)

    def changelog_offsets(self) -> dict[TopicPartition, int]:
        """Offset of the last changelog record in each store (stores with none are left out)."""
        return self.state_manager.changelog_offsets()

    # -- internals ---------------------------------------------------------------------------------

    def _current_timestamp(self) -> int:
        return self._timestamp

    def _set_punctuation_timestamp(self, timestamp: int) -> None:
        self._timestamp = timestamp

    def read_store(self, name: str) -> TypedKeyValueStore:
        """Key-value store ``name`` as the task's processors read it, the record cache included: what an
        interactive query reads (Kafka's IQv2 reads through the caching layer). KeyError for a store of another
        task."""
        return self._typed_store(name)

    def _typed_store(self, name: str) -> TypedKeyValueStore:
        """Store ``name`` as the task's processors read and write it: behind the record cache when it is cached; the
        store of a stream-table join whose table is cached reads that table's value getter (Kafka's
        ``KStreamKTableJoinProcessor`` with ``KTableValueGetter``: a table update not flushed yet is joined too)."""
        caching = self._caching.get(name)
        if isinstance(caching, CachingKeyValueStore):
            return cast(TypedKeyValueStore, self.sensors.store(STORE_METRICS_SCOPE, name, caching))
        table = self._join_tables.get(name)
        if table is not None:
            getter = table_value_getter(self.description, table, self._typed_store, self._functions)
            if getter is not None:
                return JoinTableView(self.stores[name], *self._serdes(name), getter)
        typed = TypedKeyValueStore(self.stores[name], *self._serdes(name))
        return cast(TypedKeyValueStore, self.sensors.store(STORE_METRICS_SCOPE, name, typed))

    def _serdes(self, name: str) -> tuple[Serde, Serde]:
        """Key and value serdes of store ``name``, bound to its changelog topic (as Kafka Streams serializes store
        data)."""
        spec, topic = self.description.store(name), self.stores[name].changelog.topic
        return serde_for(spec.key_serde, topic, is_key=True), serde_for(spec.value_serde, topic)

    def _close_caches(self) -> None:
        for caching in self._caching.values():
            caching.close()
        self._caching.clear()

    def _close_stores(self) -> None:
        self._close_caches()
        self.state_manager.close(checkpoint=False)
