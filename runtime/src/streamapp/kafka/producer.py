"""The stream thread's confluent-kafka producer (implements ``ProducerClient`` and, with a ``transactional.id``,
``TransactionalProducerClient``).

Delivery failures are reported by librdkafka asynchronously (from ``poll``/``flush``). Without transactions
a failure is first offered to ``on_delivery_error`` (the production exception handler): if it tolerates the
failure (``continue``), the record is dropped; otherwise the first failure is raised as DeliveryError from the
next ``poll``/``flush``. With transactions every delivery failure is raised: the transaction can only be
aborted (Kafka's producer enters the abortable-error state too).

Transactional errors are classified as Kafka Streams' ``StreamsProducer`` does: fenced or invalid producer
epoch → ProducerFencedError (the client is unusable); an error that requires an abort →
TransactionAbortedError; a rejected offset commit because the group moved on → CommitFailedError
(``TaskMigratedException``); anything else → KafkaClientError (fatal for the thread).
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Callable, Mapping
from typing import Any

import confluent_kafka
from confluent_kafka import KafkaError, KafkaException

from streamapp.kafka.types import (
    CommitFailedError,
    DeliveryError,
    Headers,
    KafkaClientError,
    ProducerFencedError,
    TopicPartition,
    TransactionAbortedError,
)

__all__ = ["DeliveryErrorHandler", "KafkaProducer", "committable"]

log = logging.getLogger(__name__)

DeliveryErrorHandler = Callable[[str, bytes | None, bytes | None, str], bool]
"""``(topic, key, value, error text) -> tolerated``: the production exception handler for records the broker
did not acknowledge (at-least-once only)."""

_FENCED_CODES = {
    KafkaError._FENCED,
    KafkaError.PRODUCER_FENCED,
    KafkaError.INVALID_PRODUCER_EPOCH,
    KafkaError.INVALID_PRODUCER_ID_MAPPING,
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}
_GROUP_MOVED_CODES = {
    KafkaError.ILLEGAL_GENERATION,
    KafkaError.UNKNOWN_MEMBER_ID,
    KafkaError.FENCED_INSTANCE_ID,
    KafkaError.REBALANCE_IN_PROGRESS,
    KafkaError.STALE_MEMBER_EPOCH,
    KafkaError.FENCED_MEMBER_EPOCH,
}
_RETRY_LIMIT_S = 60.0

_ANY_PARTITION = -1
"""librdkafka's ``RD_KAFKA_PARTITION_UA``: the partitioner chooses."""


def committable(
    offsets: Mapping[TopicPartition, int], metadata: Mapping[TopicPartition, str] | None
) -> list[confluent_kafka.TopicPartition]:
    """``offsets`` as confluent-kafka's partitions to commit (consumer or transaction), each with its ``metadata``
    string where it has one (librdkafka sends it as the offset's metadata; none: ``""``)."""
    found = metadata or {}
    return [
        confluent_kafka.TopicPartition(tp.topic, tp.partition, off, metadata=found.get(tp))
        if tp in found
        else confluent_kafka.TopicPartition(tp.topic, tp.partition, off)
        for tp, off in offsets.items()
    ]


def transaction_error(error: KafkaError, what: str) -> KafkaClientError:
    """Classify a transactional API error (see the module docstring)."""
    text = f"{what} failed: {error.str()}"
    if error.code() in _FENCED_CODES:
        return ProducerFencedError(text)
    if error.code() in _GROUP_MOVED_CODES:
        return CommitFailedError(text)
    if error.txn_requires_abort():
        return TransactionAbortedError(text)
    if error.fatal() and "fenced" in error.str().lower():
        return ProducerFencedError(text)
    return KafkaClientError(text)


class KafkaProducer:
    """See the module docstring. ``settings`` are librdkafka producer settings."""

    def __init__(self, settings: Mapping[str, Any], on_delivery_error: DeliveryErrorHandler | None = None) -> None:
        self.transactional = "transactional.id" in settings
        # records sent without their own callback report to this one (no Python closure per record); it holds
        # this object weakly: a dropped (fenced) producer is freed at once, not by a later cyclic collection
        owner = weakref.ref(self)

        def check_delivery(error: KafkaError | None, message: Any) -> None:
            producer = owner()
            if producer is not None:
                producer._check_delivery(error, message)

        self._producer = confluent_kafka.Producer({**settings, "on_delivery": check_delivery})
        self._on_delivery_error = None if self.transactional else on_delivery_error
        self._failure: str | None = None
        self.dropped_records = 0
        """Records the broker did not acknowledge and the production exception handler tolerated."""

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
        delivered: Callable[[KafkaError | None, Any], None] | None = None  # the producer's own on_delivery
        if on_delivery is not None:

            def delivered(error: KafkaError | None, message: Any) -> None:
                self._check_delivery(error, message)
                if error is None:
                    on_delivery(TopicPartition(message.topic(), message.partition()), message.offset())

        # positional (topic, value, key, partition, on_delivery): no kwargs dict per record
        partition_or_any = _ANY_PARTITION if partition is None else partition
        timestamp_or_now = timestamp if timestamp >= 0 else 0
        headers_or_none: Any = headers or None  # a list of (str, bytes) tuples; confluent-kafka copies it
        while True:
            try:
                self._producer.produce(
                    topic, value, key, partition_or_any, delivered, timestamp=timestamp_or_now, headers=headers_or_none
                )
                return
            except BufferError:
                self._producer.poll(0.05)
            except KafkaException as exc:
                error = exc.args[0]
                if error.code() in _FENCED_CODES:
                    raise ProducerFencedError(f"cannot produce to {topic}: {error.str()}") from exc
                raise DeliveryError(f"cannot produce to {topic}: {error.str()}") from exc

    def poll(self) -> None:
        self._producer.poll(0)
        self._raise_failure()

    def flush(self, timeout_s: float) -> None:
        remaining = self._producer.flush(timeout_s)
        self._raise_failure()
        if remaining:
            raise DeliveryError(f"{remaining} records not acknowledged within {timeout_s:.0f}s")

    def close(self, timeout_s: float) -> None:
        self._producer.flush(timeout_s)

    # -- TransactionalProducerClient ---------------------------------------------------------------

    def init_transactions(self, timeout_s: float) -> None:
        self._call_retrying("init_transactions", lambda t: self._producer.init_transactions(t), timeout_s)

    def begin_transaction(self) -> None:
        try:
            self._producer.begin_transaction()
        except KafkaException as exc:
            raise transaction_error(exc.args[0], "begin_transaction") from exc

    def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, int],
        group_metadata: object,
        timeout_s: float,
        metadata: Mapping[TopicPartition, str] | None = None,
    ) -> None:
        partitions = committable(offsets, metadata)
        self._call_retrying(
            "send_offsets_to_transaction",
            lambda t: self._producer.send_offsets_to_transaction(partitions, group_metadata, t),
            timeout_s,
        )

    def commit_transaction(self, timeout_s: float) -> None:
        self._call_retrying("commit_transaction", lambda t: self._producer.commit_transaction(t), timeout_s)
        self._raise_failure()

    def abort_transaction(self, timeout_s: float) -> None:
        self._failure = None
        self._call_retrying("abort_transaction", lambda t: self._producer.abort_transaction(t), timeout_s)

    # -- internals ---------------------------------------------------------------------------------

    def _call_retrying(self, what: str, call: Callable[[float], None], timeout_s: float) -> None:
        """Call a transactional API; retriable errors are retried (librdkafka's documented pattern) until
        ``timeout_s`` (at least once) or ``_RETRY_LIMIT_S`` passed."""
        deadline = time.monotonic() + min(max(timeout_s, 1.0), _RETRY_LIMIT_S)
        while True:
            try:
                call(max(0.1, deadline - time.monotonic()))
                return
            except KafkaException as exc:
                error = exc.args[0]
                if error.retriable() and not error.txn_requires_abort() and time.monotonic() < deadline:
                    log.info("%s will be retried: %s", what, error.str())
                    time.sleep(0.1)
                    continue
                raise transaction_error(error, what) from exc

    def _check_delivery(self, error: KafkaError | None, message: Any) -> None:
        if error is None:
            return
        text = f"record to {message.topic()} not delivered: {error.str()}"
        handler = self._on_delivery_error
        if handler is not None and not error.fatal() and handler(message.topic(), message.key(), message.value(), text):
            self.dropped_records += 1
            return
        if self._failure is None:
            self._failure = text

    def _raise_failure(self) -> None:
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise DeliveryError(failure)
