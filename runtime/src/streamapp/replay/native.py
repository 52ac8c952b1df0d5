"""Which sub-topologies the replay runs with Spark's own operators, and the per-batch Python step they need.

A sub-topology runs *native* when Spark's operators give exactly the records the runtime's ``StreamTask`` would
write, else through the runtime's task (``streamapp.replay.tasks``, the fallback). Today one shape is native,
the keyed count of a stream read from one external topic::

    source(topic, keySerde string|bytes, no timestampExtractor) -> count(key_value store) -> to_stream
        -> sink(fixed topic, the source's key serde, value serde json|long)

For that shape, per task (one input partition, offset order) the runtime's ``CountProcessor`` emits, for every
record with a non-null key and value, the running count of its key with the key's largest timestamp so far
(KIP-258: the later of the record's and the stored aggregate's), to the partition ``murmur2(key bytes)`` of the
sink topic; at the end its changelog gets one record per key (in the order keys were first seen) with the final
count and the key's largest timestamp. Spark computes that with ``row_number`` and a running ``max`` over
``(partition, key)`` ordered by offset and a ``groupBy(partition, key)``
(``streamapp.replay.engine``). The one step Spark cannot do identically is deserializing key and value with the
runtime's serdes (a record whose value is JSON ``null`` is dropped; bytes that do not deserialize go to the
deserialization exception handler): ``classify_batch`` does it per Arrow batch with the runtime's own serdes and
marks each record ``COUNTED``, ``DROPPED`` or ``FALLBACK``. A single ``FALLBACK`` record (bytes a serde refuses,
a negative timestamp) sends the whole sub-topology to the task path, which applies the handlers exactly.

The **windowed count** of a stream read from one external topic (tumbling or hopping windows)::

    source(topic, keySerde string|bytes, no timestampExtractor) -> windowed_count(window store) -> to_stream
        -> sink(fixed topic, keySerde windowed:<the source's key serde>[:size], value serde json|long)

runs natively too. Per task the runtime's ``TimeWindowAggregateProcessor`` drops a record with a null key (before
its stream time moves), advances stream time to the largest timestamp seen so far (the record's own included),
and for each window ``[start, start + size)`` containing the record (``WindowSpec.windows_for``, oldest first)
drops it as late when ``start + size <= streamTime - grace``, else emits the window's running count with the
largest timestamp folded into it, keyed ``key bytes + start`` (8-byte big-endian), to the partition
``murmur2(that key)`` of the sink topic. A null value is counted (Kafka checks only the key). Spark computes stream
time as a running ``max(timestamp)`` over the task ordered by offset, explodes the windows, filters the late ones
and counts with ``row_number`` over ``(task, key, start)``; ``classify_windowed_batch`` gives each record its
status, window starts and the sink partition of each windowed key (``streamapp.replay.partitions``, vectorized).
The window store's changelog has one record per window ever written (the replay is one commit interval), in the
order windows were first written: key ``key bytes + start + seqnum 0``, value ``timestamp + count`` (Kafka's
layouts, ``streamapp.state.window_store``), at the timestamp of the window's last record.

Plain Python and pyarrow (no pyspark): the operator's checks and the tests use it without Spark.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from streamapp.partitioner import partition_for_key
from streamapp.replay.partitions import partitions_for_keys
from streamapp.serdes import serde_for
from streamapp.topology import SinkNode, Subtopology, TopologyDescription
from streamapp.topology.nodes.aggregate import CountNode
from streamapp.topology.nodes.io import SourceNode
from streamapp.topology.nodes.stateless import ToStreamNode
from streamapp.topology.nodes.windowed import WindowedCountNode
from streamapp.topology.windows import WindowSpec

__all__ = [
    "CLASSIFIED_SCHEMA",
    "COUNTED",
    "DROPPED",
    "FALLBACK",
    "PATH_NATIVE_COUNT",
    "PATH_NATIVE_WINDOWED_COUNT",
    "PATH_TASK",
    "WINDOWED_CLASSIFIED_SCHEMA",
    "NativeCount",
    "NativeWindowedCount",
    "classify_batch",
    "classify_windowed_batch",
    "native_count",
    "native_windowed_count",
    "node_paths",
]

COUNTED, DROPPED, FALLBACK = 0, 1, 2
"""``classify_batch``'s status per record: counted; dropped by the count (null key or value after
deserialization); needs the runtime's task (a serde refuses the bytes, or a negative timestamp)."""
PATH_NATIVE_COUNT = "spark-native: keyed count (row_number over key, the changelog from each key's last row)"
PATH_NATIVE_WINDOWED_COUNT = (
    "spark-native: windowed count (stream time as a running max, late windows filtered, row_number over key and "
    "window, the changelog from each window's last row)"
)
PATH_TASK = "python task: the runtime's StreamTask per task (mapInArrow)"

_CLASSIFIED_FIELDS = [
    ("partition", pa.int32()),
    ("offset", pa.int64()),
    ("key", pa.binary()),
    ("timestamp", pa.int64()),
    ("status", pa.int8()),
]
CLASSIFIED_SCHEMA = pa.schema([*_CLASSIFIED_FIELDS, ("out_partition", pa.int32())])
WINDOWED_CLASSIFIED_SCHEMA = pa.schema(
    [*_CLASSIFIED_FIELDS, ("starts", pa.list_(pa.int64())), ("out_partitions", pa.list_(pa.int32()))]
)
"""``classify_windowed_batch``'s rows: per counted record the starts of its windows (oldest first) and the sink
partition of each windowed key (empty lists unless counted)."""
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
    if not count.windows.is_time_window:
        return None
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
    node name; a native sub-topology still takes the task path when a record needs it, see the module docstring)."""
    paths: dict[str, str] = {}
    for sub in description.subtopologies():
        path = PATH_TASK
        if native_count(description, sub, config) is not None:
            path = PATH_NATIVE_COUNT
        elif native_windowed_count(description, sub, config) is not None:
            path = PATH_NATIVE_WINDOWED_COUNT
        paths.update(dict.fromkeys(sub.nodes, path))
    return paths


_Count = TypeVar("_Count", NativeCount, NativeWindowedCount)


class _Classifier(Generic[_Count]):
    """A classify function as a picklable ``mapInArrow`` function over ``(partition, offset, key, value,
    timestamp)`` batches, counting the records it classifies and those that need the task path."""

    def __init__(self, count: _Count, sink_partitions: int, records: Any = None, fallbacks: Any = None) -> None:
        self.count: _Count = count
        self.sink_partitions = sink_partitions
        self.records = records
        """A Spark accumulator of the records classified (the replay's progress), or None."""
        self.fallbacks = fallbacks
        """A Spark accumulator of the ``FALLBACK`` records, or None."""

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        cache: dict[bytes, int] = {}
        for batch in batches:
            classified = self.classify(batch, cache)
            if self.records is not None:
                self.records.add(batch.num_rows)
            if self.fallbacks is not None:
                fallback = pc.sum(pc.equal(classified.column("status"), FALLBACK)).as_py()
                if fallback:
                    self.fallbacks.add(fallback)
            yield classified

    def classify(self, batch: pa.RecordBatch, partition_cache: dict[bytes, int]) -> pa.RecordBatch:
        raise NotImplementedError


class BatchClassifier(_Classifier[NativeCount]):
    """``classify_batch`` as a ``mapInArrow`` function; the output partition of each key is cached per worker
    (few distinct keys)."""

    def classify(self, batch: pa.RecordBatch, partition_cache: dict[bytes, int]) -> pa.RecordBatch:
        return classify_batch(batch, self.count, self.sink_partitions, partition_cache)


def classify_batch(
    batch: pa.RecordBatch, count: NativeCount, sink_partitions: int, partition_cache: dict[bytes, int]
) -> pa.RecordBatch:
    """Deserialize each record's key and value with the runtime's serdes (column-wise, no per-row dicts) and
    return ``CLASSIFIED_SCHEMA`` rows: ``status`` (``COUNTED`` / ``DROPPED`` / ``FALLBACK``) and the sink
    partition the runtime's partitioner gives the key (-1 unless counted). ``partition_cache``: key bytes ->
    sink partition, kept between batches."""
    key_serde = serde_for(count.key_serde, count.source_topic, is_key=True)
    value_deserialize = serde_for(count.value_serde, count.source_topic).deserialize
    keys = batch.column("key").to_pylist()
    values = batch.column("value").to_pylist()
    timestamps = batch.column("timestamp").to_pylist()
    statuses: list[int] = []
    out_partitions: list[int] = []
    for key, value, timestamp in zip(keys, values, timestamps, strict=True):
        try:
            usable = key_serde.deserialize(key) is not None and value_deserialize(value) is not None
        except Exception:
            statuses.append(FALLBACK)
            out_partitions.append(-1)
            continue
        if timestamp is None or timestamp < 0:
            statuses.append(FALLBACK)
            out_partitions.append(-1)
        elif not usable:
            statuses.append(DROPPED)
            out_partitions.append(-1)
        else:
            target = partition_cache.get(key)
            if target is None:
                target = partition_cache[key] = partition_for_key(key, sink_partitions)
            statuses.append(COUNTED)
            out_partitions.append(target)
    return _classified(batch, statuses, [pa.array(out_partitions, pa.int32())], CLASSIFIED_SCHEMA)


def _classified(batch: pa.RecordBatch, statuses: list[int], extra: list[pa.Array], schema: pa.Schema) -> pa.RecordBatch:
    """``schema``'s rows: ``batch``'s partition, offset, key and timestamp, each record's status, then ``extra``."""
    kept = [batch.column(name) for name in ("partition", "offset", "key", "timestamp")]
    return pa.RecordBatch.from_arrays([*kept, pa.array(statuses, pa.int8()), *extra], schema=schema)


class WindowedBatchClassifier(_Classifier[NativeWindowedCount]):
    """``classify_windowed_batch`` as a ``mapInArrow`` function."""

    def classify(self, batch: pa.RecordBatch, partition_cache: dict[bytes, int]) -> pa.RecordBatch:
        return classify_windowed_batch(batch, self.count, self.sink_partitions)


_START = struct.Struct(">q")


def classify_windowed_batch(batch: pa.RecordBatch, count: NativeWindowedCount, sink_partitions: int) -> pa.RecordBatch:
    """Deserialize each record's key and value with the runtime's serdes and return ``WINDOWED_CLASSIFIED_SCHEMA``
    rows: ``status`` (``COUNTED``: a non-null key, whatever the value, as the runtime's windowed count;
    ``DROPPED``: a null key; ``FALLBACK``: a serde refuses the bytes, or a negative timestamp), and for a counted
    record the starts of its windows (``WindowSpec.windows_for``) with the sink partition of each windowed key
    ``key bytes + start`` (8-byte big-endian, the ``windowed:`` serde's layout)."""
    names = count.count
    key_deserialize = serde_for(names.key_serde, names.source_topic, is_key=True).deserialize
    value_deserialize = serde_for(names.value_serde, names.source_topic).deserialize
    windows_for = count.windows.windows_for
    keys = batch.column("key").to_pylist()
    values = batch.column("value").to_pylist()
    timestamps = batch.column("timestamp").to_pylist()
    statuses: list[int] = []
    list_offsets = [0]
    starts: list[int] = []
    windowed_keys: list[bytes] = []
    for key, value, timestamp in zip(keys, values, timestamps, strict=True):
        try:
            key_deserialize(key)
            value_deserialize(value)
        except Exception:
            status = FALLBACK
        else:
            status = FALLBACK if timestamp is None or timestamp < 0 else DROPPED if key is None else COUNTED
        statuses.append(status)
        if status == COUNTED:
            for start, _ in windows_for(timestamp):
                starts.append(start)
                windowed_keys.append(key + _START.pack(start))
        list_offsets.append(len(starts))
    partitions = partitions_for_keys(windowed_keys, sink_partitions)
    offsets = pa.array(list_offsets, pa.int32())
    windows = [
        pa.ListArray.from_arrays(offsets, pa.array(starts, pa.int64())),
        pa.ListArray.from_arrays(offsets, pa.array(partitions, pa.int32())),
    ]
    return _classified(batch, statuses, windows, WINDOWED_CLASSIFIED_SCHEMA)
