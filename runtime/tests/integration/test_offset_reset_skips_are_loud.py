"""An offset reset that skips records is loud on the real broker: records deleted before the application read
them (delete_records here; retention.ms in production) give one WARN naming the partition, the offsets and how
many records were skipped, and the ``streamapp_offset_reset_skipped_records_total`` metric counts them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from streamapp_harness import KafkaTestClient, StreamAppInstance, unique, wait_for

pytestmark = pytest.mark.integration

WARNING = "Offset reset on {source}-0 skips {skipped} records: the application's position is offset {expected}"


def pass_through(source: str, output: str) -> dict[str, Any]:
    return {
        "nodes": [
            {"name": "in", "type": "source", "topics": [source], "keySerde": "string", "valueSerde": "json"},
            {"name": "out", "type": "sink", "input": "in", "topic": output, "keySerde": "string", "valueSerde": "json"},
        ]
    }


def delete_before(kafka: KafkaTestClient, topic: str, offset: int) -> None:
    for future in kafka.admin.delete_records([TopicPartition(topic, 0, offset)]).values():
        future.result()


def test_records_deleted_before_they_were_read_are_a_warning_and_a_metric(
    kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance]
) -> None:
    app, source, output = unique("reset"), unique("history"), unique("copied")
    kafka.create_topics({source: 1, output: 1})
    kafka.produce(source, [(f"k{i}", i) for i in range(100)], partition=0)
    delete_before(kafka, source, 60)
    config = {
        "application.id": app,
        "bootstrap.servers": kafka.bootstrap,
        "commit.interval.ms": 200,
        "state.dir": str(workdir / "state"),
    }
    metric = "streamapp_offset_reset_skipped_records_total"

    first = StreamAppInstance(workdir / "first", pass_through(source, output), config)
    instances.append(first.start())
    first.wait_ready()
    wait_for(lambda: len(kafka.read_all(output)) == 40, 60, "the 40 records left copied")
    wait_for(lambda: first.metric(metric) == 60, 30, "the metric")
    assert first.log_file.read_text().count(WARNING.format(source=source, skipped=60, expected=0)) == 1
    assert first.stop() == 0

    kafka.produce(source, [(f"k{i}", i) for i in range(100, 200)], partition=0)
    delete_before(kafka, source, 150)  # the group committed 100: records 100..149 go unread
    second = StreamAppInstance(workdir / "second", pass_through(source, output), config)
    instances.append(second.start())
    second.wait_ready()
    wait_for(lambda: len(kafka.read_all(output)) == 90, 60, "the 50 records after the gap copied")
    wait_for(lambda: second.metric(metric) == 50, 30, "the metric")

    assert [value for _, _, _, value in kafka.read_all(output)][40:] == [str(i).encode() for i in range(150, 200)]
    assert second.log_file.read_text().count("Offset reset on") == 1  # once, not again on librdkafka's own reset
    assert WARNING.format(source=source, skipped=50, expected=100) in second.log_file.read_text()
    assert second.stop() == 0
