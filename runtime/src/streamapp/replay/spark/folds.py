"""The native counts folded in the reading worker: one pass per task, the records it writes straight to the write.

When one read task reads a whole input partition (``native_stage.NativeRead.whole_partitions``: the replay has no more
cores than the topic has partitions), the task's records arrive in offset order in one Python worker, so the fold
that Spark otherwise does with a shuffle and a sort per ``(task, key[, window])`` (``spark_fold.fold``) is a dict
update per record here, and the worker yields the task's output records (``records.RECORD_SCHEMA``) directly:

- keyed count (``NativeCount``): per counted record the key's running count with the key's largest timestamp so far
  (KIP-258), to ``out_partition``, at the record's offset; at the end one changelog record per key at the offset
  where the key was first seen, with the final count and largest timestamp;
- windowed count (``NativeWindowedCount``): per counted record and window not late (``start + size > stream time
  - grace``, stream time from the classifier) the window's running count, keyed ``key + start``, at sequence
  ``offset * windows_per_record + window index``; a window's changelog record (key ``key + start + seqnum 0``, value
  ``largest timestamp + count``, at the largest timestamp, at the window's first sequence) is written once the
  window is closed (no later record can change it: ``start + size <= stream time - grace``) or at the end, so
  the worker holds only the open windows;
- ``final`` (``EMIT_FINAL``): of the sink records only each key's or window's last, written with its changelog
  record.

These are exactly the records ``count.count_stage`` / ``windowed_count.windowed_count_stage`` compute (the native
parity tests compare both with the runtime's task). Plain Python and pyarrow, no pyspark.
"""

from __future__ import annotations

import heapq
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from streamapp.replay.shapes import NativeCount, NativeWindowedCount
from streamapp.replay.spark.native import COUNTED
from streamapp.replay.spark.records import record_batch

__all__ = ["FoldedCount", "count_bytes"]

_LONG = struct.Struct(">q")
_SEQNUM_0 = bytes(4)


def count_bytes(count: int, serde: str) -> bytes:
    """A positive count as the serde writes it: ``json`` = its decimal digits, ``long`` = 8-byte big-endian."""
    return str(count).encode() if serde == "json" else _LONG.pack(count)


@dataclass
class _Output:
    """Output records of one task, column by column (``records.RECORD_ARROW_SCHEMA`` without the constant columns)."""

    topics: list[str] = field(default_factory=list)
    partitions: list[int] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    keys: list[bytes] = field(default_factory=list)
    values: list[bytes] = field(default_factory=list)
    timestamps: list[int] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)

    def add(self, topic: str, partition: int, offset: int, key: bytes, value: bytes, timestamp: int, kind: str) -> None:
        self.topics.append(topic)
        self.partitions.append(partition)
        self.offsets.append(offset)
        self.keys.append(key)
        self.values.append(value)
        self.timestamps.append(timestamp)
        self.kinds.append(kind)

    def batch(self, subtopology: int, task: int) -> pa.RecordBatch:
        return record_batch(
            len(self.offsets),
            topic=self.topics,
            partition=self.partitions,
            offset=self.offsets,
            key=self.keys,
            value=self.values,
            timestamp=self.timestamps,
            producer_sub=subtopology,
            producer_part=task,
            kind=self.kinds,
            headers=None,
        )


class FoldedCount:
    """A classifier (``native.BatchClassifier`` / ``WindowedBatchClassifier``) followed by the fold: for
    ``source.RangeRead``, ``classify_read`` of one whole-partition read yields the task's output records
    batches (module docstring)."""

    def __init__(self, classifier: Any, final: bool) -> None:
        self.classifier = classifier
        self.final = final

    def classify_read(self, batches: Iterator[Any]) -> Iterator[pa.RecordBatch]:
        shape = self.classifier.count
        fold = _WindowFold(shape, self.final) if isinstance(shape, NativeWindowedCount) else _KeyFold(shape, self.final)
        for classified in self.classifier.classify_read(batches):
            out = fold.add(classified)
            if len(out.offsets):
                yield out.batch(fold.subtopology, fold.task)
        out = fold.finish()
        if len(out.offsets):
            yield out.batch(fold.subtopology, fold.task)


class _KeyFold:
    """The keyed count of one task: key -> [count, largest timestamp, first offset, out partition, last offset]."""

    def __init__(self, count: NativeCount, final: bool) -> None:
        self.count, self.final = count, final
        self.subtopology, self.task = count.subtopology, -1
        self.groups: dict[bytes, list[int]] = {}

    def add(self, classified: pa.RecordBatch) -> _Output:
        count, out, groups = self.count, _Output(), self.groups
        columns = (classified.column(n).to_pylist() for n in ("partition", "offset", "key", "timestamp", "status"))
        partitions, offsets, keys, timestamps, statuses = columns
        targets = classified.column("out_partition").to_pylist()
        sink, serde, final = count.sink_topic, count.sink_value_serde, self.final
        for task, offset, key, timestamp, status, target in zip(
            partitions, offsets, keys, timestamps, statuses, targets, strict=True
        ):
            if status != COUNTED:
                continue
            self.task = task
            group = groups.get(key)
            if group is None:
                group = groups[key] = [0, timestamp, offset, target, offset]
            group[0] += 1
            if timestamp > group[1]:
                group[1] = timestamp
            group[4] = offset
            if not final:
                out.add(sink, target, offset, key, count_bytes(group[0], serde), group[1], "sink")
        return out

    def finish(self) -> _Output:
        count, out = self.count, _Output()
        for key, (total, timestamp, first, target, last) in self.groups.items():
            if self.final:
                out.add(
                    count.sink_topic, target, last, key, count_bytes(total, count.sink_value_serde), timestamp, "sink"
                )
            value = count_bytes(total, count.store_value_serde)
            out.add(count.changelog_topic, self.task, first, key, value, timestamp, "changelog")
        return out


class _WindowFold:
    """The windowed count of one task: (key, start) -> [count, largest timestamp, first sequence, out partition,
    last sequence]; windows closed by stream time are written and forgotten."""

    def __init__(self, windowed: NativeWindowedCount, final: bool) -> None:
        self.windowed, self.final = windowed, final
        self.count = windowed.count
        self.subtopology, self.task = windowed.count.subtopology, -1
        self.groups: dict[tuple[bytes, int], list[int]] = {}
        self.starts: list[tuple[int, bytes]] = []  # a heap of the open windows' (start, key)

    def add(self, classified: pa.RecordBatch) -> _Output:
        out, groups, final = _Output(), self.groups, self.final
        size, grace = self.windowed.windows.size, self.windowed.windows.grace_ms
        per_record = self.windowed.windows_per_record
        sink, serde = self.count.sink_topic, self.count.sink_value_serde
        names = ("partition", "offset", "key", "timestamp", "status", "starts", "out_partitions", "stream_time")
        columns = [classified.column(n).to_pylist() for n in names]
        for task, offset, key, timestamp, status, starts, targets, stream_time in zip(*columns, strict=True):
            if status != COUNTED:
                continue
            self.task = task
            horizon = stream_time - grace
            for index, (start, target) in enumerate(zip(starts, targets, strict=True)):
                if start + size <= horizon:
                    continue  # late: dropped (counted as late by the replay's drop accounting)
                sequence = offset * per_record + index
                group = groups.get((key, start))
                if group is None:
                    group = groups[(key, start)] = [0, timestamp, sequence, target, sequence]
                    heapq.heappush(self.starts, (start, key))
                group[0] += 1
                if timestamp > group[1]:
                    group[1] = timestamp
                group[4] = sequence
                if not final:
                    out.add(
                        sink, target, sequence, key + _LONG.pack(start), count_bytes(group[0], serde), group[1], "sink"
                    )
            self._close(out, horizon - size)
        return out

    def _close(self, out: _Output, before: int) -> None:
        """Write and forget the windows with ``start + size <= stream time - grace`` (``start <= before``)."""
        starts = self.starts
        while starts and starts[0][0] <= before:
            start, key = heapq.heappop(starts)
            self._write(out, key, start, self.groups.pop((key, start)))

    def _write(self, out: _Output, key: bytes, start: int, group: list[int]) -> None:
        total, timestamp, first, target, last = group
        count = self.count
        windowed_key = key + _LONG.pack(start)
        if self.final:
            out.add(
                count.sink_topic,
                target,
                last,
                windowed_key,
                count_bytes(total, count.sink_value_serde),
                timestamp,
                "sink",
            )
        value = _LONG.pack(timestamp) + count_bytes(total, count.store_value_serde)
        out.add(count.changelog_topic, self.task, first, windowed_key + _SEQNUM_0, value, timestamp, "changelog")

    def finish(self) -> _Output:
        out = _Output()
        while self.starts:
            start, key = heapq.heappop(self.starts)
            self._write(out, key, start, self.groups.pop((key, start)))
        return out
