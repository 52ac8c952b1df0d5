"""clicks (key: user, value: JSON {"page", "agent", "ts"}) -> no bots -> normalised page ->
v1: views per user and minute; v2: views per page and minute."""

from streamapp import StreamsBuilder
from streamapp.dsl.windows import TimeWindows

from clickstream import logic

MINUTE_MS = 60_000


def _human_views(builder: StreamsBuilder):
    return (
        builder.stream(
            "clicks",
            key_serde="string",
            value_serde="json",
            name="clicks",
            timestamp_extractor={"type": "field", "field": "ts"},
        )
        .filter(logic.is_human, name="humans")
        .map_values(logic.normalise, name="normalise")
    )


def build() -> StreamsBuilder:
    builder = StreamsBuilder()
    (
        _human_views(builder)
        .group_by_key(name="per-user")
        .windowed_by(TimeWindows.of_size_and_grace(MINUTE_MS, 10_000))
        .count(store="views-per-user", name="count")
        .to_stream(name="changes")
        .to("clicks-per-user-minute", value_serde="long", name="out")
    )
    return builder


def build_v2() -> StreamsBuilder:
    builder = StreamsBuilder()
    (
        _human_views(builder)
        .group_by(logic.page, name="per-page", key_serde="string")
        .windowed_by(TimeWindows.of_size_and_grace(MINUTE_MS, 10_000))
        .count(store="views-per-page", name="count")
        .to_stream(name="changes")
        .to("clicks-per-page-minute", value_serde="long", name="out")
    )
    return builder
