"""Two StreamApps never share an application.id (issue 9, item 2; docs/adr/0007-application-id-identity.md).

On the real stack: app ``<name>`` runs in namespace A; the same name in namespace B (the same default id)
and another app in B with A's id as its explicit ``applicationId`` are both refused by name
(``ApplicationIdInUse``), get no pods, and so consume nothing: every record reaches A's output exactly
once. A consumer group that already has a member that is not one of the app's pods is reported
(``ConsumerGroupInUse``) and not joined until it is free.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer

from e2e import cluster

pytestmark = pytest.mark.e2e
RECORDS = 500


@pytest.fixture
def namespaces(operator_installed: None) -> Iterator[tuple[str, str]]:
    first, second = cluster.create_namespace("identity-a"), cluster.create_namespace("identity-b")
    yield first, second
    cluster.delete_namespace(second)
    cluster.delete_namespace(first)


def test_a_shared_application_id_is_refused_by_name_and_consumes_nothing(namespaces: tuple[str, str]) -> None:
    first, second = namespaces
    name = f"ident-{uuid.uuid4().hex[:6]}"
    source, sink = f"{name}-in", f"{name}-out"
    cluster.create_topics({source: 2, sink: 1})
    try:
        cluster.apply(cluster.passthrough_app(name, source, sink), first)
        cluster.wait_condition(name, first, "Ready", "True", timeout_s=180)

        cluster.apply(cluster.passthrough_app(name, source, sink), second)
        same_name = cluster.wait_condition(name, second, "Degraded", "True", "ApplicationIdInUse")
        assert same_name["message"].startswith(f"application.id '{name}' is already used by StreamApp {first}/{name}")
        cluster.apply(cluster.passthrough_app("thief", source, sink, applicationId=name), second)
        explicit = cluster.wait_condition("thief", second, "Degraded", "True", "ApplicationIdInUse")
        assert f"StreamApp {first}/{name}" in explicit["message"]
        for app in (name, "thief"):
            assert cluster.kubectl("get", "statefulset", app, "-n", second, "--ignore-not-found") == ""
        assert cluster.condition(name, first, "Degraded")["status"] == "False", "the first app was disturbed"

        producer = Producer({"bootstrap.servers": cluster.stack_env()["KAFKA_BOOTSTRAP"]})
        for i in range(RECORDS):
            producer.produce(source, json.dumps({"n": i}).encode(), f"k{i}".encode())
        assert producer.flush(30) == 0
        assert cluster.count_records(sink, RECORDS) == RECORDS
        cluster.wait_until(lambda: cluster.group_lag(cluster.stack_env()["KAFKA_BOOTSTRAP"], name, [source]) == 0,
                           60, f"group {name} to consume everything")  # fmt: skip
    finally:
        cluster.delete_topics(name)


def test_a_consumer_group_used_by_someone_else_is_reported_not_joined(namespaces: tuple[str, str]) -> None:
    first, _ = namespaces
    name = f"taken-{uuid.uuid4().hex[:6]}"
    source, sink = f"{name}-in", f"{name}-out"
    cluster.create_topics({source: 1, sink: 1})
    stranger = Consumer({"bootstrap.servers": cluster.stack_env()["KAFKA_BOOTSTRAP"], "group.id": name,
                         "client.id": "someone-else"})  # fmt: skip
    closed = False
    try:
        stranger.subscribe([source])
        deadline = time.monotonic() + 30
        while not stranger.assignment() and time.monotonic() < deadline:
            stranger.poll(0.5)
        assert stranger.assignment(), "the stranger never joined"
        cluster.apply(cluster.passthrough_app(name, source, sink), first)
        degraded = cluster.wait_condition(name, first, "Degraded", "True", "ConsumerGroupInUse")
        assert (
            f"consumer group '{name}' has members that are not this StreamApp's pods (someone-else)"
            in (degraded["message"])
        )
        assert cluster.kubectl("get", "statefulset", name, "-n", first, "--ignore-not-found") == ""
        stranger.close()  # the group is free: the app joins at the next reconcile
        closed = True
        cluster.wait_condition(name, first, "Ready", "True", timeout_s=180)
    finally:
        if not closed:
            stranger.close()
        cluster.delete_topics(name)
