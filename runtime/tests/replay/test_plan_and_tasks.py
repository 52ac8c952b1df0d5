"""The replay without Spark: the plan's checks, the stage order, the canonical merge, and a task run through the
runtime's own StreamTask giving what the TopologyTestDriver gives."""

from __future__ import annotations

from typing import Any

import pytest
from conformance import dsl_functions as fn
from conformance.test_global_table import orders_with_users
from streamapp import StreamsBuilder
from streamapp.kafka.types import ConsumerRecord
from streamapp.replay import ReplayPlan
from streamapp.replay.stages import replay_stages
from streamapp.replay.tasks import ReplayTask, merge_by_head_timestamp, run_task
from streamapp.serdes import serde_for
from streamapp.testing import TopologyTestDriver

S, L = "string", "long"


def parity_sums() -> StreamsBuilder:
    builder = StreamsBuilder()
    (
        builder.stream("numbers", key_serde=S, value_serde=L, name="numbers")
        .group_by(fn.swap_key_parity, name="by-parity", key_serde=S)
        .reduce(fn.add, name="parity-sum", store="parity-sums")
        .to_stream(name="changes")
        .to("parity-sums", name="out")
    )
    return builder


def plan_of(builder: StreamsBuilder, **changes: Any) -> ReplayPlan:
    document: dict[str, Any] = {
        "replayId": "r-1",
        "bootstrapServers": "kafka:9092",
        "topology": builder.build().to_dict(),
        "config": {"application.id": "app-v2"},
        "from": {"numbers": {0: 0, 1: 0}},
        "to": {"numbers": {0: 10, 1: 12}},
        "partitions": {"parity-sums": 1},
    }
    document.update(changes)
    return ReplayPlan.from_document(document)


def test_a_plan_round_trips_through_its_document_and_passes_its_checks() -> None:
    plan = plan_of(parity_sums())

    assert ReplayPlan.from_document(plan.to_document()) == plan
    assert plan.check() is plan
    assert plan.emit == "every_update"
    assert ReplayPlan.from_document({**plan.to_document(), "emit": "final"}).check().emit == "final"
    assert plan.topic_partitions()["app-v2-by-parity-repartition"] == 2


def test_a_task_joins_the_global_table_bootstrapped_whole_before_its_first_record() -> None:
    plan = plan_of(
        orders_with_users("inner"),
        **{"from": {"orders": {0: 0}, "users": {0: 0}}, "to": {"orders": {0: 2}, "users": {0: 3}}},
        partitions={"enriched": 1},
    )
    assert plan.check() is plan
    key, value = serde_for(S, "users", is_key=True), serde_for("json", "users")
    users = [
        ConsumerRecord("users", 0, 0, key.serialize("alice"), value.serialize({"region": "north"}), 1),
        ConsumerRecord("users", 0, 1, key.serialize("bob"), value.serialize({"region": "west"}), 2),
        ConsumerRecord("users", 0, 2, key.serialize("alice"), value.serialize({"region": "south"}), 9_000),
    ]
    orders = [
        ConsumerRecord("orders", 0, i, key.serialize(f"o{i}"), value.serialize({"user": user}), 5_000 + i)
        for i, user in enumerate(["alice", "bob"])
    ]
    description = plan.description
    sub = next(s for s in description.subtopologies() if s.source_topics)

    out = run_task(
        description, sub, 0, {"orders": orders}, {"enriched": 1}, {"application.id": "app"}, global_records=users
    )

    joined = [(key.deserialize(r.key), value.deserialize(r.value)) for r in out.records if r.topic == "enriched"]
    # the global store holds the topic's last value per key before the first order: alice is in the south
    assert joined == [("o0", [{"user": "alice"}, {"region": "south"}]), ("o1", [{"user": "bob"}, {"region": "west"}])]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"to": {"numbers": {0: 10}}}, "same partitions"),
        ({"from": {"numbers": {0: 11, 1: 0}}}, "start <= end"),
        ({"partitions": {}}, "sink topic 'parity-sums'"),
        ({"replayId": "a/b"}, "replay_id"),
        ({"emit": "sometimes"}, "emit must be"),
    ],
)
def test_a_plan_with_bad_offsets_or_counts_is_refused(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        plan_of(parity_sums(), **changes).check()


def test_stages_run_after_the_stages_whose_repartition_topics_they_read() -> None:
    order = replay_stages(parity_sums().build(), "app")

    assert [(stage.id, stage.resumes) for stage in order] == [(0, False), (1, False)]
    assert [ref.name for ref in order[1].sources] == ["by-parity-repartition"]


def record(topic: str, offset: int, timestamp: int) -> ConsumerRecord:
    return ConsumerRecord(topic, 0, offset, None, None, timestamp)


def test_the_merge_takes_the_smallest_head_timestamp_and_keeps_each_writers_order() -> None:
    first = [record("a", 0, 5), record("a", 1, 1), record("a", 2, 9)]
    second = [record("b", 0, 3), record("b", 1, 5)]

    merged = merge_by_head_timestamp([first, second])

    assert [(r.topic, r.offset) for r in merged] == [("b", 0), ("a", 0), ("a", 1), ("b", 1), ("a", 2)]


def test_a_task_run_by_the_replay_writes_what_the_driver_writes() -> None:
    description = parity_sums().build()
    key, value = serde_for(S, "numbers", is_key=True), serde_for(L, "numbers")
    inputs = [ConsumerRecord("numbers", 0, i, key.serialize(f"k{i}"), value.serialize(i), 1_000 + i) for i in range(8)]
    subs = [stage.subtopology for stage in replay_stages(description, "app")]
    counts = {"app-by-parity-repartition": 1, "app-parity-sums-changelog": 1, "parity-sums": 1}

    upstream = run_task(description, subs[0], 0, {"numbers": inputs}, counts, {"application.id": "app"})
    repartitioned = [r for r in upstream.records if r.topic == "app-by-parity-repartition"]
    downstream = run_task(
        description, subs[1], 0, {"app-by-parity-repartition": repartitioned}, counts, {"application.id": "app"}
    )

    out_key, out_value = serde_for(S, "parity-sums", is_key=True), serde_for(L, "parity-sums")
    replayed = [
        (out_key.deserialize(r.key), out_value.deserialize(r.value), r.timestamp)
        for r in downstream.records
        if r.topic == "parity-sums"
    ]
    with TopologyTestDriver(description, {"application.id": "app"}) as driver:
        source = driver.create_input_topic("numbers")
        for i in range(8):
            source.pipe_input(f"k{i}", i, 1_000 + i)
        expected = [
            (r.key, r.value, r.timestamp_ms) for r in driver.create_output_topic("parity-sums").read_records_to_list()
        ]
    assert replayed == expected
    assert downstream.changelog_topics == {"app-parity-sums-changelog"}
    changelog = {
        out_key.deserialize(r.key): out_value.deserialize(r.value)
        for r in downstream.records
        if r.topic == "app-parity-sums-changelog"
    }
    assert changelog == {"even": 12, "odd": 16}


def test_a_task_restored_from_its_changelog_goes_on_from_its_state_and_logs_only_its_own_writes() -> None:
    """``ReplayTask(restored=...)``, how a foreign-key join's left sub-topology resumes: the runtime's restore puts
    the first run's changelog records into the stores, so the second run's sums go on from them, and its changelog
    holds the keys it wrote, to follow the first run's records."""
    description = parity_sums().build()
    sums = [stage.subtopology for stage in replay_stages(description, "app")][1]
    key, value = serde_for(S, "app-by-parity-repartition", is_key=True), serde_for(L, "app-by-parity-repartition")
    counts = {"app-parity-sums-changelog": 1, "parity-sums": 1}
    config = {"application.id": "app"}

    def repartitioned(parity: str, numbers: range) -> list[ConsumerRecord]:
        topic = "app-by-parity-repartition"
        return [ConsumerRecord(topic, 0, n, key.serialize(parity), value.serialize(n), 1_000 + n) for n in numbers]

    first_input = repartitioned("even", range(0, 6, 2)) + repartitioned("odd", range(1, 2))
    first = run_task(description, sums, 0, {"app-by-parity-repartition": first_input}, counts, config)
    restored = [r for r in first.records if r.topic == "app-parity-sums-changelog"]
    with ReplayTask(description, sums, 0, counts, config, restored=restored) as second:
        second.add("app-by-parity-repartition", repartitioned("even", range(6, 10, 2)))
        written = second.process() + second.finish()

    out_value = serde_for(L, "parity-sums")
    assert [out_value.deserialize(r.value) for r in written if r.topic == "parity-sums"] == [12, 20]  # 0 + 2 + 4 = 6
    changelog = [r for r in written if r.topic == "app-parity-sums-changelog"]
    assert [(key.deserialize(r.key), out_value.deserialize(r.value)) for r in changelog] == [("even", 20)]  # not odd
