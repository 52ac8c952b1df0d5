"""On the real broker, a suppressed window result keeps the headers of the record that last updated it across a
restart that rebuilds the suppression buffer from its changelog (Kafka's ``InMemoryTimeOrderedKeyValueChangeBuffer``
writes each buffered record's context, headers included, into the buffer's changelog)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from streamapp import StreamsBuilder
from streamapp.dsl.windows import Suppressed, TimeWindows
from streamapp.serdes import serde_for
from streamapp.windowed import Windowed
from streamapp_harness import KafkaTestClient, StreamAppInstance, unique, wait_for

pytestmark = pytest.mark.integration

SECOND = 1_000
WINDOW = 10 * SECOND
BASE = (int(time.time() * 1000) - 120 * SECOND) // WINDOW * WINDOW  # recent, so the broker keeps the records
KEYS = f"windowed:string:{WINDOW}"


def topology(source: str, output: str) -> dict[str, Any]:
    """``source`` → tumbling 10 s count, no grace → suppress until the window closes → ``output``."""
    builder = StreamsBuilder()
    (
        builder.stream(source, key_serde="string", value_serde="string", name="clicks")
        .group_by_key(name="by-user")
        .windowed_by(TimeWindows.of_size_with_no_grace(WINDOW))
        .count(name="per-window", store="window-counts")
        .suppress(Suppressed.until_window_closes().with_name("final"))
        .to_stream(name="finals")
        .to(output, name="out", value_serde="long")
    )
    return builder.build().to_dict()


def produce(bootstrap: str, topic: str, clicks: list[tuple[str, int, str]]) -> None:
    """``(user, seconds after BASE, seq header)`` records."""
    producer = Producer({"bootstrap.servers": bootstrap})
    for user, seconds, seq in clicks:
        producer.produce(
            topic, key=user.encode(), value=b"x", timestamp=BASE + seconds * SECOND, headers=[("seq", seq.encode())]
        )
    assert producer.flush(30) == 0


def committed(kafka: KafkaTestClient, group: str, topic: str) -> int:
    """The offset ``group`` committed on partition 0 of ``topic`` (-1 before its first commit)."""
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0)])
    [partition] = kafka.admin.list_consumer_group_offsets([request])[group].result(timeout=10).topic_partitions
    return int(partition.offset)


def read_finals(bootstrap: str, topic: str, count: int) -> list[tuple[Windowed, int, list[tuple[str, bytes]]]]:
    """The first ``count`` records of ``topic`` (one partition, already written): ``(window, count, headers)``."""
    keys, longs = serde_for(KEYS), serde_for("long")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("reader"), "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        messages = consumer.consume(count, timeout=30)
    finally:
        consumer.close()
    return [(keys.deserialize(m.key()), longs.deserialize(m.value()), m.headers() or []) for m in messages]


def test_a_window_result_buffered_before_a_restart_is_emitted_with_its_last_records_headers(
    kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance]
) -> None:
    app, source, output = unique("suppressed-headers"), unique("clicks"), unique("finals")
    kafka.create_topics({source: 1, output: 1})
    config = {
        "application.id": app,
        "bootstrap.servers": kafka.bootstrap,
        "commit.interval.ms": 200,
        "statestore.cache.max.bytes": 0,
        "state.dir": str(workdir / "state"),
    }

    produce(kafka.bootstrap, source, [("u", 1, "1"), ("u", 3, "2")])  # window [0 s, 10 s) stays open
    first = StreamAppInstance(workdir / "run1", topology(source, output), config)
    instances.append(first.start())
    wait_for(lambda: committed(kafka, app, source) == 2, 90, "both clicks processed and committed")
    assert first.stop() == 0
    assert sum(kafka.end_offsets(output).values()) == 0  # nothing final yet

    shutil.rmtree(workdir / "state")  # the buffer must come back from its changelog
    produce(kafka.bootstrap, source, [("other", 12, "3")])  # stream time 12 s closes [0 s, 10 s)
    second = StreamAppInstance(workdir / "run2", topology(source, output), config)
    instances.append(second.start())
    wait_for(lambda: sum(kafka.end_offsets(output).values()) >= 1, 90, "the final count of [0 s, 10 s)")
    restored = second.metric("streamapp_restore_records_total")
    assert second.stop() == 0

    assert read_finals(kafka.bootstrap, output, 1) == [(Windowed("u", BASE, BASE + WINDOW), 2, [("seq", b"2")])]
    assert restored > 0
