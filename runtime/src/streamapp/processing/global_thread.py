"""The global consumer of a worker: bootstraps the GlobalKTable stores, then keeps them up to date.

Follows Kafka Streams' ``GlobalStreamThread`` + ``GlobalStateManagerImpl``:

- the consumer has no group: it *assigns* every partition of every global topic;
- ``bootstrap`` reads each partition from the checkpointed position (else from the beginning) up to the
  end offset it had when bootstrap began, and must finish before the worker's tasks process anything
  (``KafkaStreams.start`` waits for the global thread the same way);
- a checkpointed position outside the partition's ``[low, high]`` watermarks (topic recreated, records
  deleted) wipes that store and bootstraps it from the beginning, as Kafka Streams does on an
  ``InvalidOffsetException``;
- afterwards ``poll`` applies new records; the checkpoint is written every ``commit.interval.ms`` and on
  close.

Here it is not a thread of its own: a worker process *is* a stream thread, and the stream thread calls
``poll(0)`` once per loop iteration, so global stores change only between records (never while a
processor reads them) and RocksDB is used from one thread.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from streamapp.kafka.types import ConsumerRecord, KafkaClientError, TopicPartition
from streamapp.state.global_store import GlobalStateManager, GlobalStoreFactory, GlobalStoreSpec, global_state_dir
from streamapp.state.stores import StoreLockedError
from streamapp.topology import GlobalTableNode, TopologyDescription

__all__ = ["GlobalConsumerClient", "GlobalStreamThread", "build_global_thread", "global_store_specs"]

log = logging.getLogger(__name__)

_LOCK_RETRY_S = 0.5


class GlobalConsumerClient(Protocol):
    """A consumer without a group that reads whole topics from given offsets (the global consumer)."""

    def partitions(self, topic: str, timeout_s: float) -> list[int]:
        """Partition numbers of ``topic``; raises KafkaClientError when the topic does not exist."""
        ...

    def watermarks(self, partition: TopicPartition, timeout_s: float) -> tuple[int, int]:
        """``(low, high)``: the first offset still in the log and the end offset, asked of the broker."""
        ...

    def assign(self, starts: Mapping[TopicPartition, int]) -> None:
        """Read exactly these partitions, starting at these offsets (replaces any earlier assignment)."""
        ...

    def poll(self, max_records: int, timeout_s: float) -> tuple[list[ConsumerRecord], set[TopicPartition]]:
        """Records, plus the partitions whose end was reached during this poll."""
        ...

    def positions(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        """The next offset the consumer will read, for the partitions where it is known."""
        ...

    def close(self) -> None: ...


class GlobalStreamThread:
    """Keeps a worker's global stores in step with their topics (see the module docstring).

    ``state``: ``created`` → ``restoring`` (in ``bootstrap``) → ``running`` → ``closed``.
    """

    def __init__(
        self,
        state: GlobalStateManager,
        consumer: GlobalConsumerClient,
        commit_interval_ms: int,
        batch_size: int = 10_000,
        timeout_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.global_state = state
        self._consumer = consumer
        self._commit_interval_s = commit_interval_ms / 1000
        self._batch_size = batch_size
        self._timeout_s = timeout_s
        self._clock = clock
        self.state = "created"
        self.restored_records = 0
        self._last_checkpoint = clock()

    def bootstrap(self, stopping: Callable[[], bool]) -> bool:
        """Open the stores and read every global partition up to its current end.

        Returns False when ``stopping()`` turned true first (nothing is left half-open: call ``close``).
        Raises KafkaClientError when a global topic is missing or the broker cannot be asked.
        """
        self.state = "restoring"
        if not self._open(stopping):
            return False
        starts: dict[TopicPartition, int] = {}
        ends: dict[TopicPartition, int] = {}
        for topic in self.global_state.topics:
            topic_starts, topic_ends = self._partition_bounds(topic)
            starts.update(topic_starts)
            ends.update(topic_ends)
        self.global_state.advance(starts)
        self._consumer.assign(starts)
        started = self._clock()
        log.info("Bootstrapping global stores %s from %s", ", ".join(self.global_state.specs), _describe(starts, ends))
        while not self._caught_up(ends):
            if stopping():
                return False
            self.restored_records += self._poll_once(0.1)
        self.global_state.checkpoint()
        self._last_checkpoint = self._clock()
        self.state = "running"
        log.info(
            "Bootstrapped global stores in %.1fs: %d records applied", self._clock() - started, self.restored_records
        )
        return True

    def poll(self, timeout_s: float) -> int:
        """Apply newly consumed global records; checkpoint when ``commit.interval.ms`` passed. Returns the
        number of records applied."""
        applied = self._poll_once(timeout_s)
        if self._clock() - self._last_checkpoint >= self._commit_interval_s:
            self.global_state.checkpoint()
            self._last_checkpoint = self._clock()
        return applied

    def close(self) -> None:
        """Checkpoint, close the stores and the consumer. Idempotent."""
        if self.state == "closed":
            return
        self.state = "closed"
        self.global_state.close()
        try:
            self._consumer.close()
        except Exception:
            log.exception("Failed to close the global consumer")

    # -- internals ---------------------------------------------------------------------------------

    def _open(self, stopping: Callable[[], bool]) -> bool:
        attempts = 0
        while True:
            try:
                self.global_state.open()
                return True
            except StoreLockedError as exc:
                attempts += 1
                if attempts % 20 == 1:
                    log.info("Global state waits for its previous owner to release it: %s", exc)
            if stopping():
                return False
            time.sleep(_LOCK_RETRY_S)

    def _partition_bounds(self, topic: str) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        """Start and end offsets of every partition of ``topic``; wipes the store on an invalid position."""
        partitions = [TopicPartition(topic, p) for p in self._consumer.partitions(topic, self._timeout_s)]
        if not partitions:
            raise KafkaClientError(f"global topic '{topic}' has no partitions")
        bounds = {tp: self._consumer.watermarks(tp, self._timeout_s) for tp in partitions}
        invalid = [
            tp
            for tp, (low, high) in bounds.items()
            if tp in self.global_state.positions and not low <= self.global_state.positions[tp] <= high
        ]
        if invalid:
            log.warning("Global positions %s are outside the logs' offsets", ", ".join(map(str, invalid)))
            self.global_state.reset(topic)
        starts = {tp: self.global_state.positions.get(tp, low) for tp, (low, _) in bounds.items()}
        return starts, {tp: high for tp, (_, high) in bounds.items()}

    def _caught_up(self, ends: Mapping[TopicPartition, int]) -> bool:
        positions = self.global_state.positions
        return all(positions.get(tp, 0) >= end for tp, end in ends.items())

    def _poll_once(self, timeout_s: float) -> int:
        records, reached_end = self._consumer.poll(self._batch_size, timeout_s)
        applied = self.global_state.apply(records)
        if reached_end:
            self.global_state.advance(self._consumer.positions(sorted(reached_end)))
        return applied


def global_store_specs(description: TopologyDescription) -> list[GlobalStoreSpec]:
    """The global stores a topology declares (one per ``global_table`` node); empty when it has none."""
    specs: list[GlobalStoreSpec] = []
    for node in description.nodes:
        if isinstance(node, GlobalTableNode):
            specs.append(GlobalStoreSpec(node.store, node.topic, node.key_serde, node.value_serde, node=node.name))
    return specs


def build_global_thread(
    description: TopologyDescription,
    application_state_dir: Path,
    thread_index: int,
    store_factory: GlobalStoreFactory,
    consumer: GlobalConsumerClient | None,
    commit_interval_ms: int,
) -> GlobalStreamThread | None:
    """The global stream thread of one worker, or ``None`` when the topology has no global tables.

    Raises ValueError when it has global tables but no global consumer was given.
    """
    specs = global_store_specs(description)
    if not specs:
        return None
    if consumer is None:
        raise ValueError("the topology has global tables but the stream thread got no global consumer")
    state = GlobalStateManager(specs, global_state_dir(application_state_dir, thread_index), store_factory)
    return GlobalStreamThread(state, consumer, commit_interval_ms)


def _describe(starts: Mapping[TopicPartition, int], ends: Mapping[TopicPartition, int]) -> str:
    return ", ".join(f"{tp}@{starts[tp]}..{ends[tp]}" for tp in sorted(starts))
