"""clicks (key: user, value: JSON {"page", "agent", "ts"}) -> no bots -> normalised page ->
v1: views per user and minute; v2: the same, and views per page and minute."""

from streamapp import KStream, StreamsBuilder
from streamapp.dsl.windows import TimeWindows

from clickstream import logic

MINUTE_MS = 60_000


def _human_views(builder: StreamsBuilder) -> KStream:
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


def _per_user(views: KStream) -> None:
    (
        views.group_by_key(name="per-user")
        .windowed_by(TimeWindows.of_size_and_grace(MINUTE_MS, 10_000))
        .count(store="views-per-user", name="count")
        .to_stream(name="changes")
        .to("clicks-per-user-minute", value_serde="long", name="out")
    )


def build() -> StreamsBuilder:
    builder = StreamsBuilder()
    _per_user(_human_views(builder))
    return builder


def build_v2() -> StreamsBuilder:
    builder = StreamsBuilder()
    views = _human_views(builder)
    _per_user(views)
    (
        views.group_by(logic.page, name="per-page", key_serde="string")
        .windowed_by(TimeWindows.of_size_and_grace(MINUTE_MS, 10_000))
        .count(store="views-per-page", name="page-count")
        .to_stream(name="page-changes")
        .to("clicks-per-page-minute", value_serde="long", name="page-out")
    )
    return builder
