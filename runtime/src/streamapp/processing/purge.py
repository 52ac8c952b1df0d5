"""Purge of consumed repartition records: Kafka Streams' ``repartition.purge.interval.ms``.

A repartition topic is written and read only by the application itself, and its records are never needed
again once the reading task committed past them: Kafka Streams deletes them with ``Admin.deleteRecords``
instead of keeping them until ``retention.ms`` (ours is ``-1``, so they would otherwise stay forever).

The rules followed (apache/kafka ``StreamThread.maybeCommit``, ``TaskManager.maybePurgeCommittedRecords``,
``StreamTask.purgeableOffsets``):

- **when**: the stream thread checks after every commit attempt; once more than ``repartition.purge.interval.ms``
  passed since the last check that fired (``purge_due``), it purges. The first check fires at once (Kafka's
  ``lastPurgeMs`` starts at 0), when no task committed yet, so the first records go about one interval later.
- **what**: for every running task, the *committed* offset (next offset to read) of each input partition of a
  repartition topic (``purgeable_offsets``); records before it are deleted. Only offsets the group committed
  count, so under ``exactly_once_v2`` only offsets committed with a transaction: a record is never deleted
  before the commit that consumed it, and a task that restarts from the committed offsets finds its records.
  External source topics are never purged.
- **how**: one ``DeleteRecords`` request at a time, without waiting for it (``CommittedRecordsPurger``): while
  the previous request is in flight, a due purge sends nothing. A failed request is logged and ignored; the
  next interval sends newer offsets anyway (none of its errors is fatal to the application).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from typing import Protocol

from streamapp.kafka.types import TopicPartition
from streamapp.topology import TopologyDescription

__all__ = [
    "CommittedRecordsPurger",
    "DeleteRecordsRequest",
    "RecordsDeleter",
    "purge_due",
    "purgeable_offsets",
    "repartition_topics",
]

log = logging.getLogger(__name__)


class DeleteRecordsRequest(Protocol):
    """An in-flight ``DeleteRecords`` request (``streamapp.kafka.admin.DeleteRecordsResult`` on the broker)."""

    def done(self) -> bool:
        """True once the broker answered for every partition (or the request failed); never blocks."""
        ...

    def failures(self) -> dict[TopicPartition, str]:
        """After ``done()``: the partitions whose records could not be deleted, with the error text."""
        ...


class RecordsDeleter(Protocol):
    """The admin seam: sends ``DeleteRecords`` (Kafka's ``Admin.deleteRecords``)."""

    def delete_records(self, before_offsets: Mapping[TopicPartition, int]) -> DeleteRecordsRequest:
        """Ask the brokers to delete every record of each partition before its offset; returns at once.

        Raises KafkaClientError when the request cannot be sent.
        """
        ...


def repartition_topics(description: TopologyDescription, application_id: str) -> frozenset[str]:
    """The repartition topics the application reads (``<application.id>-<name>-repartition``): the internal
    source topics of its sub-topologies (Kafka's ``InternalTopologyBuilder`` repartition topics)."""
    return frozenset(
        ref.resolve(application_id) for sub in description.subtopologies() for ref in sub.source_topics if ref.internal
    )


def purgeable_offsets(
    committed: Mapping[TopicPartition, int],
    input_partitions: Collection[TopicPartition],
    repartition: Collection[str],
) -> dict[TopicPartition, int]:
    """Kafka's ``StreamTask.purgeableOffsets``: of a task's ``committed`` offsets (next offset to read, per
    input partition, as committed to the group), those of its ``input_partitions`` that belong to a
    ``repartition`` topic. Offsets below 1 delete nothing and are left out (a negative one would mean
    "everything" to the broker)."""
    return {
        tp: offset
        for tp, offset in committed.items()
        if offset > 0 and tp.topic in repartition and tp in input_partitions
    }


def purge_due(now_ms: int, last_purge_ms: int, interval_ms: int) -> bool:
    """Whether more than ``interval_ms`` passed since ``last_purge_ms`` (Kafka's ``now - lastPurgeMs >
    purgeTimeMs``); all in ms of one clock."""
    return now_ms - last_purge_ms > interval_ms


class CommittedRecordsPurger:
    """Sends ``DeleteRecords`` for committed repartition offsets, one request at a time, never waiting for it
    (the ``deleteRecordsResult`` half of Kafka's ``TaskManager.maybePurgeCommittedRecords``)."""

    def __init__(self, deleter: RecordsDeleter) -> None:
        self._deleter = deleter
        self._in_flight: DeleteRecordsRequest | None = None
        self._sent: dict[TopicPartition, int] = {}
        self.requests_sent = 0
        """``DeleteRecords`` requests sent so far."""
        self.requests_failed = 0
        """Requests that failed (not sent, or a partition the broker refused)."""
        self.purged_offsets: dict[TopicPartition, int] = {}
        """Per partition, the offset before which the broker confirmed deletion (the new low watermark)."""

    @property
    def in_flight(self) -> bool:
        """True while the last request sent has not been answered."""
        return self._in_flight is not None and not self._in_flight.done()

    def maybe_purge(self, offsets: Mapping[TopicPartition, int]) -> bool:
        """Send ``DeleteRecords`` for ``offsets`` (records before each offset) unless the previous request is
        still in flight or there is nothing to delete; returns whether a request was sent. Never raises for a
        Kafka failure: it is logged and the next call tries again with its own offsets."""
        if not self._settle():
            log.debug("Previous delete-records request still in flight; not purging now")
            return False
        if not offsets:
            return False
        try:
            self._in_flight = self._deleter.delete_records(dict(offsets))
        except Exception as exc:  # an admin failure must not stop processing (Kafka ignores them too)
            self.requests_failed += 1
            log.warning("Could not send a delete-records request for %s: %s", _describe(offsets), exc)
            return False
        self._sent = dict(offsets)
        self.requests_sent += 1
        log.debug("Sent delete-records request: %s", _describe(offsets))
        return True

    def _settle(self) -> bool:
        """If the in-flight request is answered: record its outcome, forget it and return True."""
        request = self._in_flight
        if request is None:
            return True
        if not request.done():
            return False
        self._in_flight = None
        failures = request.failures()
        if failures:
            self.requests_failed += 1
            log.warning(
                "Previous delete-records request failed for %s; retrying with newer offsets at the next purge",
                ", ".join(f"{tp} ({error})" for tp, error in sorted(failures.items())),
            )
        for tp, offset in self._sent.items():
            if tp not in failures:
                self.purged_offsets[tp] = offset
        return True


def _describe(offsets: Mapping[TopicPartition, int]) -> str:
    return ", ".join(f"{tp}@{offset}" for tp, offset in sorted(offsets.items()))
