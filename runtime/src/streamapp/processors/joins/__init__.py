"""The ``joins`` family's processors: stream-table, stream-global and table-table joins (``joins.tables``),
the windowed stream-stream join (``joins.stream_stream``) and the foreign-key table-table join
(``joins.foreign_key``)."""

from __future__ import annotations

from streamapp.processors.base import FamilyBuilders
from streamapp.processors.joins import foreign_key, stream_stream, tables

__all__ = ["BUILDERS"]

BUILDERS = FamilyBuilders("joins", tables.BUILDERS, stream_stream.BUILDERS, foreign_key.BUILDERS)
