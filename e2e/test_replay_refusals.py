"""StreamReplays that would write the same history twice, or take what another object made, are refused by name
before any Job (issue 19: audit D-H1, D-M3, D-M7, R12, R19, R32), on the real stack: the operator's kopf
indexes of StreamApps and unfinished StreamReplays, the broker's committed offsets.

One namespace for the module: StreamApp ``live`` (a pass-through of ``<prefix>-in``, one partition, which has
processed and committed RECORDS records), StreamApp ``idle`` (the same topology, 0 replicas: no pod) and the
StreamReplay ``first``, a backfill of ``idle`` into ``<prefix>-first-out`` that stays in flight without a Job: a
ConfigMap ``first-replay`` someone else made is in its way (``Degraded: ForeignObject``, phase ``Pending``), as
an unfinished replay of the cluster's is while it waits. Guarantees, each with its exact condition message:

- a second unfinished replay of the same app, or one into a topic an unfinished replay writes, is ``Failed:
  ReplayInProgress`` naming the older one (both would succeed with every record twice);
- a StreamApp created with an in-flight replay's ``application.id`` is ``Degraded: ApplicationIdInUse`` naming the
  StreamReplay, and gets no StatefulSet;
- a backfill over input offsets ``live`` has committed, into ``live``'s own output topic, is ``Failed:
  RangeOverlapsApp`` (its output would be written twice) unless ``spec.allowOverlap``;
- a StreamReplay re-created under the name of an earlier one never adopts the StreamApp the earlier one made as
  its new version (``streamapp.io/replay`` label of the name, ``streamapp.io/replay-uid`` annotation of the
  earlier uid, as the operator makes them): ``Failed: NewVersionNameInUse``; that StreamApp and the app it would
  replace are untouched.

No scenario creates a Job (each is refused before one); the module takes one StreamApp pod.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import Producer

from e2e import cluster, replay

pytestmark = pytest.mark.e2e

RECORDS = 5


@dataclass(frozen=True)
class World:
    namespace: str
    prefix: str
    first_application_id: str

    def topic(self, name: str) -> str:
        return f"{self.prefix}-{name}"


def _passthrough(source: str, sink: str) -> dict[str, Any]:
    return cluster.passthrough_app("unused", source, sink)["spec"]["topology"]


def _replay(name: str, app: str, prefix: str, sink: str, **spec: Any) -> dict[str, Any]:
    """A StreamReplay of ``app`` copying ``<prefix>-in`` to ``<prefix>-<sink>`` (``mode`` backfill unless given)."""
    mode = spec.pop("mode", "backfill")
    return replay.streamreplay(name, app, mode, _passthrough(f"{prefix}-in", f"{prefix}-{sink}"), **spec)


def _app_status(name: str, namespace: str) -> str:
    return str(cluster.get_json("streamapp", name, namespace).get("status"))


@pytest.fixture(scope="module")
def world(operator_installed: None) -> Iterator[World]:
    namespace = cluster.create_namespace("replay-refused")
    prefix = f"refused-{uuid.uuid4().hex[:6]}"
    try:
        cluster.create_topics({f"{prefix}-in": 1, f"{prefix}-out": 1, f"{prefix}-idle-out": 1})
        producer = Producer({"bootstrap.servers": cluster.stack_env()["KAFKA_BOOTSTRAP"]})
        for n in range(RECORDS):
            producer.produce(f"{prefix}-in", key=str(n), value=json.dumps({"n": n}))
        assert producer.flush(30) == 0
        live = cluster.passthrough_app("live", f"{prefix}-in", f"{prefix}-out", applicationId=f"{prefix}-live",
                                       config={"commit.interval.ms": "200"})  # fmt: skip
        idle = cluster.passthrough_app("idle", f"{prefix}-in", f"{prefix}-idle-out", applicationId=f"{prefix}-idle",
                                       replicas=0)  # fmt: skip
        cluster.apply(live, namespace)
        cluster.apply(idle, namespace)
        in_the_way = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "first-replay"}, "data": {}}
        cluster.apply(in_the_way, namespace)
        cluster.apply(_replay("first", "idle", prefix, "first-out"), namespace)
        cluster.wait_until(lambda: _condition("first", namespace, "Degraded").get("reason") == "ForeignObject", 60,
                           "StreamReplay first to wait on the ConfigMap in its way",
                           describe=lambda: str(replay.replay_status("first", namespace)))  # fmt: skip
        status = replay.replay_status("first", namespace)
        assert (status["phase"], status["applicationId"]) == ("Pending", f"{prefix}-idle-first"), status
        cluster.wait_until(lambda: cluster.streamapp_settled("live", 1, namespace), 120, "live to commit its input",
                           describe=lambda: _app_status("live", namespace))  # fmt: skip
        yield World(namespace, prefix, status["applicationId"])
    finally:
        cluster.kubectl("delete", "streamreplays", "--all", "-n", namespace, "--wait=true", check=False)
        cluster.delete_namespace(namespace)
        cluster.delete_topics(prefix)


def _condition(name: str, namespace: str, kind: str) -> dict[str, Any]:
    return next((c for c in replay.replay_status(name, namespace).get("conditions") or [] if c["type"] == kind), {})


def _refused(name: str, namespace: str) -> dict[str, Any]:
    """The ``Failed`` condition of StreamReplay ``name`` once it failed (within 60 s); no Job was made for it."""
    status = lambda: replay.replay_status(name, namespace)  # noqa: E731
    cluster.wait_until(lambda: status().get("phase") == "Failed", 60, f"StreamReplay {name} to fail",
                       describe=lambda: str(status()))  # fmt: skip
    assert not replay.replay_status(name, namespace).get("job")
    assert cluster.kubectl("get", "job", f"{name}-replay", "-n", namespace, "--ignore-not-found") == ""
    return _condition(name, namespace, "Failed")


@pytest.mark.parametrize(
    ("name", "app", "sink", "why"),
    [
        ("again", "idle", "again-out", "replays StreamApp {ns}/idle already"),  # the same app
        ("same-out", "live", "first-out", "writes {prefix}-first-out already"),  # another app, the same topic
    ],
)
def test_a_second_replay_of_an_app_or_into_a_topic_is_refused_naming_the_one_in_flight(
    world: World, name: str, app: str, sink: str, why: str
) -> None:
    ns = world.namespace
    cluster.apply(_replay(name, app, world.prefix, sink), ns)

    failed = _refused(name, ns)

    assert failed["reason"] == "ReplayInProgress"
    assert failed["message"] == (
        f"StreamReplay {ns}/first (Pending) {why.format(ns=ns, prefix=world.prefix)}: one replay of an app, and one "
        "writer of an output topic, at a time; delete it or wait until it has finished"
    )
    assert replay.replay_status("first", ns)["phase"] == "Pending"


def test_a_streamapp_taking_an_in_flight_replays_application_id_is_refused_naming_it(world: World) -> None:
    ns = world.namespace
    thief = cluster.passthrough_app("thief", world.topic("in"), world.topic("thief-out"),
                                    applicationId=world.first_application_id)  # fmt: skip
    cluster.apply(thief, ns)

    degraded = cluster.wait_condition("thief", ns, "Degraded", "True", "ApplicationIdInUse", timeout_s=60)

    assert degraded["message"] == (
        f"application.id {world.first_application_id!r} is already used by StreamReplay {ns}/first (a replay in "
        "flight: it runs under that id until it finishes); set a unique spec.applicationId (the default is "
        "metadata.name, unique only within a namespace)"
    )
    assert cluster.kubectl("get", "statefulset", "thief", "-n", ns, "--ignore-not-found") == ""


def test_a_backfill_over_offsets_the_app_committed_into_its_output_needs_allow_overlap(world: World) -> None:
    ns, group, out = world.namespace, f"{world.prefix}-live", world.topic("out")
    cluster.apply(replay.streamreplay("overlap", "live", "backfill"), ns)  # the app's own topology: its output

    failed = _refused("overlap", ns)

    assert failed["reason"] == "RangeOverlapsApp"
    assert failed["message"] == (
        f"the range overlaps {RECORDS} records StreamApp live already processed (consumer group {group!r} committed "
        f"past them: {world.topic('in')}[0] 0-{RECORDS} ({RECORDS} records)), and the backfill writes {out}, which "
        "the app writes too: their output would be written there a second time; set spec.allowOverlap: true to "
        "write it anyway, or start the range at the app's committed offsets"
    )
    assert cluster.topics(f"{world.prefix}-live-overlap") == set(), "internal topics of a refused backfill"


def test_a_reused_replay_name_never_adopts_the_new_version_an_earlier_replay_made(world: World) -> None:
    ns = world.namespace
    earlier = replay.streamreplay("upgrade", "no-such-app", "backfill")  # any earlier StreamReplay of that name
    cluster.apply(earlier, ns)
    earlier_uid = cluster.get_json("streamreplay", "upgrade", ns)["metadata"]["uid"]
    cluster.kubectl("delete", "streamreplay", "upgrade", "-n", ns, "--wait=true", "--timeout=60s")
    made_earlier = cluster.passthrough_app("live-v2", world.topic("in"), world.topic("v2-out"),
                                           applicationId=f"{world.prefix}-v2", replicas=0)  # fmt: skip
    made_earlier["metadata"]["labels"] = {"streamapp.io/replay": "upgrade"}  # as the operator labels a new version
    made_earlier["metadata"]["annotations"] = {"streamapp.io/replay-uid": earlier_uid}
    cluster.apply(made_earlier, ns)
    before = {name: cluster.get_json("streamapp", name, ns)["metadata"] for name in ("live-v2", "live")}

    again = _replay("upgrade", "live", world.prefix, "upgrade-out", mode="handover", handover={"name": "live-v2"})
    cluster.apply(again, ns)
    uid = cluster.get_json("streamreplay", "upgrade", ns)["metadata"]["uid"]
    failed = _refused("upgrade", ns)

    assert failed["reason"] == "NewVersionNameInUse"
    assert failed["message"] == (
        f"StreamApp live-v2 exists and it was made by an earlier StreamReplay named upgrade (uid {earlier_uid}), not "
        f"by this one (uid {uid}); a reused replay name never adopts, rewinds or deletes it; it is left untouched: "
        "set handover.name to an unused name"
    )
    for name, metadata in before.items():  # neither adopted, scaled nor deleted
        now = cluster.get_json("streamapp", name, ns)
        assert (now["metadata"]["uid"], now["metadata"]["generation"]) == (metadata["uid"], metadata["generation"])
    assert cluster.get_json("streamapp", "live", ns)["spec"]["replicas"] == 1
