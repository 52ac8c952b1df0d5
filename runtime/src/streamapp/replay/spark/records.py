"""The Arrow schema of the records between the replay's stages (``RECORD_SCHEMA``, Spark's DDL, and
``RECORD_ARROW_SCHEMA``): pyarrow only, for the Python workers' functions (reads, folds, tasks)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

__all__ = ["HEADERS_DDL", "HEADERS_TYPE", "RECORD_ARROW_SCHEMA", "RECORD_SCHEMA", "record_batch"]

RECORD_SCHEMA = (
    "topic string, partition int, offset long, key binary, value binary, timestamp long, "
    "producer_sub int, producer_part int, kind string, headers array<struct<key: string, value: binary>>"
)
"""Records between stages, as Spark's DDL: ``producer_*`` = the task that wrote it (-1 for records read from
Kafka), ``kind`` = ``source`` | ``sink`` | ``repartition`` | ``changelog``, ``offset`` = position in the
producer's sequence, ``headers`` as the record had them (null: none)."""
HEADERS_DDL = "array<struct<key: string, value: binary>>"

HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
RECORD_ARROW_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("timestamp", pa.int64()),
        ("producer_sub", pa.int32()),
        ("producer_part", pa.int32()),
        ("kind", pa.string()),
        ("headers", HEADERS_TYPE),
    ]
)
"""``producer_*``: the task that wrote the record (-1: read from Kafka); ``kind``: ``source`` | ``sink`` |
``repartition`` | ``changelog``; ``offset``: the position in the producer's sequence; ``headers`` null: none."""


def record_batch(rows: int, **columns: Any) -> pa.RecordBatch:
    """A ``RECORD_ARROW_SCHEMA`` batch of ``rows`` records: each column by its field's name, a list of ``rows`` values
    or one value for every row (None: all null). Raises KeyError naming a field not given."""
    arrays = []
    for field in RECORD_ARROW_SCHEMA:
        value = columns[field.name]
        if isinstance(value, list):
            arrays.append(pa.array(value, field.type))
        else:
            arrays.append(pa.nulls(rows, field.type) if value is None else pa.array([value] * rows, field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=RECORD_ARROW_SCHEMA)
