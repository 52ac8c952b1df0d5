"""The ``joins`` family's processors: stream-table, stream-global and table-table joins (``joins.tables``),
and the windowed stream-stream join (``joins.stream_stream``)."""

from __future__ import annotations

from streamapp.processors.base import FamilyBuilders
from streamapp.processors.joins import stream_stream, tables

__all__ = ["BUILDERS"]

BUILDERS = FamilyBuilders("joins", tables.BUILDERS, stream_stream.BUILDERS)
