"""The application reset plan: refuses a live group, resets only input partitions, deletes only the application's
internal topics, and resolves the target offsets as Kafka's StreamsResetter does."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from streamapp.kafka.reset_plan import (
    ActiveMembersError,
    ResetError,
    ToDatetime,
    ToEarliest,
    ToOffsets,
    is_internal_topic,
    offsets_to_commit,
    parse_datetime,
    parse_offsets,
    plan_reset,
)
from streamapp.kafka.types import TopicPartition as TP

CLUSTER = {
    "events": 2,
    "clicks": 1,
    "shop-counts-changelog": 2,
    "shop-by-color-repartition": 2,
    "shop-notes": 1,  # the application's prefix without an internal suffix
    "shopping-counts-changelog": 2,  # another application whose id starts like ours
    "other-counts-changelog": 1,
    "counts-changelog": 1,
    "__consumer_offsets": 50,
}


def test_a_group_with_members_is_refused_naming_them() -> None:
    with pytest.raises(ActiveMembersError, match="shop-a-StreamThread-1-consumer") as raised:
        plan_reset("shop", ["events"], ToEarliest(), topics=CLUSTER, members=["shop-a-StreamThread-1-consumer"])
    assert raised.value.members == ("shop-a-StreamThread-1-consumer",)


def test_the_plan_resets_every_input_partition_and_deletes_only_the_application_internal_topics() -> None:
    plan = plan_reset("shop", ["events", "clicks"], ToEarliest(), topics=CLUSTER)
    assert plan.partitions == (TP("events", 0), TP("events", 1), TP("clicks", 0))
    assert plan.internal_topics == ("shop-by-color-repartition", "shop-counts-changelog")
    assert plan.state_dir is None


def test_an_input_topic_is_never_deleted_even_when_its_name_looks_internal() -> None:
    plan = plan_reset("shop", ["shop-counts-changelog"], ToEarliest(), topics=CLUSTER)
    assert plan.internal_topics == ("shop-by-color-repartition",)


def test_the_state_directory_is_the_application_directory_under_state_dir(tmp_path: Path) -> None:
    plan = plan_reset("shop", ["events"], ToEarliest(), topics=CLUSTER, state_dir=tmp_path)
    assert plan.state_dir == tmp_path / "shop"
    assert f"delete local state directory {tmp_path / 'shop'}" in plan.describe()


@pytest.mark.parametrize(
    ("inputs", "message"),
    [([], "no input topics"), (["events", "missing"], "missing do not exist")],
)
def test_bad_input_topics_are_refused(inputs: list[str], message: str) -> None:
    with pytest.raises(ResetError, match=message):
        plan_reset("shop", inputs, ToEarliest(), topics=CLUSTER)


def test_offsets_of_a_partition_the_inputs_lack_are_refused() -> None:
    with pytest.raises(ResetError, match="events:7"):
        plan_reset("shop", ["events"], ToOffsets({TP("events", 7): 1}), topics=CLUSTER)


@pytest.mark.parametrize(
    ("topic", "internal"),
    [
        ("shop-x-changelog", True),
        ("shop-x-repartition", True),
        ("shop-changelog", True),
        ("shop-", False),
        ("shop-notes", False),
        ("shopx-changelog", False),
        ("other-x-changelog", False),
    ],
)
def test_internal_topics_are_the_application_prefix_with_an_internal_suffix(topic: str, internal: bool) -> None:
    assert is_internal_topic("shop", topic) is internal


WATERMARKS = {"earliest": {TP("events", 0): 2, TP("events", 1): 0}, "end": {TP("events", 0): 10, TP("events", 1): 4}}


def test_to_earliest_commits_each_partition_low_watermark() -> None:
    plan = plan_reset("shop", ["events"], ToEarliest(), topics=CLUSTER)
    assert offsets_to_commit(plan, **WATERMARKS) == {TP("events", 0): 2, TP("events", 1): 0}


def test_to_datetime_commits_the_offset_found_or_the_end_when_no_record_is_that_late() -> None:
    plan = plan_reset("shop", ["events"], parse_datetime("2026-11-24T20:00:00Z"), topics=CLUSTER)
    by_time = {TP("events", 0): 7, TP("events", 1): -1}
    assert offsets_to_commit(plan, **WATERMARKS, by_time=by_time) == {TP("events", 0): 7, TP("events", 1): 4}


def test_explicit_offsets_are_moved_into_the_partition_range_and_others_go_to_earliest() -> None:
    plan = plan_reset("shop", ["events"], ToOffsets({TP("events", 0): 0}), topics=CLUSTER)
    assert offsets_to_commit(plan, **WATERMARKS) == {TP("events", 0): 2, TP("events", 1): 0}
    plan = plan_reset("shop", ["events"], ToOffsets({TP("events", 1): 99}), topics=CLUSTER)
    assert offsets_to_commit(plan, **WATERMARKS) == {TP("events", 0): 2, TP("events", 1): 4}


def test_rfc3339_times_parse_with_their_zone_and_a_time_without_zone_is_refused() -> None:
    assert parse_datetime("2026-11-24T21:00:00+01:00").timestamp_ms == int(
        datetime(2026, 11, 24, 20, tzinfo=UTC).timestamp() * 1000
    )
    assert parse_datetime("2026-11-24T20:00:00.250Z").timestamp_ms % 1000 == 250
    with pytest.raises(ResetError, match="no time zone"):
        parse_datetime("2026-11-24T20:00:00")
    with pytest.raises(ResetError, match="not an RFC 3339 time"):
        parse_datetime("yesterday")
    assert isinstance(parse_datetime("2026-11-24T20:00:00Z"), ToDatetime)


def test_offsets_parse_topic_partition_offset_lists_and_name_a_bad_item() -> None:
    assert parse_offsets("events:0=5, events:1=0").offsets == {TP("events", 0): 5, TP("events", 1): 0}
    for bad in ("events=5", "events:x=5", "events:0=-1", ":0=1", "events:0=1,events:0=2", ""):
        with pytest.raises(ResetError):
            parse_offsets(bad)


def test_dry_run_text_names_the_group_partitions_target_and_topics() -> None:
    text = plan_reset("shop", ["events"], ToOffsets({TP("events", 1): 3}), topics=CLUSTER).describe()
    assert "consumer group 'shop'" in text
    assert "2 partition(s) of events to offsets events:1=3" in text
    assert "    shop-counts-changelog\n" in text
