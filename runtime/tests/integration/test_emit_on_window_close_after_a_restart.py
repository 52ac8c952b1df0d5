"""On the real broker, a window aggregation with ``EmitStrategy.on_window_close()`` (KIP-825) emits each window's final
result once across a restart that rebuilds its window store from the changelog: the restarted task resumes from the
last emission's close time committed in the offsets' metadata (as Kafka's
``AbstractKStreamTimeWindowAggregateProcessor`` keeps it; the store-derived fallback of older commits gives the same
result here), so it emits the window that closes next, not the closed ones again.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from streamapp import EmitStrategy, StreamsBuilder
from streamapp.dsl.windowed import SessionWindowedKStream
from streamapp.dsl.windows import TimeWindows
from streamapp.serdes import serde_for
from streamapp.windowed import Windowed
from streamapp_harness import KafkaTestClient, StreamAppInstance, app_config, recent_window_start, unique, wait_for

pytestmark = pytest.mark.integration

WINDOW = 10_000
BASE = recent_window_start(WINDOW)


def final_counts(source: str, output: str) -> dict[str, Any]:
    """``source`` → tumbling 10 s count, no grace, final results only, a minute of retention → ``output``."""
    builder = StreamsBuilder()
    windowed = (
        builder.stream(source, key_serde="string", value_serde="string", name="clicks")
        .group_by_key(name="by-user")
        .windowed_by(TimeWindows.of_size_with_no_grace(WINDOW))
    )
    assert not isinstance(windowed, SessionWindowedKStream)
    (
        windowed.emit_strategy(EmitStrategy.on_window_close())
        .count(name="per-window", store="window-counts", retention_ms=60_000)
        .to_stream(name="finals")
        .to(output, name="out", value_serde="long")
    )
    return builder.build().to_dict()


def produce(bootstrap: str, topic: str, clicks: list[tuple[str, int]]) -> None:
    """``(user, seconds after BASE)`` records."""
    producer = Producer({"bootstrap.servers": bootstrap})
    for user, seconds in clicks:
        producer.produce(topic, key=user.encode(), value=b"x", timestamp=BASE + seconds * 1000)
    assert producer.flush(30) == 0


def read_finals(bootstrap: str, topic: str) -> list[tuple[Windowed, int]]:
    """Every record of ``topic`` (one partition, already written): ``(window, count)``."""
    keys, longs = serde_for(f"windowed:string:{WINDOW}"), serde_for("long")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("reader"), "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        messages = consumer.consume(100, timeout=10)
    finally:
        consumer.close()
    return [(keys.deserialize(m.key()), longs.deserialize(m.value())) for m in messages if m.error() is None]


def test_final_window_counts_are_emitted_once_across_a_restart_that_restores_the_store(
    kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance]
) -> None:
    app, source, output = unique("emit-on-close"), unique("clicks"), unique("finals")
    kafka.create_topics({source: 1, output: 1})
    config = app_config(kafka, app, workdir)  # Kafka's default record cache

    produce(kafka.bootstrap, source, [("u", 1), ("u", 3), ("v", 12)])  # 12 s closes [0 s, 10 s)
    first = StreamAppInstance(workdir / "run1", final_counts(source, output), config)
    instances.append(first.start())
    wait_for(lambda: sum(kafka.end_offsets(output).values()) >= 1, 90, "the final count of [0 s, 10 s)")
    assert first.stop() == 0

    shutil.rmtree(workdir / "state")  # the window store must come back from its changelog
    produce(kafka.bootstrap, source, [("w", 25)])  # 25 s closes [10 s, 20 s)
    second = StreamAppInstance(workdir / "run2", final_counts(source, output), config)
    instances.append(second.start())
    wait_for(lambda: sum(kafka.end_offsets(output).values()) >= 2, 90, "the final count of [10 s, 20 s)")
    time.sleep(1)  # a re-emitted [0 s, 10 s) would be written with it
    assert second.stop() == 0

    assert read_finals(kafka.bootstrap, output) == [
        (Windowed("u", BASE, BASE + WINDOW), 2),
        (Windowed("v", BASE + WINDOW, BASE + 2 * WINDOW), 1),
    ]
