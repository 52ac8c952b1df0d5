"""The ceiling: a bare confluent-kafka consume -> produce loop, run as its own process.

``python -m bench.raw_loop --bootstrap B --group G --input T --output O`` copies every record of ``T`` to
``O`` (same key, value and timestamp; no deserialization) until SIGTERM/SIGINT. It uses the client
settings of a streamapp stream thread (``streamapp.kafka.clients``): a KIP-848 group consumer without
auto-commit, ``consume(max.poll.records=1000, poll.ms=100)``, a producer with ``acks=all``,
``linger.ms=100``, lz4 and the murmur2 partitioner; every ``--commit-interval-ms`` it flushes the producer
and commits the consumed offsets synchronously, as an at-least-once stream thread does. No per-record
Python delivery callback: librdkafka reports only failed deliveries.
"""

from __future__ import annotations

import signal
import sys
import time
from typing import Any

import click
from confluent_kafka import Consumer, Producer, TopicPartition

__all__ = ["copy_loop", "main"]


def copy_loop(
    bootstrap: str,
    group: str,
    input_topic: str,
    output_topic: str,
    commit_interval_ms: int = 1000,
    max_records: int | None = None,
    stopping: Any = lambda: False,
) -> int:
    """Copy records until ``stopping()`` (or ``max_records`` were copied); returns the records copied.

    Raises RuntimeError on a consumer error or a failed delivery.
    """
    failures: list[str] = []

    def failed(err: Any, _msg: Any) -> None:
        if err is not None:
            failures.append(str(err))

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_uncommitted",
        }
    )
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "partitioner": "murmur2_random",
            "acks": "all",
            "linger.ms": 100,
            "compression.type": "lz4",
            "delivery.report.only.error": True,
            "on_delivery": failed,
        }
    )
    consumer.subscribe([input_topic])
    offsets: dict[tuple[str, int], int] = {}
    copied = 0
    last_commit = time.monotonic()

    def commit() -> None:
        if producer.flush(60):
            raise RuntimeError("records not acknowledged within 60s")
        if failures:
            raise RuntimeError(f"delivery failed: {failures[0]}")
        if offsets:
            consumer.commit(
                offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()],
                asynchronous=False,
            )
            offsets.clear()

    try:
        while not stopping() and (max_records is None or copied < max_records):
            messages = consumer.consume(num_messages=1000, timeout=0.1)
            for message in messages:
                if message.error() is not None:
                    raise RuntimeError(f"consumer error: {message.error()}")
                while True:
                    try:
                        producer.produce(output_topic, message.value(), message.key(), timestamp=message.timestamp()[1])
                        break
                    except BufferError:
                        producer.poll(0.05)
                offsets[(str(message.topic()), int(message.partition() or 0))] = int(message.offset() or 0) + 1
            copied += len(messages)
            producer.poll(0)
            if (time.monotonic() - last_commit) * 1000 >= commit_interval_ms:
                commit()
                last_commit = time.monotonic()
        commit()
    finally:
        consumer.close()
    return copied


@click.command()
@click.option("--bootstrap", default="127.0.0.1:9092", show_default=True)
@click.option("--group", required=True, help="consumer group id")
@click.option("--input", "input_topic", required=True)
@click.option("--output", "output_topic", required=True)
@click.option("--commit-interval-ms", default=1000, show_default=True)
def main(bootstrap: str, group: str, input_topic: str, output_topic: str, commit_interval_ms: int) -> None:
    """Copy INPUT to OUTPUT with a raw confluent-kafka loop until SIGTERM."""
    stop = False

    def on_signal(*_: Any) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    copied = copy_loop(bootstrap, group, input_topic, output_topic, commit_interval_ms, stopping=lambda: stop)
    print(f"copied {copied} records", file=sys.stderr)


if __name__ == "__main__":
    main()
