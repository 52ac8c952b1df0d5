"""User functions of the timestamp extractor tests."""

from __future__ import annotations

from typing import Any


def later_of(key: Any, value: Any, record_timestamp: int, partition_time: int) -> int:
    return max(record_timestamp, partition_time)
