"""A stream thread's failure names the task and the source record (topic, partition, offset) when a record
handler said *fail*, and its text is bounded to 1 KiB: what ``/status`` ``last_failure`` shows."""

from __future__ import annotations

import pytest
from streamapp.config import StreamsConfig
from streamapp.kafka.types import ConsumerRecord
from streamapp.processing.errors import DeserializationError, ExceptionHandlers, ProcessingError, failure_of


def handlers() -> ExceptionHandlers:
    config = StreamsConfig.from_mapping({"application.id": "app", "bootstrap.servers": "x:1"})
    return ExceptionHandlers(config, lambda *_: None)


def test_a_poison_record_under_log_and_fail_names_task_topic_partition_and_offset() -> None:
    record = ConsumerRecord("orders-v2", 3, 41, b"k", b"{not json", 0)
    with pytest.raises(DeserializationError) as raised:
        handlers().deserialization_failed(record, ValueError("Expecting value"), "1_3")
    failure = failure_of(raised.value, 123.5)
    assert (failure.task, failure.topic, failure.partition, failure.offset) == ("1_3", "orders-v2", 3, 41)
    assert failure.error.startswith("DeserializationError: task 1_3: deserialization of record orders-v2-3@41")
    assert failure.at == 123.5


def test_a_processing_error_without_attributes_is_read_from_its_message() -> None:
    failure = failure_of(ProcessingError("task 0_2: record my-topic-12-0@99: invalid timestamp -5"), 1.0)
    assert (failure.task, failure.topic, failure.partition, failure.offset) == ("0_2", "my-topic-12", 0, 99)


def test_any_other_error_has_no_task_or_record_and_a_bounded_text() -> None:
    failure = failure_of(RuntimeError("é" * 5000), 1.0)
    assert (failure.task, failure.topic, failure.partition, failure.offset) == (None, None, None, None)
    assert failure.error.startswith("RuntimeError: é") and failure.error.endswith("...")
    assert len(failure.error.encode()) <= 1024
