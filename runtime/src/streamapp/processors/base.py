"""What every processor is, what it may use from its task while it is built, and how it is registered.

A processor receives ``(key, value, timestamp)`` (timestamp in epoch ms) and forwards zero or more
records to its children, synchronously, depth first, like Kafka Streams' ``ProcessorNode``. Source
processors receive the raw key and value bytes of a consumed record. The headers of the record being
processed are not an argument: they sit in the task's ``RecordContext`` (Kafka's ``ProcessorRecordContext``),
which sinks read, so every record forwarded while a record is processed carries its headers.

Each family module (``streamapp.processors.<family>``, the families of ``streamapp.topology.nodes``) keeps
its builders in a ``FamilyBuilders`` table, filled by ``@BUILDERS.builds(NodeClass, ...)`` on each builder.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar

from streamapp.kafka.types import ConsumerRecord, Headers
from streamapp.processors.drops import ProcessorMetrics
from streamapp.sensors import TaskSensors
from streamapp.serdes import Serde
from streamapp.state.caching_session_store import CachingSessionStore
from streamapp.state.caching_window_store import CachingWindowStore
from streamapp.state.session_store import SessionStore
from streamapp.state.stores import StoreSerializationError, TypedKeyValueStore, store_mismatch
from streamapp.state.suppression_buffer import SuppressionBuffer
from streamapp.state.versioned import VersionedKeyValueStore
from streamapp.state.window_store import LoggedBytesStore, WindowStore
from streamapp.state.windowed_access import WindowedStateAccess
from streamapp.topology import FAMILIES, NodeBase

if TYPE_CHECKING:
    from streamapp.processors.process import ProcessorHooks

__all__ = [
    "BuildContext",
    "Change",
    "EmitProgress",
    "FamilyBuilders",
    "ForwardProcessor",
    "Processor",
    "ProcessorBuilder",
    "ProcessorMetrics",
    "RecordContext",
    "RecordSender",
    "StoreSerializationError",
    "ToPartition",
    "forward_on_flush",
    "store_mismatch",
]


@dataclass(slots=True, unsafe_hash=True)
class Change:
    """The value a table-valued node forwards: the key's new and previous value (Kafka's ``Change``).

    ``None`` means absent: ``Change(v, None)`` inserts, ``Change(None, v)`` deletes (a tombstone),
    ``Change(v2, v1)`` updates. Tables here always carry the old value (Kafka's ``sendOldValues``), so a
    subtractor or a table join downstream can retract it. Treat it as immutable; it is not a frozen dataclass
    only because one is built per table update: a frozen one costs ~0.2 us more to construct.
    """

    new_value: Any
    old_value: Any


class ToPartition(NamedTuple):
    """A record value a sink sends to ``partition`` of its topic rather than to the key's murmur2 partition (Kafka's
    ``StreamPartitioner`` choosing the partition per record): the foreign-key join's responses go back to the
    partition of the left record's task (``KTableImpl``'s ``defaultForeignResponseSinkPartitioner``, the primary
    partition the subscription carried), whatever partitioner wrote the left table's topic."""

    value: Any
    partition: int


class Processor(Protocol):
    """One node of a task's processor graph."""

    def process(self, key: Any, value: Any, timestamp: int) -> None: ...


class ForwardProcessor:
    """Forwards every record unchanged (Kafka's ``KStreamPassThrough`` of ``merge``, ``KTablePassThrough`` of a
    cogroup)."""

    def __init__(self, children: Sequence[Processor]) -> None:
        self._children = tuple(children)

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        for child in self._children:
            child.process(key, value, timestamp)


def forward_on_flush(store: TypedKeyValueStore, children: Sequence[Processor], node: str = "") -> bool:
    """Make a cached store's flushes forward ``Change(new, old)`` to ``children`` at the flushed entry's timestamp
    (Kafka's ``TimestampedTupleForwarder`` with caching on: the ``CachingKeyValueStore`` forwards, the
    processor does not). True when ``store`` is cached, i.e. the processor must not forward itself. ``node``: the
    processor's name, which a flush's ``StoreSerializationError`` gives (``store_mismatch``)."""
    if not store.cached:
        return False
    targets = tuple(children)

    def forward(key: Any, new: Any, old: Any, timestamp: int) -> None:
        change = Change(new, old)
        for child in targets:
            child.process(key, change, timestamp)

    store.set_flush_listener(forward, node=node)
    return True


class RecordSender(Protocol):
    """Sends a serialized record to a topic; without ``partition`` the key's murmur2 hash picks it. ``headers``
    is passed only when the record has some, ``partition`` only for a ``ToPartition`` value."""

    def __call__(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        *,
        headers: Headers | None = None,
        partition: int | None = None,
    ) -> None: ...


class RecordContext:
    """The headers of the record a task is processing (Kafka's ``ProcessorRecordContext.headers()``), shared by
    the task's processors: the task sets them before it forwards a consumed record (``None``: the record has
    none; punctuations run without headers, as Kafka's), sinks write them, and a store or buffer that emits later
    (the record cache, suppress) keeps each entry's headers and sets them back while it forwards the entry.

    ``source``: the consumed record being processed (its topic, partition and offset name it in the log line of
    a dropped record, ``streamapp.processors.drops``); ``None`` outside a record (a punctuation)."""

    __slots__ = ("headers", "source")

    def __init__(self) -> None:
        self.headers: Headers | None = None
        self.source: ConsumerRecord | None = None


class EmitProgress(Protocol):
    """What a task commits and restores of an ``EmitStrategy.on_window_close()`` aggregation's final results
    (``streamapp.processors.windowed.base.FinalResults``): the close time (ms) of its last emission, -1 before the
    first, and whether it was resumed (from commit metadata, or from its restored store at the first record)."""

    last_close_time: int
    resumed: bool

    def restore_committed(self, close_time: int) -> None: ...


@dataclass
class BuildContext:
    """What the task offers its processors at build time.

    ``source_nodes``: names of the nodes that act as sources in this sub-topology (source nodes and the
    repartition nodes it reads). ``functions``: resolved user functions, ``{node: {parameter: callable}}``.
    ``topic_of``: resolves a repartition node name to its topic. ``store``: the typed view of a store.
    ``kinds``: the output kind of every node (``TopologyDescription.output_kinds()``); a node missing from it
    counts as a stream.
    """

    application_id: str
    partition: int
    source_nodes: set[str]
    functions: dict[str, dict[str, Callable[..., Any]]]
    topic_of: Callable[[str], str]
    store: Callable[[str], TypedKeyValueStore]
    send: RecordSender
    metrics: ProcessorMetrics = field(default_factory=ProcessorMetrics)
    kinds: Mapping[str, str | None] = field(default_factory=dict)
    global_tables: Callable[[str], TypedKeyValueStore] | None = None
    """The worker's global tables by ``global_table`` node name (``None``: the topology has none)."""
    windowed: WindowedStateAccess | None = None
    """The task's window / session / suppression store views (``streamapp.state.windowed_access``)."""
    record_context: RecordContext = field(default_factory=RecordContext)
    """The headers of the record being processed (the task's; a bare graph gets its own)."""
    processor_hooks: ProcessorHooks | None = None
    """The task's Processor API state (``streamapp.processors.process``): process nodes register there so their
    ``init`` runs when the task starts running; ``None``: a bare graph, process nodes initialize at once."""
    sensors: TaskSensors | None = None
    """The task's Kafka Streams sensors (``streamapp.sensors``): the graph builder puts a node's ``NodeSensor``
    between it and its parents where ``metrics.recording.level`` asks for one; ``None``: none (a bare graph)."""
    final_results: dict[str, EmitProgress] = field(default_factory=dict)
    """Store name -> the final results of the emit-on-close aggregation writing it: registered by the windowed
    aggregation builder, committed and restored by the task (``streamapp.processing.commit_metadata``)."""

    def function(self, node: str, parameter: str) -> Callable[..., Any]:
        """The resolved user function of ``node``'s ``parameter``; KeyError if it was not resolved."""
        return self.functions[node][parameter]

    def global_store(self, node: str) -> TypedKeyValueStore:
        """The worker's copy of the ``global_table`` node ``node``; KeyError when there is none."""
        if self.global_tables is None:
            raise KeyError(f"global table '{node}': this task has no global state (no global consumer)")
        return self.global_tables(node)

    def window_store(self, name: str) -> WindowStore:
        """The task's ``window`` store ``name``; KeyError when the task has none."""
        return self._windowed().window_store(name)

    def cached_window_store(self, name: str) -> WindowStore | CachingWindowStore:
        """The task's ``window`` store ``name`` as a time-window or sliding-window aggregation writes it: behind
        the record cache when the task caches it (``streamapp.state.caching_window_store``), else the plain view."""
        return self._windowed().cached_window_store(name)

    def session_store(self, name: str) -> SessionStore:
        """The task's ``session`` store ``name``; KeyError when the task has none."""
        return self._windowed().session_store(name)

    def cached_session_store(self, name: str) -> SessionStore | CachingSessionStore:
        """The task's ``session`` store ``name`` as a session-window aggregation writes it: behind the record
        cache when the task caches it (``streamapp.state.caching_session_store``), else the plain view."""
        return self._windowed().cached_session_store(name)

    def suppression_buffer(self, name: str) -> SuppressionBuffer:
        """The suppression buffer kept in the task's ``key_value`` store ``name``."""
        return self._windowed().suppression_buffer(name)

    def store_serdes(self, name: str) -> tuple[Serde, Serde]:
        """The key and value serdes of the task's store ``name``, bound to its changelog topic."""
        return self._windowed().store_serdes(name)

    def store_type(self, name: str) -> str:
        """The type of the task's store ``name`` (``StoreSpec.type``: ``key_value``, ``versioned``, ...)."""
        return "key_value" if self.windowed is None else self.windowed.store_type(name)

    def versioned_store(self, name: str) -> VersionedKeyValueStore:
        """The task's ``versioned`` store ``name`` (``streamapp.state.versioned``); KeyError when the task has none."""
        return self._windowed().versioned_store(name)

    def logged_store(self, name: str) -> LoggedBytesStore:
        """The task's buffered, changelogged bytes store ``name`` (custom layouts, e.g. join buffers)."""
        return self._windowed().logged_store(name)

    def close_grace(self, node: str) -> int:
        """The window close grace (ms) the suppress node ``node`` waits for (from its upstream window)."""
        return self._windowed().close_grace(node)

    def _windowed(self) -> WindowedStateAccess:
        if self.windowed is None:
            raise KeyError("this task offers no windowed state (BuildContext.windowed is not set)")
        return self.windowed

    def kind_of(self, node: str) -> str:
        """The output kind of ``node``: ``"stream"``, ``"table"`` or ``"grouped_table"``."""
        return self.kinds.get(node) or "stream"


ProcessorBuilder = Callable[[Any, Sequence[Processor], BuildContext], Processor]
"""Builds a node's processor from the node (an instance of the classes it is registered for), the processors
of its children in the task, and the task's ``BuildContext``."""

_BuilderT = TypeVar("_BuilderT", bound=Callable[..., Processor])


class FamilyBuilders(Mapping[str, ProcessorBuilder]):
    """The processor builders of one node family, by node type.

    ``@BUILDERS.builds(FilterNode, FilterNotNode)`` registers the decorated function for those node classes,
    which must belong to this family; a type registered twice is an error at import. ``parts`` merges the
    tables of a family split over several modules.
    """

    def __init__(self, family: str, *parts: FamilyBuilders) -> None:
        if family not in FAMILIES:
            raise ValueError(f"unknown node family '{family}'; families: {', '.join(FAMILIES)}")
        self.family = family
        self._builders: dict[str, ProcessorBuilder] = {}
        for part in parts:
            if part.family != family:
                raise ValueError(f"builders of family '{part.family}' merged into family '{family}'")
            for node_type, builder in part.items():
                self._register(node_type, builder)

    def builds(self, *node_classes: type[NodeBase]) -> Callable[[_BuilderT], _BuilderT]:
        """Register the decorated function as the builder of ``node_classes``."""

        def register(builder: _BuilderT) -> _BuilderT:
            for cls in node_classes:
                if cls.type_name is None or cls.family != self.family:
                    raise TypeError(f"{cls.__name__} is not a node type of family '{self.family}'")
                self._register(cls.type_name, builder)
            return builder

        return register

    def _register(self, node_type: str, builder: ProcessorBuilder) -> None:
        if node_type in self._builders:
            raise TypeError(f"node type '{node_type}' has two processor builders")
        self._builders[node_type] = builder

    def __getitem__(self, node_type: str) -> ProcessorBuilder:
        return self._builders[node_type]

    def __iter__(self) -> Iterator[str]:
        return iter(self._builders)

    def __len__(self) -> int:
        return len(self._builders)
