"""Internal topics get Kafka Streams' partition counts and configs; tasks follow source partitions."""

from __future__ import annotations

import pytest
from streamapp.topology import InternalTopic, TopologyDescription, TopologyError
from topology_samples import flights_doc, two_stage_doc


def test_flights_internal_topics_take_the_source_partition_count() -> None:
    desc = TopologyDescription.from_dict(flights_doc())

    assert desc.internal_topics("fpc", {"flights": 4}) == [
        InternalTopic(
            name="fpc-per-carrier-repartition", partitions=4, config={"cleanup.policy": "delete", "retention.ms": "-1"}
        ),
        InternalTopic(
            name="fpc-departures-per-carrier-store-changelog", partitions=4, config={"cleanup.policy": "compact"}
        ),
    ]


def test_one_task_per_source_partition_in_every_sub_topology() -> None:
    desc = TopologyDescription.from_dict(flights_doc())

    assert desc.task_ids("fpc", {"flights": 3}) == ["0_0", "0_1", "0_2", "1_0", "1_1", "1_2"]
    assert desc.task_counts({"flights": 3}) == {0: 3, 1: 3}


def test_explicit_repartition_partitions_set_the_downstream_task_and_changelog_count() -> None:
    doc = flights_doc()
    doc["nodes"][3]["partitions"] = 8
    desc = TopologyDescription.from_dict(doc)

    topics = {topic.name: topic.partitions for topic in desc.internal_topics("fpc", {"flights": 2})}

    assert topics == {"fpc-per-carrier-repartition": 8, "fpc-departures-per-carrier-store-changelog": 8}
    assert desc.task_counts({"flights": 2}) == {0: 2, 1: 8}


def test_repartition_count_propagates_through_chained_repartitions() -> None:
    doc = two_stage_doc()
    doc["nodes"][2:2] = [
        {"name": "first", "type": "repartition", "input": "rekey", "partitions": 6},
        {"name": "rekey-again", "type": "select_key", "input": "first", "mapper": "flights_app.logic:carrier"},
    ]
    doc["nodes"][4]["input"] = "rekey-again"
    desc = TopologyDescription.from_dict(doc)

    topics = {topic.name: topic.partitions for topic in desc.internal_topics("app", {"a": 2})}

    assert topics == {"app-first-repartition": 6, "app-rekeyed-repartition": 6, "app-totals-store-changelog": 6}
    assert desc.task_ids("app", {"a": 2}) == [
        "0_0",
        "0_1",
        *(f"1_{p}" for p in range(6)),
        *(f"2_{p}" for p in range(6)),
    ]


def test_co_partitioned_source_topics_share_one_task_per_partition() -> None:
    desc = TopologyDescription.from_dict(two_stage_doc(["a", "b"]))

    assert desc.task_counts({"a": 5, "b": 5}) == {0: 5, 1: 5}
    assert desc.internal_topics("app", {"a": 5, "b": 5})[0].partitions == 5


def test_co_partitioning_violation_is_an_error_naming_the_topics_and_counts() -> None:
    desc = TopologyDescription.from_dict(two_stage_doc(["a", "b"]))

    with pytest.raises(TopologyError) as raised:
        desc.internal_topics("app", {"a": 4, "b": 8})

    assert str(raised.value) == (
        "sub-topology 0: source topics are not co-partitioned: 'a' (4), 'b' (8); "
        "every source topic of a sub-topology needs the same partition count"
    )
    with pytest.raises(TopologyError, match="not co-partitioned"):
        desc.task_ids("app", {"a": 4, "b": 8})


def test_missing_source_partition_count_is_an_error_naming_the_topic() -> None:
    desc = TopologyDescription.from_dict(flights_doc())

    with pytest.raises(TopologyError, match="topic 'flights': partition count unknown"):
        desc.internal_topics("fpc", {"other": 4})
    with pytest.raises(TopologyError, match="topic 'flights': partition count must be at least 1"):
        desc.task_ids("fpc", {"flights": 0})


def test_stateless_topology_needs_no_internal_topics() -> None:
    desc = TopologyDescription.from_dict(
        {
            "nodes": [
                {"name": "in", "type": "source", "topics": ["a"]},
                {"name": "out", "type": "sink", "input": "in", "topic": "b"},
            ]
        }
    )

    assert desc.internal_topics("app", {"a": 3}) == []
    assert desc.task_ids("app", {"a": 3}) == ["0_0", "0_1", "0_2"]
