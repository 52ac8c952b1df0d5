"""The stream thread's producer reports every undelivered record, and a dropped producer is freed at once.

No broker: 127.0.0.1:1 refuses connections, so librdkafka fails each record after ``message.timeout.ms``.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest
from streamapp.kafka.producer import KafkaProducer
from streamapp.kafka.types import DeliveryError, TopicPartition

UNREACHABLE = {
    "bootstrap.servers": "127.0.0.1:1",
    "message.timeout.ms": 300,
    "socket.connection.setup.timeout.ms": 1000,
}


@pytest.fixture
def no_cyclic_gc() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def test_a_dropped_producer_is_freed_without_the_cyclic_collector(no_cyclic_gc: None) -> None:
    producer = KafkaProducer(UNREACHABLE)
    ref = weakref.ref(producer)
    del producer
    assert ref() is None


def test_undelivered_records_without_their_own_callback_reach_the_production_exception_handler() -> None:
    failures: list[tuple[str, bytes | None, bytes | None]] = []

    def tolerate(topic: str, key: bytes | None, value: bytes | None, error: str) -> bool:
        failures.append((topic, key, value))
        return True

    producer = KafkaProducer(UNREACHABLE, on_delivery_error=tolerate)
    producer.send("out", b"k1", b"v1", 1_000)
    producer.send("out", None, b"v2", -1, partition=0, headers=[("h", b"x")])
    producer.flush(10)
    assert failures == [("out", b"k1", b"v1"), ("out", None, b"v2")]
    assert producer.dropped_records == 2


def test_an_undelivered_record_with_its_own_callback_fails_the_flush_and_skips_the_callback() -> None:
    delivered: list[tuple[TopicPartition, int]] = []
    producer = KafkaProducer(UNREACHABLE)
    producer.send(
        "changelog", b"k", b"v", 1_000, partition=0, on_delivery=lambda tp, offset: delivered.append((tp, offset))
    )
    with pytest.raises(DeliveryError, match="record to changelog not delivered"):
        producer.flush(10)
    assert delivered == []
