"""The per-batch Python step of the sub-topologies the replay runs with Spark's own operators.

Which sub-topologies those are is decided on the description alone (``streamapp.replay.shapes``: the keyed count
and the windowed count of a stream read from one external topic; ``node_paths``); this module is what such a
sub-topology needs per record, which Spark cannot do itself.

For the keyed count (``NativeCount``)::

    source(topic, keySerde string|bytes, no timestampExtractor) -> count(key_value store) -> to_stream
        -> sink(fixed topic, the source's key serde, value serde json|long)

For that shape, per task (one input partition, offset order) the runtime's ``CountProcessor`` emits, for every
record with a non-null key and value, the running count of its key with the key's largest timestamp so far
(KIP-258: the later of the record's and the stored aggregate's), to the partition ``murmur2(key bytes)`` of the
sink topic; at the end its changelog gets one record per key (in the order keys were first seen) with the final
count and the key's largest timestamp. Spark computes that with ``row_number`` and a running ``max`` over
``(partition, key)`` ordered by offset and a ``groupBy(partition, key)``
(``streamapp.replay.spark.engine``). The one step Spark cannot do identically is deserializing key and value with the
runtime's serdes (a record whose value is JSON ``null`` is dropped; bytes that do not deserialize go to the
deserialization exception handler): ``classify_batch`` does it per consumed batch with the runtime's own serdes and
marks each record ``COUNTED``, ``DROPPED`` or ``FALLBACK``. A single ``FALLBACK`` record (bytes a serde refuses,
a negative timestamp) sends the whole sub-topology to the task path, which applies the handlers exactly.

For the windowed count (``NativeWindowedCount``, tumbling or hopping windows)::

    source(topic, keySerde string|bytes, no timestampExtractor) -> windowed_count(window store) -> to_stream
        -> sink(fixed topic, keySerde windowed:<the source's key serde>[:size], value serde json|long)

Per task the runtime's ``TimeWindowAggregateProcessor`` drops a record with a null key (before its stream time
moves), advances stream time to the largest timestamp seen so far (the record's own included), and for each window
``[start, start + size)`` containing the record (``WindowSpec.windows_for``, oldest first) drops it as late when
``start + size <= streamTime - grace``, else emits the window's running count with the largest timestamp folded
into it, keyed ``key bytes + start`` (8-byte big-endian), to the partition ``murmur2(that key)`` of the sink topic.
A null value is counted (Kafka checks only the key). Spark computes stream time as a running ``max(timestamp)``
over the task ordered by offset, explodes the windows, filters the late ones and counts with ``row_number`` over
``(task, key, start)``; ``classify_windowed_batch`` gives each record its status, window starts and the sink
partition of each windowed key (``streamapp.replay.spark.partitions``, vectorized). The window store's changelog has one
record per window ever written (the replay is one commit interval), in the order windows were first written: key
``key bytes + start + seqnum 0``, value ``timestamp + count`` (Kafka's layouts, ``streamapp.state.window_store``),
at the window's largest timestamp (the value's: Kafka's timestamped window store logs a window at it).

Plain Python and pyarrow (no pyspark): the tests use it without Spark. The operator, which has no pyarrow, asks
``streamapp.replay.shapes`` only.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from streamapp.drop_reasons import NULL_KEY_OR_VALUE
from streamapp.partitioner import partition_for_key
from streamapp.replay.shapes import NativeCount, NativeWindowedCount
from streamapp.replay.spark.partitions import partitions_for_keys
from streamapp.serdes import serde_for

__all__ = [
    "CLASSIFIED_SCHEMA",
    "COUNTED",
    "DROPPED",
    "FALLBACK",
    "WINDOWED_CLASSIFIED_SCHEMA",
    "WINDOW_PAIRS",
    "Columns",
    "ReadState",
    "classify_batch",
    "classify_windowed_batch",
]

WINDOW_PAIRS = "_window_pairs"
"""The drop accumulator's count of (record, window) pairs a native windowed count's records fall into."""
COUNTED, DROPPED, FALLBACK = 0, 1, 2
"""``classify_batch``'s status per record: counted; dropped by the count (null key or value after
deserialization); needs the runtime's task (a serde refuses the bytes, or a negative timestamp)."""
_CLASSIFIED_FIELDS = [
    ("partition", pa.int32()),
    ("offset", pa.int64()),
    ("key", pa.binary()),
    ("timestamp", pa.int64()),
    ("status", pa.int8()),
]
CLASSIFIED_SCHEMA = pa.schema([*_CLASSIFIED_FIELDS, ("out_partition", pa.int32())])
WINDOWED_CLASSIFIED_SCHEMA = pa.schema(
    [
        *_CLASSIFIED_FIELDS,
        ("starts", pa.list_(pa.int64())),
        ("out_partitions", pa.list_(pa.int32())),
        ("stream_time", pa.int64()),
    ]
)
"""``classify_windowed_batch``'s rows: per counted record the starts of its windows (oldest first), the sink
partition of each windowed key (empty lists unless counted), and the stream time after the record: the largest
timestamp of the counted records classified so far in the same read (``stream_times``), which is the task's
stream time when the read started at the task's first offset."""


@dataclass
class Columns:
    """One partition's records to classify, as a reader consumed them (``streamapp.replay.spark.source``): the
    values stay Python bytes and never become an Arrow column; ``keys``, ``values`` and ``timestamps`` are what the
    serdes read."""

    partition: int
    offsets: list[int]
    keys: list[bytes | None]
    values: list[bytes | None]
    timestamps: list[int]


@dataclass
class ReadState:
    """What a classifier keeps between the batches of one read (one split, in offset order)."""

    partitions: dict[bytes, int] = field(default_factory=dict)
    """Key bytes -> sink partition (few distinct keys: the partitioner runs once per key)."""
    stream_time: int = -1
    """The largest timestamp of the counted records so far (``classify_windowed_batch``; -1: none yet)."""


_Count = TypeVar("_Count", NativeCount, NativeWindowedCount)


class _Classifier(Generic[_Count]):
    """A classify function over the batches of one read (``classify_read``, called by the reading worker:
    ``source.RangeRead``), counting the records it classifies and those that need the task path."""

    def __init__(
        self, count: _Count, sink_partitions: int, records: Any = None, fallbacks: Any = None, drops: Any = None
    ) -> None:
        self.count: _Count = count
        self.sink_partitions = sink_partitions
        self.records = records
        """A Spark accumulator of the records classified (the replay's progress), or None."""
        self.fallbacks = fallbacks
        """A Spark accumulator of the ``FALLBACK`` records, or None."""
        self.drops = drops
        """A Spark accumulator of the ``DROPPED`` records by reason (``replay.drops.DropCounts``), or None."""

    def classify_read(self, batches: Iterator[Columns]) -> Iterator[pa.RecordBatch]:
        """The classified batches of ``batches``, one read in offset order: what ``classify`` keeps between batches
        (``ReadState``) lasts for the read."""
        state = ReadState()
        for batch in batches:
            classified = self.classify(batch, state)
            if self.records is not None:
                self.records.add(len(batch.keys))
            if self.fallbacks is not None:
                fallback = pc.sum(pc.equal(classified.column("status"), FALLBACK)).as_py()
                if fallback:
                    self.fallbacks.add(fallback)
            if self.drops is not None:
                dropped = pc.sum(pc.equal(classified.column("status"), DROPPED)).as_py()
                if dropped:
                    self.drops.add({NULL_KEY_OR_VALUE: dropped})
                self.count_windows(classified)
            yield classified

    def classify(self, batch: Columns, state: ReadState) -> pa.RecordBatch:
        raise NotImplementedError

    def count_windows(self, classified: pa.RecordBatch) -> None:
        """Add what the drop accounting needs beyond the statuses (nothing for a keyed count)."""


class BatchClassifier(_Classifier[NativeCount]):
    """``classify_batch`` over a read; the output partition of each key is cached per read
    (few distinct keys)."""

    def classify(self, batch: Columns, state: ReadState) -> pa.RecordBatch:
        return classify_batch(batch, self.count, self.sink_partitions, state.partitions)


def classify_batch(
    batch: Columns, count: NativeCount, sink_partitions: int, partition_cache: dict[bytes, int]
) -> pa.RecordBatch:
    """Deserialize each record's key and value with the runtime's serdes (column-wise, no per-row dicts) and
    return ``CLASSIFIED_SCHEMA`` rows: ``status`` (``COUNTED`` / ``DROPPED`` / ``FALLBACK``) and the sink
    partition the runtime's partitioner gives the key (-1 unless counted). ``partition_cache``: key bytes ->
    sink partition, kept between batches."""
    key_serde = serde_for(count.key_serde, count.source_topic, is_key=True)
    value_deserialize = serde_for(count.value_serde, count.source_topic).deserialize
    keys: list[Any] = batch.keys  # a counted record's key is not None (its serde read it)
    values, timestamps = batch.values, batch.timestamps
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


def _classified(batch: Columns, statuses: list[int], extra: list[pa.Array], schema: pa.Schema) -> pa.RecordBatch:
    """``schema``'s rows: ``batch``'s partition, offset, key and timestamp, each record's status, then ``extra``."""
    kept = [
        pa.array([batch.partition] * len(batch.keys), pa.int32()),
        pa.array(batch.offsets, pa.int64()),
        pa.array(batch.keys, pa.binary()),
        pa.array(batch.timestamps, pa.int64()),
    ]
    return pa.RecordBatch.from_arrays([*kept, pa.array(statuses, pa.int8()), *extra], schema=schema)


class WindowedBatchClassifier(_Classifier[NativeWindowedCount]):
    """``classify_windowed_batch`` over a read."""

    def classify(self, batch: Columns, state: ReadState) -> pa.RecordBatch:
        return classify_windowed_batch(batch, self.count, self.sink_partitions, state)

    def count_windows(self, classified: pa.RecordBatch) -> None:
        """Count the (record, window) pairs of the counted records under ``WINDOW_PAIRS``: the late ones are those
        the windowed count's changelog does not count (``replay.drops``)."""
        pairs = pc.sum(pc.list_value_length(classified.column("starts"))).as_py()
        if pairs:
            self.drops.add({WINDOW_PAIRS: pairs})


_START = struct.Struct(">q")


def classify_windowed_batch(
    batch: Columns, count: NativeWindowedCount, sink_partitions: int, state: ReadState | None = None
) -> pa.RecordBatch:
    """Deserialize each record's key and value with the runtime's serdes and return ``WINDOWED_CLASSIFIED_SCHEMA``
    rows: ``status`` (``COUNTED``: a non-null key, whatever the value, as the runtime's windowed count;
    ``DROPPED``: a null key; ``FALLBACK``: a serde refuses the bytes, or a negative timestamp), and for a counted
    record the starts of its windows (``WindowSpec.windows_for``) with the sink partition of each windowed key
    ``key bytes + start`` (8-byte big-endian, the ``windowed:`` serde's layout), and the running stream time
    (``state.stream_time`` carried from the read's earlier batches, and updated)."""
    state = state or ReadState()
    stream_time = state.stream_time
    stream_times: list[int] = []
    names = count.count
    key_deserialize = serde_for(names.key_serde, names.source_topic, is_key=True).deserialize
    value_deserialize = serde_for(names.value_serde, names.source_topic).deserialize
    windows_for = count.windows.windows_for
    keys: list[Any] = batch.keys  # a counted record's key is not None (its serde read it)
    values, timestamps = batch.values, batch.timestamps
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
            if timestamp > stream_time:
                stream_time = timestamp
            for start, _ in windows_for(timestamp):
                starts.append(start)
                windowed_keys.append(key + _START.pack(start))
        list_offsets.append(len(starts))
        stream_times.append(stream_time)
    state.stream_time = stream_time
    partitions = partitions_for_keys(windowed_keys, sink_partitions)
    offsets = pa.array(list_offsets, pa.int32())
    windows = [
        pa.ListArray.from_arrays(offsets, pa.array(starts, pa.int64())),
        pa.ListArray.from_arrays(offsets, pa.array(partitions, pa.int32())),
        pa.array(stream_times, pa.int64()),
    ]
    return _classified(batch, statuses, windows, WINDOWED_CLASSIFIED_SCHEMA)
