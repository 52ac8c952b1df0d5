"""The interactive-queries example: game scores per player, in total and per minute, queryable while it runs.

scores (key: player, value: JSON ``{"points": n}``) -> sum of points per player in store ``points`` (a
``key_value`` store: ``KeyQuery`` / ``RangeQuery``) and per one-minute window in store ``points-per-minute`` (a
``window`` store: ``WindowKeyQuery`` / ``WindowRangeQuery``). docs/interactive-queries.md shows the queries.
"""

from __future__ import annotations

from typing import Any

from streamapp import StreamsBuilder
from streamapp.dsl.windows import TimeWindows

INPUT_TOPIC = "scores"
TOTALS = "points"
PER_MINUTE = "points-per-minute"
MINUTE_MS = 60_000


def points(value: dict[str, Any]) -> int:
    return int(value["points"])


def add(total: int, value: int) -> int:
    return total + value


def build() -> StreamsBuilder:
    """The StreamsBuilder of the scores topology (module docstring)."""
    builder = StreamsBuilder()
    played = (
        builder.stream(INPUT_TOPIC, key_serde="string", value_serde="json", name="scores")
        .map_values(points, name="points-of")
        .group_by_key(value_serde="long")
    )
    played.reduce(add, store=TOTALS, name="total")
    played.windowed_by(TimeWindows.of_size_and_grace(MINUTE_MS, MINUTE_MS)).reduce(
        add, store=PER_MINUTE, name="per-minute"
    )
    return builder
