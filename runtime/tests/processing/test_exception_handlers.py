"""Exception handlers of a stream thread (over the Kafka fakes): a poison record never stops a task silently
and never loses the records after it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from harness import EVENTS, OUTPUT, ThreadHarness, latest_counts, new_cluster, produce_events
from streamapp.kafka.types import TopicPartition
from streamapp.processing.errors import (
    HEADER_EXCEPTION,
    HEADER_OFFSET,
    HEADER_PARTITION,
    HEADER_TOPIC,
    DeserializationError,
    ProcessingError,
)

DLQ = "dead-letters"


def poisoned_cluster():  # type: ignore[no-untyped-def]
    cluster = new_cluster()
    cluster.create_topic(DLQ, 1)
    produce_events(cluster, [(2, "red")], partition=0)
    cluster.append(EVENTS, 0, b"poison", b"not json", timestamp=5, headers=[("trace", b"abc")])
    produce_events(cluster, [(4, "red"), (6, "blue")], partition=0)
    return cluster


def test_log_and_fail_is_the_default_and_names_the_record(tmp_path: Path) -> None:
    h = ThreadHarness(poisoned_cluster(), tmp_path, **{"commit.interval.ms": 0})
    h.start()
    h.assign_all()
    with pytest.raises(DeserializationError, match=r"events-0@1"):
        h.run(10)


def test_log_and_continue_skips_the_poison_record_and_processes_the_rest(tmp_path: Path) -> None:
    cluster = poisoned_cluster()
    h = ThreadHarness(
        cluster, tmp_path, **{"commit.interval.ms": 0, "default.deserialization.exception.handler": "log_and_continue"}
    )
    thread = h.start()
    h.assign_all()
    h.run(30)
    assert latest_counts(cluster) == {"red": 2, "blue": 1}
    assert cluster.committed[TopicPartition(EVENTS, 0)] == 4  # the poison record's offset is committed too
    assert thread.status().metrics.dropped_records_total == 1


def test_dead_letter_queue_gets_the_original_record_with_error_headers(tmp_path: Path) -> None:
    cluster = poisoned_cluster()
    config = {
        "commit.interval.ms": 0,
        "default.deserialization.exception.handler": "dead_letter_queue",
        "errors.dead.letter.queue.topic.name": DLQ,
    }
    h = ThreadHarness(cluster, tmp_path, **config)
    thread = h.start()
    h.assign_all()
    h.run(30)
    assert latest_counts(cluster) == {"red": 2, "blue": 1}
    (letter,) = cluster.records(DLQ)
    assert (letter.key, letter.value, letter.timestamp) == (b"poison", b"not json", 5)
    headers = dict(letter.headers or [])
    assert headers["trace"] == b"abc"
    assert headers[HEADER_EXCEPTION] == b"SerdeError"
    assert (headers[HEADER_TOPIC], headers[HEADER_PARTITION], headers[HEADER_OFFSET]) == (EVENTS.encode(), b"0", b"1")
    assert thread.handlers.dead_letters == 1


def test_processing_exception_handler_continues_past_a_failing_user_function(tmp_path: Path) -> None:
    cluster = new_cluster()
    cluster.create_topic(DLQ, 1)
    # counting_functions.color raises KeyError for a value without "color"
    cluster.append(EVENTS, 0, b"e0", json.dumps({"n": 2}).encode(), timestamp=1)
    produce_events(cluster, [(4, "red")], partition=0)
    config = {
        "commit.interval.ms": 0,
        "processing.exception.handler": "dead_letter_queue",
        "errors.dead.letter.queue.topic.name": DLQ,
    }
    h = ThreadHarness(cluster, tmp_path, **config)
    h.start()
    h.assign_all()
    h.run(30)
    assert latest_counts(cluster) == {"red": 1}
    (letter,) = cluster.records(DLQ)
    assert dict(letter.headers or [])[HEADER_EXCEPTION] == b"KeyError"
    assert cluster.records(OUTPUT)


def test_processing_errors_fail_by_default(tmp_path: Path) -> None:
    cluster = new_cluster()
    cluster.append(EVENTS, 0, b"e0", json.dumps({"n": 2}).encode(), timestamp=1)
    h = ThreadHarness(cluster, tmp_path, **{"commit.interval.ms": 0})
    h.start()
    h.assign_all()
    with pytest.raises(ProcessingError, match=r"processing of record events-0@0 failed: KeyError"):
        h.run(10)
