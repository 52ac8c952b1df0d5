"""Timestamp extractors: the event time (epoch ms) of each consumed record, Kafka Streams' ``TimestampExtractor``.

``TimestampExtractor.extract(key, value, record_timestamp, partition_time)`` runs on the deserialized record
when it reaches the head of its partition queue (``streamapp.processing.partition_group``), as Kafka's
``RecordQueue`` does. ``partition_time`` is the highest timestamp extracted so far in that partition (-1 before
the first). Invalid results (negative, missing or unparseable field, a custom function returning a non-int) are
handled by the spec's ``onInvalid``; see ``streamapp.topology.timestamps``. A skipped record counts in the task's
dropped-records metric, and its WARN is rate-limited per extractor description (``streamapp.skips``: one line per
10 s with the count, not one per record).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from streamapp.skips import SkipLog, skip_log
from streamapp.topology.functions import resolve_function
from streamapp.topology.timestamps import TimestampExtractorSpec

__all__ = ["InvalidTimestampError", "TimestampExtractor", "build_extractor"]

log = logging.getLogger(__name__)

_RECORD = TimestampExtractorSpec()


class InvalidTimestampError(ValueError):
    """A record has no valid timestamp and the extractor's ``onInvalid`` is ``fail``."""


class TimestampExtractor:
    """One source node's extractor (see the module docstring). ``clock_ms`` serves ``type: wall_clock``;
    ``skips``: where skipped records are logged (default: this module's process-wide ``SkipLog``)."""

    def __init__(self, spec: TimestampExtractorSpec, clock_ms: Callable[[], int], skips: SkipLog | None = None) -> None:
        self.spec = spec
        self._clock_ms = clock_ms
        self._skips = skips if skips is not None else skip_log(log)
        self._path = spec.field.split(".") if spec.field else []
        self._function = resolve_function(spec.function) if spec.function else None
        self.uses_value = spec.type in ("field", "custom")

    def extract(self, key: Any, value: Any, record_timestamp: int, partition_time: int) -> int | None:
        """The record's timestamp in epoch ms, or ``None`` to skip the record (``onInvalid: skip``, or
        ``partition_time`` without one yet). Raises InvalidTimestampError under ``onInvalid: fail``."""
        kind = self.spec.type
        problem: str | None = None
        timestamp = -1
        try:
            if kind == "record":
                timestamp = record_timestamp
            elif kind == "field":
                timestamp = self._from_field(value)
            elif kind == "wall_clock":
                timestamp = self._clock_ms()
            else:
                assert self._function is not None
                result = self._function(key, value, record_timestamp, partition_time)
                if isinstance(result, bool) or not isinstance(result, int):
                    raise ValueError(f"{self.spec.function} returned {result!r}, not an int (epoch ms)")
                timestamp = result
        except (KeyError, IndexError, TypeError, ValueError, OverflowError) as exc:
            problem = f"{type(exc).__name__}: {exc}"
        if problem is None and timestamp >= 0:
            return timestamp
        problem = problem or f"negative timestamp {timestamp}"
        if self.spec.on_invalid == "fail":
            raise InvalidTimestampError(f"invalid timestamp ({self._describe()}): {problem}")
        if self.spec.on_invalid == "partition_time" and partition_time >= 0:
            return partition_time
        self._skips.skipped(f"no valid timestamp ({self._describe()})", problem)
        return None

    def _from_field(self, value: Any) -> int:
        current = value
        for part in self._path:
            if not isinstance(current, Mapping):
                raise KeyError(f"'{part}' of a {type(current).__name__}")
            current = current[part]
        fmt = self.spec.format
        if fmt == "iso8601":
            if not isinstance(current, str):
                raise ValueError(f"field {self.spec.field} is {current!r}, not an ISO-8601 string")
            parsed = datetime.fromisoformat(current)
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=UTC)
            return int(parsed.timestamp() * 1000)
        if isinstance(current, bool) or not isinstance(current, int | float | str):
            raise ValueError(f"field {self.spec.field} is {current!r}, not a number")
        number = float(current)
        return int(number * 1000) if fmt == "epoch_s" else int(number)

    def _describe(self) -> str:
        if self.spec.type == "field":
            return f"field '{self.spec.field}' as {self.spec.format}"
        if self.spec.type == "custom":
            return f"custom {self.spec.function}"
        return f"{self.spec.type} timestamp"


def build_extractor(spec: TimestampExtractorSpec | None, clock_ms: Callable[[], int]) -> TimestampExtractor:
    """The extractor of a source node (``spec`` ``None`` = the record timestamp, failing on negatives).

    Raises TopologyError when a custom function cannot be imported.
    """
    return TimestampExtractor(spec or _RECORD, clock_ms)
