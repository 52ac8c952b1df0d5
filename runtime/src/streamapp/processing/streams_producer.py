"""StreamsProducer: the one producer of a stream thread, transactional under ``exactly_once_v2`` (Kafka Streams'
``StreamsProducer`` in EOS-v2 mode: one transactional producer per thread, KIP-447).

It implements ``ProducerClient``, so tasks and stores send through it unchanged. Under exactly-once:

- the transaction begins lazily, right before the first record after a commit (``maybeBeginTransaction``);
- ``commit(offsets, consumer, metadata)`` adds the consumed offsets (each with its commit metadata,
  ``streamapp.processing.commit_metadata``) with the consumer's group metadata and commits the transaction
  (the broker rejects the offsets of a member the group has moved past: zombie fencing);
- any failure inside an open transaction aborts it: the caller closes its tasks without commit and revives
  them from their stores and committed offsets (``TransactionAbortedError``, ``CommitFailedError``);
- ``ProducerFencedError`` means another producer took over this ``transactional.id`` (or the epoch is stale):
  ``reset()`` replaces the client by a fresh one (Kafka's ``resetProducer``) after the tasks were closed dirty.

Under at-least-once ``commit`` just commits the offsets and their metadata with the consumer (after the caller
flushed).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import cast

from streamapp.kafka.types import (
    ConsumerClient,
    DeliveryError,
    Headers,
    ProducerClient,
    ProducerFencedError,
    TopicPartition,
    TransactionAbortedError,
    TransactionalProducerClient,
)

__all__ = ["StreamsProducer"]

log = logging.getLogger(__name__)


class StreamsProducer:
    """See the module docstring. ``client_factory`` creates the underlying client (again after fencing);
    ``timeout_s`` bounds each transactional call."""

    def __init__(
        self,
        client_factory: Callable[[], ProducerClient],
        exactly_once: bool,
        timeout_s: float = 60.0,
    ) -> None:
        self.exactly_once = exactly_once
        self._factory = client_factory
        self._timeout_s = timeout_s
        self.transaction_in_flight = False
        self.client: ProducerClient = client_factory()
        self.transactions_committed = 0
        self.transactions_aborted = 0
        if exactly_once:
            self._txn().init_transactions(timeout_s)

    # -- ProducerClient ----------------------------------------------------------------------------

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        partition: int | None = None,
        on_delivery: Callable[[TopicPartition, int], None] | None = None,
        headers: Headers | None = None,
    ) -> None:
        if self.exactly_once and not self.transaction_in_flight:
            self._begin()
        try:
            if headers:
                self.client.send(topic, key, value, timestamp, partition, on_delivery, headers)
            else:
                self.client.send(topic, key, value, timestamp, partition, on_delivery)
        except DeliveryError:
            raise  # not queued: the production exception handler decides (the transaction is intact)

    def poll(self) -> None:
        try:
            self.client.poll()
        except DeliveryError as exc:
            self._abort_on(exc)
            raise

    def flush(self, timeout_s: float) -> None:
        try:
            self.client.flush(timeout_s)
        except DeliveryError as exc:
            self._abort_on(exc)
            raise

    def close(self, timeout_s: float) -> None:
        if self.transaction_in_flight:
            self.abort()
        self.client.close(timeout_s)

    # -- commit / abort ----------------------------------------------------------------------------

    def commit(
        self,
        offsets: Mapping[TopicPartition, int],
        consumer: ConsumerClient,
        metadata: Mapping[TopicPartition, str] | None = None,
    ) -> None:
        """Commit ``offsets`` (next offsets to read), each with its ``metadata`` string where it has one: in the
        transaction under exactly-once, else with the consumer. Call after ``flush``. Raises CommitFailedError when
        the group moved on, TransactionAbortedError / ProducerFencedError under exactly-once (the transaction was
        aborted)."""
        if not self.exactly_once:
            consumer.commit(offsets, metadata)
            return
        if not offsets and not self.transaction_in_flight:
            return
        txn = self._txn()
        try:
            if not self.transaction_in_flight:
                self._begin()
            if offsets:
                txn.send_offsets_to_transaction(offsets, consumer.group_metadata(), self._timeout_s, metadata)
            txn.commit_transaction(self._timeout_s)
        except ProducerFencedError:
            self.transaction_in_flight = False
            raise
        except Exception:
            self.abort()
            raise
        self.transaction_in_flight = False
        self.transactions_committed += 1

    def abort(self) -> None:
        """Abort the open transaction, if any (best effort: a fenced producer's transaction is aborted by the
        broker anyway). A no-op under at-least-once."""
        if not self.exactly_once or not self.transaction_in_flight:
            return
        self.transaction_in_flight = False
        self.transactions_aborted += 1
        try:
            self._txn().abort_transaction(self._timeout_s)
            log.info("Aborted the open transaction")
        except ProducerFencedError as exc:
            log.warning("Could not abort the transaction, the producer was fenced: %s", exc)
        except Exception:
            log.exception("Could not abort the transaction")

    def reset(self) -> None:
        """Replace a fenced client by a new one with the same ``transactional.id`` (initialised again)."""
        log.warning("Replacing the fenced producer")
        self.transaction_in_flight = False
        try:
            self.client.close(0.0)
        except Exception:
            log.exception("Failed to close the fenced producer")
        self.client = self._factory()
        if self.exactly_once:
            self._txn().init_transactions(self._timeout_s)

    # -- internals ---------------------------------------------------------------------------------

    def _txn(self) -> TransactionalProducerClient:
        return cast(TransactionalProducerClient, self.client)

    def _begin(self) -> None:
        self._txn().begin_transaction()
        self.transaction_in_flight = True

    def _abort_on(self, exc: DeliveryError) -> None:
        """Under exactly-once a failed delivery leaves the transaction abortable: abort it and say so."""
        if self.exactly_once and self.transaction_in_flight:
            self.abort()
            raise TransactionAbortedError(f"transaction aborted: {exc}") from exc
