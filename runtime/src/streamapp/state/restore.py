"""Restore: bring a task's stores up to the end of their changelogs before the task processes.

A store resumes right after the changelog offset it holds (``changelog_offset() + 1``); a store without one
(new, or its folder was deleted) reads the changelog from the beginning. The end is the changelog's high
watermark when the task registered: the active task is the only writer of its changelog partition, so
nothing is appended while it restores. Each polled batch is applied to a store in one atomic write
together with the offset of its last record, so a restore interrupted by a crash or a rebalance resumes
where it stopped instead of starting over.

The reader never blocks for long: ``restore`` does one bounded poll, so the stream thread keeps polling
its group consumer (and serving rebalances) while tasks restore (Kafka Streams' StoreChangelogReader
does the same from the stream thread).

Standby tasks (``register_standby``) use the same consumer, Kafka's ``STANDBY_UPDATING`` mode: their
changelogs are read continuously from the stores' offsets and never "complete". Under ``exactly_once_v2``
the restore consumer reads ``read_committed``: aborted records and transaction markers never reach a store,
and the end offset is the last stable offset (a store's last record may be followed by a commit marker, so
a restore may finish on the partition-end event with no record left to apply).

Progress is per store (``progress``): records applied, offsets left, the rate over the last
``RATE_WINDOW_S`` seconds and the estimated time left, as Kafka Streams' ``StateRestoreListener`` sees it per
store and its ``restore-remaining-records-total`` / ``restore-rate`` metrics report it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from streamapp.kafka.types import OFFSET_BEGINNING, RestoreConsumerClient, TopicPartition
from streamapp.state.changelogging import ChangeLoggingKeyValueStore
from streamapp.state.restore_rate import RecentRate
from streamapp.state.versioned import VersionedChangeLoggingStore

__all__ = ["ChangelogReader", "RestoreProgress", "StoreRestoreProgress"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StoreRestoreProgress:
    """Restore progress of one store of a task, from its changelog partition.

    ``restored``: records applied; ``remaining``: offsets left to read (the end offset at registration minus
    the next offset to apply; on a compacted changelog an upper bound of records left); ``records_per_second``
    over the last ``RATE_WINDOW_S`` seconds (None until a second look); ``seconds_left``: ``remaining /
    records_per_second`` (None without a rate above 0; 0 once done).
    """

    store: str
    changelog: TopicPartition
    restored: int
    remaining: int
    records_per_second: float | None = None

    @property
    def seconds_left(self) -> float | None:
        if self.remaining == 0:
            return 0.0
        return self.remaining / self.records_per_second if self.records_per_second else None


@dataclass
class RestoreProgress:
    """Restore progress of one task: each store (in registration order), and the sums over them."""

    stores: list[StoreRestoreProgress] = field(default_factory=list)

    @property
    def restored(self) -> int:
        return sum(store.restored for store in self.stores)

    @property
    def remaining(self) -> int:
        return sum(store.remaining for store in self.stores)


@dataclass
class _ChangelogRestore:
    task_id: str
    store: ChangeLoggingKeyValueStore
    end_offset: int
    next_offset: int
    restored: int = 0
    standby: bool = False
    rate: RecentRate | None = None

    def progress(self, now: float) -> StoreRestoreProgress:
        records_per_second = None
        if self.rate is not None:
            self.rate.observe(now, self.restored)
            records_per_second = self.rate.rate()
        return StoreRestoreProgress(
            self.store.name, self.store.changelog, self.restored, self.remaining, records_per_second
        )

    @property
    def done(self) -> bool:
        return not self.standby and self.next_offset >= self.end_offset

    @property
    def remaining(self) -> int:
        return max(0, self.end_offset - self.next_offset)


class ChangelogReader:
    """Restores the registered tasks' stores from their changelog partitions through one restore consumer."""

    def __init__(
        self,
        consumer: RestoreConsumerClient,
        batch_size: int = 10_000,
        end_offset_timeout_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._consumer = consumer
        self._clock = clock
        self._batch_size = batch_size
        self._end_offset_timeout_s = end_offset_timeout_s
        self._restoring: dict[TopicPartition, _ChangelogRestore] = {}
        self._tasks: dict[str, list[_ChangelogRestore]] = {}
        self.records_restored = 0
        """Records applied to active tasks' stores since this reader was created: the restore-records metric."""
        self.standby_records = 0
        """Records applied to standby tasks' stores since this reader was created."""
        self.last_restored: dict[str, int] = {}
        """Records the last completed restore of each task applied (what ``test_restore_*`` compare)."""
        self.last_restored_stores: dict[str, list[StoreRestoreProgress]] = {}
        """Per task, the stores its last completed restore applied records to, with their counts (no rate)."""
        self._standbys: dict[str, list[_ChangelogRestore]] = {}

    def register(self, task_id: str, stores: Sequence[ChangeLoggingKeyValueStore]) -> bool:
        """Start restoring a task's stores; True when there is nothing to restore (the task may run now).

        Raises KafkaClientError when a changelog's end offset cannot be read.
        """
        entries: list[_ChangelogRestore] = []
        starts: dict[TopicPartition, int] = {}
        for store in stores:
            applied = store.changelog_offset()
            end = self._consumer.end_offset(store.changelog, self._end_offset_timeout_s)
            next_offset = 0 if applied is None else applied + 1
            if next_offset > end:
                log.warning(
                    "Store %s of task %s holds changelog offset %d beyond the end %d of %s",
                    store.name,
                    task_id,
                    applied,
                    end,
                    store.changelog,
                )
            entry = _ChangelogRestore(task_id, store, end_offset=end, next_offset=next_offset)
            entries.append(entry)
            if not entry.done:
                entry.rate = RecentRate(self._clock())
                self._restoring[store.changelog] = entry
                starts[store.changelog] = OFFSET_BEGINNING if applied is None else next_offset
                log.info(
                    "Restoring store %s of task %s from %s offset %d to %d",
                    store.name,
                    task_id,
                    store.changelog,
                    next_offset,
                    end,
                )
        self._tasks[task_id] = entries
        self._consumer.assign(starts)
        if all(entry.done for entry in entries):
            del self._tasks[task_id]
            self.last_restored[task_id] = 0
            self.last_restored_stores[task_id] = []
            log.info("Task %s needs no restore: its stores are at the end of their changelogs", task_id)
            return True
        return False

    def register_standby(self, task_id: str, stores: Sequence[ChangeLoggingKeyValueStore]) -> None:
        """Keep a standby task's stores following their changelogs from the offsets they hold."""
        entries: list[_ChangelogRestore] = []
        starts: dict[TopicPartition, int] = {}
        for store in stores:
            applied = store.changelog_offset()
            entry = _ChangelogRestore(
                task_id, store, end_offset=-1, next_offset=0 if applied is None else applied + 1, standby=True
            )
            entries.append(entry)
            self._restoring[store.changelog] = entry
            starts[store.changelog] = OFFSET_BEGINNING if applied is None else applied + 1
        self._standbys[task_id] = entries
        self._consumer.assign(starts)
        log.info("Standby task %s follows %s", task_id, ", ".join(f"{tp}@{o}" for tp, o in starts.items()))

    def standby_offsets(self, task_id: str) -> dict[TopicPartition, int]:
        """Next changelog offset to apply per store of a standby task."""
        return {e.store.changelog: e.next_offset for e in self._standbys.get(task_id, [])}

    @property
    def updating_standbys(self) -> bool:
        return bool(self._standbys)

    def unregister(self, task_id: str) -> None:
        """Stop restoring a task (it was revoked) or updating a standby; what was applied stays applied."""
        entries = self._tasks.pop(task_id, []) + self._standbys.pop(task_id, [])
        partitions = [e.store.changelog for e in entries if self._restoring.get(e.store.changelog) is e]
        for partition in partitions:
            del self._restoring[partition]
        self._consumer.unassign(partitions)

    def restore(self, timeout_s: float) -> list[str]:
        """Apply one polled batch of changelog records (active restores and standbys); the ids of active
        tasks whose restore completed."""
        if not self._restoring:
            return []
        records, reached_end = self._consumer.poll(self._batch_size, timeout_s)
        batches: dict[TopicPartition, dict[bytes, tuple[bytes | None, int]]] = {}
        every_record: dict[TopicPartition, list[tuple[bytes, bytes | None, int]]] = {}
        last_offsets: dict[TopicPartition, int] = {}
        counts: dict[TopicPartition, int] = {}
        for record in records:
            tp = record.topic_partition
            entry = self._restoring.get(tp)
            if entry is None or record.offset < entry.next_offset or record.key is None:
                continue
            if isinstance(entry.store, VersionedChangeLoggingStore):  # every version is a record
                every_record.setdefault(tp, []).append((record.key, record.value, record.timestamp))
                batches.setdefault(tp, {})
            else:
                batches.setdefault(tp, {})[record.key] = (record.value, record.timestamp)
            last_offsets[tp] = record.offset
            counts[tp] = counts.get(tp, 0) + 1
        for tp, batch in batches.items():
            entry = self._restoring[tp]
            if isinstance(entry.store, VersionedChangeLoggingStore):
                entry.store.restore_records(every_record.get(tp, []), last_offsets[tp])
            else:
                entry.store.restore(batch, last_offsets[tp])
            entry.next_offset = last_offsets[tp] + 1
            entry.restored += counts[tp]
            if entry.standby:
                self.standby_records += counts[tp]
            else:
                self.records_restored += counts[tp]
        for tp in reached_end:
            entry = self._restoring.get(tp)
            if entry is not None:
                entry.next_offset = max(entry.next_offset, entry.end_offset)
        finished = [tp for tp, entry in self._restoring.items() if entry.done]
        for tp in finished:
            del self._restoring[tp]
        self._consumer.unassign(finished)
        completed = [task for task, entries in self._tasks.items() if all(e.done for e in entries)]
        for task_id in completed:
            entries = self._tasks.pop(task_id)
            self.last_restored[task_id] = sum(e.restored for e in entries)
            self.last_restored_stores[task_id] = [
                StoreRestoreProgress(e.store.name, e.store.changelog, e.restored, 0) for e in entries if e.restored > 0
            ]
            log.info("Restored task %s: %d records", task_id, self.last_restored[task_id])
        return completed

    def progress(self) -> dict[str, RestoreProgress]:
        """Progress of every task still restoring, per store; each call is a sample of the stores' rates."""
        now = self._clock()
        return {
            task_id: RestoreProgress([entry.progress(now) for entry in entries])
            for task_id, entries in self._tasks.items()
        }

    @property
    def restoring(self) -> bool:
        return bool(self._tasks)
