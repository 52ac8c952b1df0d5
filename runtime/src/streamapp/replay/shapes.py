"""Which sub-topologies the replay runs with Spark's own operators: the shapes, decided on the description alone.

A sub-topology runs *native* when Spark's operators give exactly the records the runtime's ``StreamTask`` would
write, else through the runtime's task (``streamapp.replay.tasks``, the fallback). Two shapes are native, with no
``default.key.serde`` / ``default.value.serde`` in the config:

The **keyed count** of a stream read from one external topic (``native_count``, ``NativeCount``)::

    source(topic, keySerde string|bytes, no timestampExtractor) -> count(key_value store) -> to_stream
        -> sink(fixed topic, the source's key serde, value serde json|long)

The **windowed count** of a stream read from one external topic, tumbling or hopping windows, emitting every update
(``native_windowed_count``, ``NativeWindowedCount``; ``emitStrategy: on_window_close`` runs through the task)::

    source(topic, keySerde string|bytes, no timestampExtractor) -> windowed_count(window store) -> to_stream
        -> sink(fixed topic, keySerde windowed:<the source's key serde>[:size], value serde json|long)

``node_paths`` says per node which path the replay takes (``PATH_*``) before any job. What Spark computes for
each shape and the per-record step it needs (the runtime's serdes per Arrow batch, where a record may still send
the sub-topology to the task path) are in ``streamapp.replay.spark.native`` and ``streamapp.replay.spark.native_stage``.

Plain Python on the topology description (no pyarrow, no pyspark): the operator asks it before it starts a Job
(``emit: final`` needs every sub-topology native), in an image that has neither.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from streamapp.topology import SinkNode, Subtopology, TopologyDescription
from streamapp.topology.nodes.aggregate import CountNode
from streamapp.topology.nodes.io import SourceNode
from streamapp.topology.nodes.stateless import ToStreamNode
from streamapp.topology.nodes.windowed import WindowedCountNode
from streamapp.topology.windows import WindowSpec

__all__ = [
    "PATH_NATIVE_COUNT",
    "PATH_NATIVE_WINDOWED_COUNT",
    "PATH_TASK",
    "NativeCount",
    "NativeWindowedCount",
    "native_count",
    "native_windowed_count",
    "node_paths",
]

PATH_NATIVE_COUNT = "spark-native: keyed count (row_number over key, the changelog from each key's last row)"
PATH_NATIVE_WINDOWED_COUNT = (
    "spark-native: windowed count (stream time as a running max, late windows filtered, row_number over key and "
    "window, the changelog from each window's last row)"
)
PATH_TASK = "python task: the runtime's StreamTask per task (mapInArrow)"

_KEY_SERDES = frozenset({"string", "bytes"})
"""Key serdes whose serialize(deserialize(bytes)) is the bytes themselves, so Spark may keep the input's bytes."""
_COUNT_VALUE_SERDES = frozenset({"json", "long"})
"""Sink / store value serdes of a count whose bytes Spark writes itself (``str(n)`` / 8-byte big-endian)."""
_DEFAULT_SERDE_KEYS = ("default.key.serde", "default.value.serde")


@dataclass(frozen=True)
class NativeCount:
    """A keyed count sub-topology (module docstring) as Spark runs it: names, topics and serdes."""

    subtopology: int
    source_topic: str
    key_serde: str
    value_serde: str
    sink_topic: str
    sink_value_serde: str
    store: str
    store_value_serde: str
    changelog_topic: str
    nodes: tuple[str, ...]


def _shape(
    description: TopologyDescription, sub: Subtopology, config: Mapping[str, Any], aggregate: type[Any]
) -> tuple[SourceNode, Any, SinkNode] | None:
    """``(source, aggregation, sink)`` when ``sub`` is exactly ``source -> aggregate -> to_stream -> sink`` over one
    external topic, with no timestamp extractor, no default serdes and a fixed sink topic, else ``None``."""
    if any(config.get(key) for key in _DEFAULT_SERDE_KEYS) or len(sub.nodes) != 4:
        return None
    if len(sub.source_topics) != 1 or sub.source_topics[0].internal or len(sub.sink_topics) != 1:
        return None
    nodes = {description.node(name).type: description.node(name) for name in sub.nodes}
    source, counting, to_stream, sink = (nodes.get(t) for t in ("source", aggregate.type_name, "to_stream", "sink"))
    if not (
        isinstance(source, SourceNode)
        and isinstance(counting, aggregate)
        and isinstance(to_stream, ToStreamNode)
        and isinstance(sink, SinkNode)
    ):
        return None
    chain = counting.input == source.name and to_stream.input == counting.name and sink.input == to_stream.name
    if not chain or source.timestamp_extractor is not None or len(source.topics) != 1 or sink.topic is None:
        return None
    if len(description.children(source.name)) != 1 or len(description.children(counting.name)) != 1:
        return None
    if source.key_serde not in _KEY_SERDES:
        return None
    return source, counting, sink


def native_count(description: TopologyDescription, sub: Subtopology, config: Mapping[str, Any]) -> NativeCount | None:
    """The sub-topology as a ``NativeCount`` when it has exactly that shape (module docstring), else ``None``."""
    shape = _shape(description, sub, config, CountNode)
    if shape is None:
        return None
    source, count, sink = shape
    store = description.store(count.store)
    if store.type != "key_value":
        return None
    serdes_ok = (
        store.key_serde == source.key_serde
        and sink.key_serde == source.key_serde
        and sink.value_serde in _COUNT_VALUE_SERDES
        and store.value_serde in _COUNT_VALUE_SERDES
    )
    return _native(description, sub, config, source, sink, store) if serdes_ok else None


def _native(
    description: TopologyDescription,
    sub: Subtopology,
    config: Mapping[str, Any],
    source: SourceNode,
    sink: SinkNode,
    store: Any,
) -> NativeCount:
    assert sink.topic is not None
    application_id = str(config["application.id"])
    return NativeCount(
        sub.id,
        source.topics[0],
        source.key_serde,
        source.value_serde,
        sink.topic,
        sink.value_serde,
        store.name,
        store.value_serde,
        description.changelog_topic(application_id, store.name),
        tuple(sub.nodes),
    )


@dataclass(frozen=True)
class NativeWindowedCount:
    """A windowed count sub-topology (module docstring) as Spark runs it: its topics, serdes, store and changelog
    (``count``, named as for the keyed count) and its windows."""

    count: NativeCount
    windows: WindowSpec

    @property
    def windows_per_record(self) -> int:
        """The most windows one record falls into: ``ceil(size / advance)``."""
        return -(-self.windows.size // self.windows.advance)


def native_windowed_count(
    description: TopologyDescription, sub: Subtopology, config: Mapping[str, Any]
) -> NativeWindowedCount | None:
    """The sub-topology as a ``NativeWindowedCount`` when it has exactly that shape (module docstring), else
    ``None``."""
    shape = _shape(description, sub, config, WindowedCountNode)
    if shape is None:
        return None
    source, count, sink = shape
    if not count.windows.is_time_window or count.emits_on_window_close:
        return None  # final results only (EmitStrategy.onWindowClose) run through the task
    store = description.store(count.store)
    kind, _, inner = (sink.key_serde or "").partition(":")
    serdes_ok = (
        store.type == "window"
        and not store.retain_duplicates
        and store.key_serde == source.key_serde
        and kind == "windowed"
        and inner.partition(":")[0] == source.key_serde
        and sink.value_serde in _COUNT_VALUE_SERDES
        and store.value_serde in _COUNT_VALUE_SERDES
    )
    if not serdes_ok:
        return None
    return NativeWindowedCount(_native(description, sub, config, source, sink, store), count.windows)


def node_paths(description: TopologyDescription, config: Mapping[str, Any]) -> dict[str, str]:
    """How the replay runs each node: ``PATH_NATIVE_COUNT``, ``PATH_NATIVE_WINDOWED_COUNT`` or ``PATH_TASK`` (by
    node name; a native sub-topology still takes the task path when a record needs it,
    ``streamapp.replay.spark.native``)."""
    paths: dict[str, str] = {}
    for sub in description.subtopologies():
        path = PATH_TASK
        if native_count(description, sub, config) is not None:
            path = PATH_NATIVE_COUNT
        elif native_windowed_count(description, sub, config) is not None:
            path = PATH_NATIVE_WINDOWED_COUNT
        paths.update(dict.fromkeys(sub.nodes, path))
    return paths
