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

Plain Python and pyarrow (no pyspark): the operator's checks and the tests use it without Spark.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from streamapp.partitioner import partition_for_key
from streamapp.serdes import serde_for
from streamapp.topology import SinkNode, Subtopology, TopologyDescription
from streamapp.topology.nodes.aggregate import CountNode
from streamapp.topology.nodes.io import SourceNode
from streamapp.topology.nodes.stateless import ToStreamNode

__all__ = [
    "CLASSIFIED_SCHEMA",
    "COUNTED",
    "DROPPED",
    "FALLBACK",
    "PATH_NATIVE_COUNT",
    "PATH_TASK",
    "NativeCount",
    "classify_batch",
    "native_count",
    "node_paths",
]

COUNTED, DROPPED, FALLBACK = 0, 1, 2
"""``classify_batch``'s status per record: counted; dropped by the count (null key or value after
deserialization); needs the runtime's task (a serde refuses the bytes, or a negative timestamp)."""
PATH_NATIVE_COUNT = "spark-native: keyed count (row_number over key, groupBy for the changelog)"
PATH_TASK = "python task: the runtime's StreamTask per task (mapInArrow)"

CLASSIFIED_SCHEMA = pa.schema(
    [
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("key", pa.binary()),
        ("timestamp", pa.int64()),
        ("status", pa.int8()),
        ("out_partition", pa.int32()),
    ]
)
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


def native_count(description: TopologyDescription, sub: Subtopology, config: Mapping[str, Any]) -> NativeCount | None:
    """The sub-topology as a ``NativeCount`` when it has exactly that shape (module docstring), else ``None``."""
    if any(config.get(key) for key in _DEFAULT_SERDE_KEYS) or len(sub.nodes) != 4:
        return None
    if len(sub.source_topics) != 1 or sub.source_topics[0].internal or len(sub.sink_topics) != 1:
        return None
    nodes = {description.node(name).type: description.node(name) for name in sub.nodes}
    source, count, to_stream, sink = (nodes.get(t) for t in ("source", "count", "to_stream", "sink"))
    if not (
        isinstance(source, SourceNode)
        and isinstance(count, CountNode)
        and isinstance(to_stream, ToStreamNode)
        and isinstance(sink, SinkNode)
    ):
        return None
    chain = count.input == source.name and to_stream.input == count.name and sink.input == to_stream.name
    if not chain or source.timestamp_extractor is not None or len(source.topics) != 1 or sink.topic is None:
        return None
    store = description.store(count.store)
    if store.type != "key_value":
        return None
    serdes_ok = (
        source.key_serde in _KEY_SERDES
        and store.key_serde == source.key_serde
        and sink.key_serde == source.key_serde
        and sink.value_serde in _COUNT_VALUE_SERDES
        and store.value_serde in _COUNT_VALUE_SERDES
    )
    if not serdes_ok or len(description.children(source.name)) != 1 or len(description.children(count.name)) != 1:
        return None
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


def node_paths(description: TopologyDescription, config: Mapping[str, Any]) -> dict[str, str]:
    """How the replay runs each node: ``PATH_NATIVE_COUNT`` or ``PATH_TASK`` (by node name; a native
    sub-topology still takes the task path when a record needs it, see the module docstring)."""
    paths: dict[str, str] = {}
    for sub in description.subtopologies():
        path = PATH_NATIVE_COUNT if native_count(description, sub, config) is not None else PATH_TASK
        paths.update(dict.fromkeys(sub.nodes, path))
    return paths


class BatchClassifier:
    """``classify_batch`` as a picklable ``mapInArrow`` function over ``(partition, offset, key, value,
    timestamp)`` batches; the output partition of each key is cached per worker (few distinct keys)."""

    def __init__(self, count: NativeCount, sink_partitions: int, records: Any = None) -> None:
        self.count = count
        self.sink_partitions = sink_partitions
        self.records = records
        """A Spark accumulator of the records classified (the replay's progress), or None."""

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        cache: dict[bytes, int] = {}
        for batch in batches:
            if self.records is not None:
                self.records.add(batch.num_rows)
            yield classify_batch(batch, self.count, self.sink_partitions, cache)


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
    return pa.RecordBatch.from_arrays(
        [
            batch.column("partition"),
            batch.column("offset"),
            batch.column("key"),
            batch.column("timestamp"),
            pa.array(statuses, pa.int8()),
            pa.array(out_partitions, pa.int32()),
        ],
        schema=CLASSIFIED_SCHEMA,
    )
