"""The ``timestampExtractor`` of a source node: where a consumed record's event time comes from.

YAML forms (field ``timestampExtractor`` of a ``source`` or ``table`` node; omitted = ``{type: record}``)::

    {type: record}                                         # the Kafka record's timestamp (CreateTime/LogAppendTime)
    {type: field, field: departure_time, format: iso8601}  # a field of the deserialized value (dotted path)
    {type: field, field: ts}                               # format epoch_ms (default) | epoch_s | iso8601
    {type: custom, function: "my_app.time:event_time"}     # fn(key, value, record_ts_ms, partition_time_ms) -> int
    {type: wall_clock}                                     # the processing wall-clock time

``onInvalid`` decides what happens when the extracted timestamp is negative, the field is missing or cannot
be parsed: ``fail`` (default; Kafka's ``FailOnInvalidTimestamp``: the record stops the task with an error that
names it), ``skip`` (``LogAndSkipOnInvalidTimestamp``: the record is dropped and counted) or ``partition_time``
(``UsePartitionTimeOnInvalidTimestamp``: the partition's highest timestamp so far; skipped while there is none).

Only the model lives here; ``streamapp.processing.timestamps`` implements the extractors.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic.alias_generators import to_camel

__all__ = ["TimestampExtractorSpec"]

_FUNCTION_REF = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


class TimestampExtractorSpec(BaseModel):
    """A source node's timestamp extractor (see the module docstring)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)

    type: Literal["record", "field", "custom", "wall_clock"] = "record"
    field: str | None = None
    """Dotted path into the value (``a.b`` reads ``value["a"]["b"]``); only for ``type: field``."""
    format: Literal["epoch_ms", "epoch_s", "iso8601"] = "epoch_ms"
    function: str | None = None
    """``package.module:function`` for ``type: custom``."""
    on_invalid: Literal["fail", "skip", "partition_time"] = "fail"

    @model_validator(mode="after")
    def _fields_fit_the_type(self) -> TimestampExtractorSpec:
        if self.type == "field" and not self.field:
            raise ValueError("timestampExtractor type 'field' needs 'field' (a dotted path into the value)")
        if self.type != "field" and self.field is not None:
            raise ValueError(f"timestampExtractor type '{self.type}' takes no 'field'")
        if self.type == "custom":
            if not self.function or not _FUNCTION_REF.match(self.function):
                raise ValueError("timestampExtractor type 'custom' needs 'function': 'package.module:function'")
        elif self.function is not None:
            raise ValueError(f"timestampExtractor type '{self.type}' takes no 'function'")
        return self
