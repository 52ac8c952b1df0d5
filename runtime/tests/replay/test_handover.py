"""Handover with warm state: a new version whose changelog topics the replay filled and whose consumer group
starts at the replay's end offsets restores the replay's stores and goes on with live records as if it had
processed everything itself (the streaming runtime as a real ``streamapp run`` process on the broker)."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
from conformance import dsl_functions as fn
from conformance.harness import BrokerEngine, _BrokerRun, final_values, rename_topics, wait_stable
from streamapp import StreamsBuilder, TopologyDescription
from streamapp.replay import ReplayPlan, run_replay
from streamapp.replay.output import markers_topic
from streamapp.serdes import serde_for

pytestmark = pytest.mark.integration

HISTORY, LIVE = 400, 200


def parity_sums() -> StreamsBuilder:
    builder = StreamsBuilder()
    (
        builder.stream("numbers", key_serde="string", value_serde="long", name="numbers")
        .group_by(fn.swap_key_parity, name="by-parity", key_serde="string")
        .reduce(fn.add, name="parity-sum", store="parity-sums")
        .to_stream(name="changes")
        .to("parity-sums", name="out")
    )
    return builder


def test_the_new_version_restores_the_replayed_state_and_continues_from_the_end_offsets(
    spark_session: Any, broker: BrokerEngine
) -> None:
    description = parity_sums().build()
    run = _BrokerRun(broker, description, {}, {"numbers": 2, "parity-sums": 1})
    try:
        run.create_topics()
        source = run.topic("numbers")
        key, value = serde_for("string", source, is_key=True), serde_for("long", source)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "partitioner": "murmur2_random"})

        def produce(numbers: range) -> None:
            for i in numbers:
                producer.produce(source, key=key.serialize(f"k{i}"), value=value.serialize(i), timestamp=1_000 + i)
            assert producer.flush(30) == 0

        produce(range(HISTORY))
        ends = {tp.partition: end for tp, end in run._end_offsets([source]).items()}
        plan = ReplayPlan(
            TopologyDescription.from_dict(rename_topics(description.to_dict(), run.topic)),
            run.config,
            broker.bootstrap,
            start_offsets={source: dict.fromkeys(ends, 0)},
            end_offsets={source: ends},
            partitions={run.topic("parity-sums"): 1},
            replay_id=run.prefix,
        )
        run.created.append(markers_topic(run.prefix))
        result = run_replay(spark_session, plan)
        wait_stable(broker.admin, [TopicPartition(w.topic, w.partition) for w in result.writes])
        # the handover: the new version's group starts where the replay ended
        offsets = [TopicPartition(source, p, end) for p, end in ends.items()]
        broker.admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(run.app_id, offsets)])[
            run.app_id
        ].result()
        produce(range(HISTORY, HISTORY + LIVE))

        run.start()
        run.wait_ready()
        run.wait_processed()
        assert run.stop() == 0, run.log_tail()
        sums = run.read("parity-sums")
        changelog = run.read("{application_id}-parity-sums-changelog")
    finally:
        run.cleanup()

    # sums over history and live records: the new version started from the replayed state (from empty stores it
    # would end at the sums of the live records alone)
    every = range(HISTORY + LIVE)
    expected = {"even": sum(i for i in every if i % 2 == 0), "odd": sum(i for i in every if i % 2)}
    assert final_values(sums) == expected
    assert final_values(changelog) == expected
    live = [value for _, value, ts in sums if ts >= 1_000 + HISTORY]
    assert len(live) == LIVE, "the new version processed the live records only, each once"
    assert len(sums) == HISTORY + LIVE, "the replay wrote one update per historical record"
