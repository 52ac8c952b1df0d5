"""The catch-up example: page views per country and hour.

page-views (key: user, value: JSON with ``country`` and ``ts``, the event time in epoch ms) -> re-key by country
(repartition ``per-country``) -> hourly tumbling windows with ``GRACE_MS`` of grace -> count in ``views-per-hour``
-> ``views-per-country-hour`` (key: the windowed country, value: long count).

The upstream tasks (one per page-views partition) write the repartition topic; a downstream task's stream time is
the largest event time any of them wrote there, so a record more than the grace behind it lands in a closed window
and is dropped as late. docs/execution.md, "Catch-up after a repartition", says why a catch-up keeps them close
and what grace to choose.
"""

from __future__ import annotations

from streamapp import StreamsBuilder
from streamapp.dsl.windows import TimeWindows

from catch_up_app import logic

INPUT_TOPIC = "page-views"
OUTPUT_TOPIC = "views-per-country-hour"
STORE = "views-per-hour"
HOUR_MS = 3_600_000
GRACE_MS = HOUR_MS


def build(grace_ms: int = GRACE_MS) -> StreamsBuilder:
    """The StreamsBuilder of the views-per-country-hour topology."""
    builder = StreamsBuilder()
    (
        builder.stream(
            INPUT_TOPIC,
            key_serde="string",
            value_serde="json",
            name="page-views",
            timestamp_extractor={"type": "field", "field": "ts"},
        )
        .group_by(logic.country, name="per-country", key_serde="string")
        .windowed_by(TimeWindows.of_size_and_grace(HOUR_MS, grace_ms))
        .count(store=STORE, name="count")
        .to_stream(name="changes")
        .to(OUTPUT_TOPIC, value_serde="long", name="out")
    )
    return builder
