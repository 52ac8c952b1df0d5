"""StreamReplay on the real stack: Kafka, the API server, the node agent running the replay Job's pod (local
Spark, Java, in the replay image) and the app's pods, the operator installed by its chart.

Guarantees protected:
- ``mode: backfill`` writes exactly pandas' counts of the replayed range (flights per carrier and origin) to the
  replay topology's output, and leaves the running app alone (on two executor pods: ``spark.mode: kubernetes``;
  the handover and the failed job run Spark in the Job's pod, ``local``);
- ``mode: handover``: the old version keeps processing until the switch (its own output, read while it still
  runs, is pandas' counts over every flight produced, those after the replay's end offsets included); the new
  version (a new ``application.id``) starts from the replay's end offsets with the state the replay wrote and
  becomes active; its output, per key, is exactly pandas' counts over the flights before and after the switch,
  and with the record cache off every count record of both versions reads exactly ``1..n`` per key in offset
  order (the replay's history, then the new version's): no output record lost or written twice across the switch;
- an operator restart in the middle of the handover (the operator's pod deleted while ``status.handover`` shows
  the old version not yet removed) resumes it: the steps, each recorded before it acts, never go back, and the
  new operator finishes the last one;
- ``spark.mode: kubernetes``: the Job's pod is the Spark driver and two executor pods do the work, exactly (the
  backfill);
- a failed Spark job fails the replay with the Job's reason in the ``Failed`` condition, creates no new version and
  leaves the running app as it was.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from e2e import cluster, flights, replay

pytestmark = pytest.mark.e2e

BATCH_1 = 6_000  # flights replayed
BATCH_2 = 2_000  # flights after the replay's end offsets: the new version counts them itself
PER_CARRIER = "flights_app.logic:carrier"
PER_CARRIER_ORIGIN = "flights_app.logic:carrier_and_origin"


def assert_counts(bootstrap: str, topic: str, expected: dict[str, int]) -> None:
    """The last count per key on ``topic`` (read_committed) equals ``expected``, within 30 s."""
    found: list[dict[str, int]] = [{}]

    def equal() -> bool:
        found[0] = flights.read_counts(bootstrap, topic)
        return found[0] == expected

    cluster.wait_until(equal, 30, f"the counts on {topic} to equal pandas'",
                       describe=lambda: f"read {found[0]}, pandas {expected}")  # fmt: skip


@pytest.fixture(scope="module")
def running_app(operator_installed: None) -> Iterator[tuple[str, str]]:
    """A namespace with StreamApp ``flights`` counting per carrier over the first BATCH_1 flights (settled);
    yields (namespace, topic prefix)."""
    namespace = cluster.create_namespace("replay")
    prefix = f"rp-{uuid.uuid4().hex[:6]}"
    bootstrap = cluster.stack_env()["KAFKA_BOOTSTRAP"]
    flights.ensure_topics(bootstrap, {f"{prefix}-flights": 2, f"{prefix}-per-carrier": 2})
    topology = replay.counting_topology(f"{prefix}-flights", f"{prefix}-per-carrier", PER_CARRIER, "by-carrier")
    # the record cache off (here and in the new version, which takes the app's spec): every update is written,
    # so each version's output is a running count, 1..n per key
    cluster.apply(replay.streamapp("flights", prefix, topology, config={"statestore.cache.max.bytes": "0"}), namespace)
    assert flights.produce(bootstrap, flights.load_flights().iloc[:BATCH_1], f"{prefix}-flights") == BATCH_1
    cluster.wait_until(
        lambda: cluster.streamapp_settled("flights", 1, namespace),
        300,
        "the app to settle",
        describe=lambda: str(cluster.get_json("streamapp", "flights", namespace).get("status")),
    )
    try:
        yield namespace, prefix
    finally:
        cluster.kubectl("delete", "streamreplays", "--all", "-n", namespace, "--wait=true", check=False)
        cluster.delete_namespace(namespace)
        cluster.delete_topics(prefix)


def spark_driver_account(namespace: str) -> str:
    """A ServiceAccount allowed what Spark's driver does with executors (docs/replay.md): pods and configmaps."""
    for manifest in (
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "spark"}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "spark"},
         "rules": [{"apiGroups": [""], "resources": ["pods", "configmaps"],
                    "verbs": ["create", "get", "list", "watch", "delete", "deletecollection"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "spark"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "spark"},
         "subjects": [{"kind": "ServiceAccount", "name": "spark", "namespace": namespace}]},
    ):  # fmt: skip
        cluster.apply(manifest, namespace)
    return "spark"


def test_backfill_on_two_executor_pods_writes_exact_counts_and_leaves_the_app_alone(
    running_app: tuple[str, str],
) -> None:
    namespace, prefix = running_app
    bootstrap = cluster.stack_env()["KAFKA_BOOTSTRAP"]
    sink = f"{prefix}-backfill"
    topology = replay.counting_topology(f"{prefix}-flights", sink, PER_CARRIER_ORIGIN, "by-carrier-origin")
    spark = {"mode": "kubernetes", "serviceAccountName": spark_driver_account(namespace),
             "executor": {"instances": 2, "cores": 1, "memory": "512m"}}  # fmt: skip
    cluster.apply(replay.streamreplay("backfill", "flights", "backfill", topology, spark=spark), namespace)
    # a second backfill of the app while the first runs is refused by name (it would write every record twice)
    cluster.apply(replay.streamreplay("backfill-again", "flights", "backfill", topology), namespace)
    cluster.wait_until(lambda: replay.replay_status("backfill-again", namespace).get("phase") == "Failed", 60,
                       "the second backfill to be refused")  # fmt: skip
    refused = {c["type"]: c for c in replay.replay_status("backfill-again", namespace)["conditions"]}["Failed"]
    assert refused["reason"] == "ReplayInProgress", refused
    assert refused["message"].startswith(f"StreamReplay {namespace}/backfill ("), refused["message"]
    assert "job" not in replay.replay_status("backfill-again", namespace)
    executors: set[str] = set()

    def done() -> bool:
        listed = cluster.kubectl("get", "pods", "-n", namespace, "-l", "spark-role=executor", "-o", "name")
        executors.update(listed.split())
        return replay.replay_status("backfill", namespace).get("phase") in ("Succeeded", "Failed")

    cluster.wait_until(done, 600, "the replay on executor pods", interval_s=1)
    status = replay.wait_phase("backfill", namespace, ("Succeeded",), show=print)
    assert len(executors) == 2, executors
    ends = status["resolvedOffsets"]["to"][f"{prefix}-flights"]
    assert sum(ends.values()) == BATCH_1 and status["recordsRead"] == BATCH_1
    assert status["recordsWritten"] > 0 and status["job"] == "backfill-replay"
    expected = replay.expected_counts([flights.load_flights().iloc[:BATCH_1]], PER_CARRIER_ORIGIN)
    assert_counts(bootstrap, sink, expected)
    columns = cluster.kubectl("get", "streamreplays", "-n", namespace).splitlines()[0].split()
    assert columns == ["NAME", "APP", "MODE", "PHASE", "PROGRESS", "AGE"]
    app = cluster.get_json("streamapp", "flights", namespace)
    assert app["metadata"]["generation"] == 1 and cluster.streamapp_settled("flights", 1, namespace)


def test_a_failed_spark_job_fails_the_replay_with_a_reason_and_leaves_the_app_running(
    running_app: tuple[str, str],
) -> None:
    namespace, prefix = running_app
    topology = replay.counting_topology(f"{prefix}-flights", f"{prefix}-broken", "flights_app.logic:nope", "broken")
    cluster.apply(replay.streamreplay("broken", "flights", "handover", topology, spark={"retries": 0}), namespace)
    with pytest.raises(RuntimeError, match="failed") as failure:
        replay.wait_phase("broken", namespace, ("Succeeded",), timeout_s=300, show=print)
    # the Job's first step imports the topology's functions before Spark starts: no retry, the reason names it
    assert "FunctionNotImportable" in str(failure.value) and "the Spark job failed" in str(failure.value)
    status = replay.replay_status("broken", namespace)
    assert status["phase"] == "Failed" and "handover" not in status
    assert cluster.kubectl("get", "streamapp", "broken", "-n", namespace, check=False).strip() == ""
    assert cluster.streamapp_settled("flights", 1, namespace)


def test_handover_to_a_new_version_is_exact_across_the_switch_and_survives_an_operator_restart(
    running_app: tuple[str, str],
) -> None:
    namespace, prefix = running_app
    bootstrap = cluster.stack_env()["KAFKA_BOOTSTRAP"]
    every = flights.load_flights()
    sink = f"{prefix}-per-carrier-origin"
    topology = replay.counting_topology(f"{prefix}-flights", sink, PER_CARRIER_ORIGIN, "by-carrier-origin")
    cluster.apply(replay.streamreplay("v2", "flights", "handover", topology), namespace)
    status = replay.wait_phase("v2", namespace, ("Running", "HandingOver", "Succeeded"), show=print)
    assert sum(status["resolvedOffsets"]["to"][f"{prefix}-flights"].values()) == BATCH_1
    # after the replay's end offsets: only the new version (from the end offsets) and the old one see these
    produced = flights.produce(bootstrap, every.iloc[BATCH_1 : BATCH_1 + BATCH_2], f"{prefix}-flights")
    assert produced == BATCH_2

    status = replay.wait_phase("v2", namespace, ("HandingOver", "Succeeded"), show=print)
    assert status["phase"] == "HandingOver"  # the new version needs a while to start and catch up
    # the old version processed until the switch: its own output (per carrier), read while it still runs, is
    # pandas' counts over both batches, the flights after the replay's end offsets included
    old_expected = replay.expected_counts([every.iloc[: BATCH_1 + BATCH_2]], PER_CARRIER)
    replay.counts_while_running("flights", namespace, f"{prefix}-per-carrier", old_expected)
    # the operator restarts in the middle of the handover: the steps it had recorded as its pod is deleted
    at_restart = replay.replay_status("v2", namespace).get("handover") or []
    old_version = cluster.get_json("streamapp", "flights", namespace)
    operator_started = replay.restart_operator()
    observed = [at_restart]
    status = replay.wait_phase("v2", namespace, ("Succeeded",), timeout_s=600, show=print, interval_s=0.5,
                               observe=lambda seen: observed.append(seen.get("handover") or []))  # fmt: skip
    assert at_restart and replay.handover_position(at_restart) < (3, 1), f"not mid-handover: {at_restart}"
    assert not old_version["metadata"].get("deletionTimestamp"), "the old version was being removed"
    replay.assert_never_went_back(observed)
    assert [(step["name"], step["state"]) for step in status["handover"]] == [
        (name, "Done") for name in replay.HANDOVER_STEPS
    ]
    assert status["handover"][-1]["time"] >= operator_started, "the new operator did not remove the old version"
    assert status["newVersion"] == "v2" and status["applicationId"] == f"{prefix}-v2"

    new = cluster.get_json("streamapp", "v2", namespace)
    assert new["spec"]["applicationId"] == f"{prefix}-v2"
    # deleted by the step; gone once the operator's own deletion handler released its finalizer (seconds later)
    old_gone = lambda: cluster.kubectl("get", "streamapp", "flights", "-n", namespace, check=False).strip() == ""  # noqa: E731
    cluster.wait_until(old_gone, 60, "the old version to be gone", 1)
    cluster.wait_until(lambda: cluster.streamapp_settled("v2", 1, namespace), 300, "the new version to settle")
    expected = replay.expected_counts([every.iloc[: BATCH_1 + BATCH_2]], PER_CARRIER_ORIGIN)
    assert_counts(bootstrap, sink, expected)
    # no count record lost or duplicated across the switch, in either version's output: per key exactly 1..n
    # in offset order (the new version's: the replay's 1..m over the replayed flights, then m+1..n its own)
    assert replay.count_sequences(sink, sum(expected.values())) == replay.running_counts(expected)
    old_output = replay.count_sequences(f"{prefix}-per-carrier", sum(old_expected.values()))
    assert old_output == replay.running_counts(old_expected)
