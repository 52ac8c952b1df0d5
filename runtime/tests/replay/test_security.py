"""A replay reads and writes (both librdkafka, in Spark's Python workers) through an authenticated listener with
one set of librdkafka settings: the plan's, with the secret from ``STREAMAPP_KAFKA_*`` variables
(``streamapp.replay.security``)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from conformance.harness import wait_stable
from streamapp.replay import ReplayPlan, run_replay

from replay.reading import read_committed
from replay.test_native_count import INPUT_PARTITIONS, inputs, keyed_count

STACK_ENV = Path(__file__).resolve().parents[3] / ".cache" / "run" / "env"


@pytest.mark.integration
def test_a_replay_over_the_sasl_listener_counts_every_record_with_the_password_from_the_environment(
    spark_session: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = (line.removeprefix("export ").split("=", 1) for line in STACK_ENV.read_text().splitlines())
    env = {name: value.strip("'\"") for name, value in (pair for pair in lines if len(pair) == 2)}
    bootstrap, username = env["KAFKA_SASL_BOOTSTRAP"], env["KAFKA_SASL_USERNAME"]
    plan_settings = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": username,
    }
    monkeypatch.setenv("STREAMAPP_KAFKA_SASL_PASSWORD", env["KAFKA_SASL_PASSWORD"])
    client = {"bootstrap.servers": bootstrap, **plan_settings, "sasl.password": env["KAFKA_SASL_PASSWORD"]}
    prefix = f"sasl-{uuid.uuid4().hex[:8]}"
    source, sink = f"{prefix}-events", f"{prefix}-counts"
    admin = AdminClient(client)
    for future in admin.create_topics([NewTopic(source, INPUT_PARTITIONS, 1), NewTopic(sink, 1, 1)]).values():
        future.result(30)
    records = list(inputs())
    producer = Producer(client)
    for partition, key, value, timestamp in records:
        producer.produce(source, value, key, partition, timestamp=timestamp)
    assert producer.flush(30) == 0
    ends = {p: sum(1 for r in records if r[0] == p) for p in range(INPUT_PARTITIONS)}
    plan = ReplayPlan(
        keyed_count(source, sink),
        {"application.id": prefix},
        bootstrap,
        start_offsets={source: dict.fromkeys(ends, 0)},
        end_offsets={source: ends},
        partitions={sink: 1},
        replay_id=prefix,
        kafka_settings=plan_settings,
    )
    changelog = f"{prefix}-event-counts-changelog"
    try:
        result = run_replay(spark_session, plan)
        wait_stable(admin, [TopicPartition(w.topic, w.partition) for w in result.writes])
        written = read_committed(bootstrap, sink, 1, settings=client)
        finals = read_committed(bootstrap, changelog, INPUT_PARTITIONS, settings=client)
    finally:
        admin.delete_topics([source, sink, changelog, f"streamapp-replay-{prefix}-markers"])
    expected: dict[tuple[int, bytes | None], int] = {}
    for partition, key, value, _ in records:
        if key is not None and value not in (None, b"null"):
            expected[(partition, key)] = expected.get((partition, key), 0) + 1
    assert len(written) == sum(expected.values())
    assert {(p, k): int.from_bytes(v or b"", "big") for p, k, v, _ in finals} == expected
