"""StreamReplays that never start, and replays whose app is deleted under them, end with Kubernetes' reason
instead of hanging as "spark job running" (issue 19: audit R17b, R18d, R24, R25, D-M1, D-M2).

On the real stack (the Job controller, the scheduler and the node agent): a Job whose pod cannot be created
(``spark.serviceAccountName`` that does not exist, a ResourceQuota: ``FailedCreate``), scheduled
(``driver.memory`` no node has: ``Unschedulable``) or started (an image that does not exist) is ``Degraded`` with
that reason while it waits and ``Failed`` once ``spark.startTimeoutSeconds`` passed, its Job deleted; its
progress never says "running". A backfill whose StreamApp is deleted mid-job fails ``AppMissing`` once its Job
ends; a handover at once. A finished replay's 5 s timer stops (kopf logs no more runs of it).
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from e2e import cluster, flights, replay

pytestmark = pytest.mark.e2e

RECORDS = 3_000
PER_CARRIER = "flights_app.logic:carrier"
#: The smallest start timeout the CRD allows: the scenarios fail in about half a minute.
START_TIMEOUT = 30


@contextlib.contextmanager
def _app_in_namespace(app: str, prefix: str) -> Iterator[tuple[str, str]]:
    """A new namespace with StreamApp ``app`` counting RECORDS flights per carrier on ``<prefix>-<random>``
    topics; yields (namespace, topic prefix), then deletes the replays, the namespace and the topics."""
    namespace = cluster.create_namespace(prefix)
    topics = f"{prefix}-{uuid.uuid4().hex[:6]}"
    bootstrap = cluster.stack_env()["KAFKA_BOOTSTRAP"]
    flights.ensure_topics(bootstrap, {f"{topics}-flights": 2, f"{topics}-per-carrier": 2})
    topology = replay.counting_topology(f"{topics}-flights", f"{topics}-per-carrier", PER_CARRIER, "by-carrier")
    cluster.apply(replay.streamapp(app, topics, topology), namespace)
    assert flights.produce(bootstrap, flights.load_flights().iloc[:RECORDS], f"{topics}-flights") == RECORDS
    try:
        yield namespace, topics
    finally:
        cluster.kubectl("delete", "streamreplays", "--all", "-n", namespace, "--wait=true", check=False)
        cluster.delete_namespace(namespace)
        cluster.delete_topics(topics)


@pytest.fixture(scope="module")
def app(operator_installed: None) -> Iterator[tuple[str, str]]:
    """StreamApp ``flights`` that the failing replays read; yields (namespace, topic prefix)."""
    with _app_in_namespace("flights", "replay-fail") as found:
        yield found


@pytest.fixture
def doomed(operator_installed: None) -> Iterator[tuple[str, str]]:
    """StreamApp ``doomed``, which the test deletes under its replay; yields (namespace, topic prefix)."""
    with _app_in_namespace("doomed", "replay-gone") as found:
        yield found


def _job_deleted(job: str, namespace: str) -> None:
    cluster.wait_until(lambda: cluster.kubectl("get", "job", job, "-n", namespace, "--ignore-not-found") == "",
                       30, f"Job {job} to be deleted")  # fmt: skip


def _conditions(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status.get("conditions") or []}


def _watch(name: str, namespace: str, until: str, reason: str | None, timeout_s: float) -> list[dict[str, Any]]:
    """Every status read (each 2 s) until the ``until`` condition is True (with ``reason``); returns them all."""
    seen: list[dict[str, Any]] = []

    def reached() -> bool:
        status = replay.replay_status(name, namespace)
        seen.append(status)
        found = _conditions(status).get(until, {})
        return found.get("status") == "True" and (reason is None or found.get("reason") == reason)

    cluster.wait_until(reached, timeout_s, f"{until}={reason} on StreamReplay {namespace}/{name}",
                       describe=lambda: str(seen[-1] if seen else None))  # fmt: skip
    return seen


def _never_running(seen: list[dict[str, Any]]) -> None:
    progress = {str(s.get("progress")) for s in seen}
    assert not [p for p in progress if "running" in p], progress


def _timer_runs(name: str, namespace: str) -> int:
    """Runs of the replay timer on StreamReplay ``namespace/name`` in the operator's log (kopf logs
    ``[<namespace>/<name>] Timer 'advance_streamreplay' succeeded.`` for each)."""
    logs = sorted((cluster.ROOT / ".cache" / "run" / "pods" / "streamapp-system").glob("streamapp-operator-*/*.log"))
    assert logs, "no operator log found (the node agent keeps the containers' logs there)"
    text = "\n".join(log.read_text(errors="replace") for log in logs)
    return sum(1 for line in text.splitlines() if f"[{namespace}/{name}]" in line and "advance_streamreplay" in line)


def _no_timer_after_finishing(name: str, namespace: str) -> None:
    """A finished replay's 5 s timer has stopped: no run of it in 20 s (kopf logs each run of a timer)."""
    time.sleep(6)  # the last run, if one was under way as the replay finished
    before = _timer_runs(name, namespace)
    assert before > 0, "the timer ran while the replay waited: kopf's log line for it was not found"
    time.sleep(20)
    assert _timer_runs(name, namespace) == before


def _backfill(name: str, prefix: str, **spark: Any) -> dict[str, Any]:
    topology = replay.counting_topology(f"{prefix}-flights", f"{prefix}-{name}", PER_CARRIER, "by-carrier")
    return replay.streamreplay(name, "flights", "backfill", topology,
                               spark={"startTimeoutSeconds": START_TIMEOUT, **spark})  # fmt: skip


def test_a_missing_service_account_is_the_job_controllers_failed_create_then_fails(app: tuple[str, str]) -> None:
    namespace, prefix = app
    cluster.apply(_backfill("nosa", prefix, mode="kubernetes", serviceAccountName="no-such-sa"), namespace)
    seen = _watch("nosa", namespace, "Degraded", "FailedCreate", 60)
    message = _conditions(seen[-1])["Degraded"]["message"]
    assert message.startswith("the Spark job has not started: the Job cannot create its pod: Error creating: "), message
    assert 'serviceaccount "no-such-sa" not found' in message, message
    assert message.endswith(
        f"; the replay fails if it has not started {START_TIMEOUT}s after its Job was created "
        "(spec.spark.startTimeoutSeconds)"
    ), message
    assert any(
        e.get("reason") == "FailedCreate" and e.get("type") == "Warning" for e in cluster.events("nosa", namespace)
    )

    seen += _watch("nosa", namespace, "Failed", "FailedCreate", START_TIMEOUT + 60)
    status = seen[-1]
    failed = _conditions(status)["Failed"]["message"]
    assert status["phase"] == "Failed"
    assert failed.startswith(
        f"the Spark job did not start within {START_TIMEOUT}s (spec.spark.startTimeoutSeconds): the Job cannot create "
        "its pod: Error creating: "
    ), failed
    assert failed.endswith("; Job nosa-replay deleted") and 'serviceaccount "no-such-sa" not found' in failed
    _never_running(seen)
    _job_deleted("nosa-replay", namespace)
    _no_timer_after_finishing("nosa", namespace)


def test_a_resource_quota_that_refuses_the_pod_is_failed_create_then_fails(operator_installed: None) -> None:
    """A ResourceQuota of no pods in the namespace: the Job controller cannot create the replay's pod."""
    with _app_in_namespace("flights", "replay-quota") as (namespace, prefix):
        quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "no-pods"},
                 "spec": {"hard": {"pods": "0"}}}  # fmt: skip
        cluster.apply(quota, namespace)
        cluster.apply(_backfill("quota", prefix), namespace)
        seen = _watch("quota", namespace, "Degraded", "FailedCreate", 60)
        message = _conditions(seen[-1])["Degraded"]["message"]
        assert message.startswith("the Spark job has not started: the Job cannot create its pod: Error creating: ")
        assert "exceeded quota: no-pods" in message, message
        seen += _watch("quota", namespace, "Failed", "FailedCreate", START_TIMEOUT + 60)
        failed = _conditions(seen[-1])["Failed"]["message"]
        assert "exceeded quota: no-pods" in failed and failed.endswith("; Job quota-replay deleted"), failed
        _never_running(seen)


def test_a_driver_no_node_can_hold_is_unschedulable_then_fails(app: tuple[str, str]) -> None:
    namespace, prefix = app
    cluster.apply(_backfill("huge", prefix, driver={"memory": "99999g"}), namespace)
    seen = _watch("huge", namespace, "Degraded", "Unschedulable", 60)
    message = _conditions(seen[-1])["Degraded"]["message"]
    assert message.startswith("the Spark job has not started: pod huge-replay-"), message
    assert " cannot be scheduled: 0/1 nodes are available: 1 Insufficient memory." in message, message

    seen += _watch("huge", namespace, "Failed", "Unschedulable", START_TIMEOUT + 60)
    failed = _conditions(seen[-1])["Failed"]["message"]
    assert failed.startswith(
        f"the Spark job did not start within {START_TIMEOUT}s (spec.spark.startTimeoutSeconds): pod huge-replay-"
    ), failed
    assert "Insufficient memory" in failed and failed.endswith("; Job huge-replay deleted"), failed
    _never_running(seen)


def test_an_image_that_does_not_exist_fails_after_the_start_timeout(app: tuple[str, str]) -> None:
    """A real kubelet says ``ErrImagePull``/``ImagePullBackOff`` (Degraded at once); the e2e node agent keeps the
    container ``ContainerCreating``, which the timeout ends as ``JobNotStarted`` naming where the pod waits."""
    namespace, prefix = app
    cluster.apply(_backfill("noimage", prefix, image="localhost/nosuch-replay:1"), namespace)
    seen = _watch("noimage", namespace, "Failed", None, START_TIMEOUT + 90)
    failed = _conditions(seen[-1])["Failed"]
    assert failed["reason"] in ("ErrImagePull", "ImagePullBackOff", "JobNotStarted"), failed
    assert failed["message"].startswith(
        f"the Spark job did not start within {START_TIMEOUT}s (spec.spark.startTimeoutSeconds): "
    ), failed
    assert failed["message"].endswith("; Job noimage-replay deleted"), failed
    if failed["reason"] == "JobNotStarted":
        assert "no pod of the Job started (pod noimage-replay-" in failed["message"], failed
    _never_running(seen)


def _wait_running(name: str, namespace: str) -> None:
    cluster.wait_until(lambda: "spark job running" in str(replay.replay_status(name, namespace).get("progress")),
                       300, f"StreamReplay {name}'s Spark job to run",
                       describe=lambda: str(replay.replay_status(name, namespace)))  # fmt: skip


def test_a_backfill_whose_app_is_deleted_mid_job_fails_once_its_job_ends(doomed: tuple[str, str]) -> None:
    namespace, prefix = doomed
    topology = replay.counting_topology(f"{prefix}-flights", f"{prefix}-orphan", PER_CARRIER, "by-carrier")
    cluster.apply(replay.streamreplay("orphan", "doomed", "backfill", topology), namespace)
    _wait_running("orphan", namespace)
    cluster.kubectl("delete", "streamapp", "doomed", "-n", namespace, "--wait=true", "--timeout=120s")
    gone = "StreamApp doomed was deleted while the replay's Spark job ran"
    seen = _watch("orphan", namespace, "Failed", "AppMissing", 600)
    degraded = [_conditions(s).get("Degraded", {}) for s in seen]
    waiting = [d["message"] for d in degraded if d.get("reason") == "AppMissing"]
    if waiting:  # the Job may end before the operator notices the app is gone
        assert waiting[0] == (f"{gone}: the replay fails when Job orphan-replay ends (its output keeps what it "
                              "commits; delete the StreamReplay to stop it now)")  # fmt: skip
    status = seen[-1]
    assert status["phase"] == "Failed"
    assert _conditions(status)["Failed"]["message"] == (
        f"{gone}; Job orphan-replay completed: its output topics hold what it wrote, which the replay did not count "
        "or check without the app"
    )


def test_a_handover_whose_app_is_deleted_mid_job_fails_at_once_and_deletes_its_job(doomed: tuple[str, str]) -> None:
    namespace, prefix = doomed
    topology = replay.counting_topology(f"{prefix}-flights", f"{prefix}-v2", PER_CARRIER, "by-carrier")
    cluster.apply(replay.streamreplay("doomed-v2", "doomed", "handover", topology), namespace)
    _wait_running("doomed-v2", namespace)
    cluster.kubectl("delete", "streamapp", "doomed", "-n", namespace, "--wait=true", "--timeout=120s")
    seen = _watch("doomed-v2", namespace, "Failed", "AppMissing", 60)
    assert _conditions(seen[-1])["Failed"]["message"] == (
        "StreamApp doomed was deleted while the replay's Spark job ran: there is no app to hand over from; "
        "Job doomed-v2-replay deleted"
    )
    _job_deleted("doomed-v2-replay", namespace)
    assert cluster.kubectl("get", "streamapp", "doomed-v2", "-n", namespace, "--ignore-not-found") == ""
