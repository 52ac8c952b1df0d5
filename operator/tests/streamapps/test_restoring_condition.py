"""``Restoring`` tells which pods' tasks restore their state stores, from the runtime's own ``/status``.

The status documents are built from the runtime's real ``WorkerStatus``/``TaskStatus`` dataclasses, the way
its supervisor serves them, and read over HTTP from the runtime's real ``MonitoringServer``: a renamed
field on the runtime side fails here.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import pytest
from operator_fakes import TestingCluster, TestingInstances, TestingKafka, flights_spec
from prometheus_client import CollectorRegistry
from streamapp.monitoring.server import MonitoringServer
from streamapp.processing.status import TaskStatus, WorkerStatus
from streamapp_operator.instances import HttpInstanceReader, InstanceUnavailable
from streamapp_operator.streamapps.conditions import RESTORE_UNOBSERVED, RESTORING, Health, condition_events, conditions
from streamapp_operator.streamapps.pod_status import RestoreView, RestoringTask, restore_view, unready_pods
from streamapp_operator.streamapps.reconcile import App, World, reconcile

T0 = "2026-01-01T00:00:00Z"
APP = App(name="flights-per-carrier", namespace="apps", uid="uid-1", generation=1)
LABELS = {"app.kubernetes.io/name": "streamapp", "app.kubernetes.io/instance": "flights-per-carrier"}


def _document(*tasks: TaskStatus) -> dict[str, Any]:
    """A pod's /status as ``streamapp.app.App.status`` builds it."""
    worker = WorkerStatus(thread=0, pid=1, state="running", ready=False, group_joined=True, reported_at=0.0,
                          tasks=list(tasks))  # fmt: skip
    return {"ready": False, "workers": [{"thread": 0, "alive": True, "restarts": 0, "exit_code": None,
                                         **asdict(worker)}]}  # fmt: skip


def _pod_status(ip: str, ready: bool, started: bool = True) -> dict[str, Any]:
    return {"phase": "Running", "podIP": ip, "conditions": [{"type": "Ready", "status": str(ready)}],
            "containerStatuses": [{"name": "streamapp", "started": started}]}  # fmt: skip


def _made(
    restore: RestoreView | None, previous: list[dict[str, Any]] | None = None, now: str = T0
) -> list[dict[str, Any]]:
    health = Health(generation=1, problems=[], progress=None, topology_checked=True, restore=restore)
    return conditions(health, previous=previous or [], now=now)


def _restoring(restore: RestoreView | None, previous: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return next(c for c in _made(restore, previous) if c["type"] == RESTORING)


def test_only_running_started_pods_that_are_not_ready_are_asked() -> None:
    pods = [
        {"metadata": {"name": "a-2"}, "status": _pod_status("10.0.0.2", ready=False)},
        {"metadata": {"name": "a-0"}, "status": _pod_status("10.0.0.0", ready=True)},
        {"metadata": {"name": "a-1", "deletionTimestamp": T0}, "status": _pod_status("10.0.0.1", ready=False)},
        {"metadata": {"name": "a-3"}, "status": {"phase": "Pending"}},
        {"metadata": {"name": "a-4"}, "status": _pod_status("10.0.0.4", ready=False)},
        {"metadata": {"name": "a-5"}, "status": _pod_status("10.0.0.5", ready=False, started=False)},  # crash loop
        {"metadata": {"name": "a-6"}, "status": {**_pod_status("10.0.0.6", ready=False), "containerStatuses": []}},
    ]
    assert unready_pods(pods) == [("a-2", "10.0.0.2"), ("a-4", "10.0.0.4")]


def test_tasks_not_running_are_restoring_with_their_remaining_records() -> None:
    view = restore_view({
        "a-1": _document(TaskStatus("0_1", "restoring", ["t-1"], restore_remaining=1200),
                         TaskStatus("0_2", "running", ["t-2"]), TaskStatus("1_0", "created", ["r-0"])),
        "a-0": _document(TaskStatus("0_0", "running", ["t-0"])),
    })  # fmt: skip
    assert view.tasks == (RestoringTask("a-1", "0_1", 1200), RestoringTask("a-1", "1_0", 0))
    assert view.remaining == 1200
    condition = _restoring(view)
    assert (condition["status"], condition["reason"]) == ("True", "RestoringState")
    assert condition["message"] == "pod a-1 restores tasks 0_1, 1_0 (1200 records left)"


def test_restoring_is_false_when_every_asked_pod_runs_all_its_tasks_and_unknown_when_one_cannot_answer() -> None:
    done = _restoring(restore_view({"a-0": _document(TaskStatus("0_0", "running", ["t-0"]))}))
    assert (done["status"], done["reason"]) == ("False", "NoRestore")
    assert _restoring(RestoreView())["status"] == "False"
    silent = _restoring(restore_view({"a-0": "GET http://10.0.0.0:8080/status: connection refused"}))
    assert (silent["status"], silent["reason"]) == ("Unknown", "InstanceStatusUnavailable")
    assert "pod a-0: GET http://10.0.0.0:8080/status: connection refused" in silent["message"]
    assert _restoring(None)["status"] == "Unknown"


def test_restore_start_and_end_are_events_and_progress_keeps_the_transition_time() -> None:
    started = _made(RestoreView((RestoringTask("a-0", "0_0", 10),)))
    events = condition_events([{"type": RESTORING, "status": "False"}], started)
    assert ("Normal", "RestoreStarted", "pod a-0 restores tasks 0_0 (10 records left)") in [
        (e.type, e.reason, e.message) for e in events
    ]
    later = _restoring(RestoreView((RestoringTask("a-0", "0_0", 4),)), previous=started)
    assert later["lastTransitionTime"] == T0
    finished = _made(RestoreView(), started, now="2026-01-01T00:01:00Z")
    assert [e.reason for e in condition_events(started, finished) if e.reason.startswith("Restore")] == [
        "RestoreFinished"
    ]


def test_reconcile_asks_unready_pods_first_and_reports_restoring_and_remaining_records(
    cluster: TestingCluster, kafka: TestingKafka
) -> None:
    instances = TestingInstances()
    world = World(cluster=cluster, kafka_for=lambda servers: kafka, instances=instances)
    cluster.add_pod("apps", "flights-per-carrier-0", LABELS, _pod_status("127.0.100.2", ready=True))
    cluster.add_pod("apps", "flights-per-carrier-1", LABELS, _pod_status("127.0.100.3", ready=False))
    instances.documents["127.0.100.3"] = _document(TaskStatus("0_3", "restoring", ["f-3"], restore_remaining=77))
    status = reconcile(APP, flights_spec(), {}, world, T0).status
    # The ready pod is asked too (its threads may be failing), after the one that may be restoring; it did
    # not answer, which leaves Restoring decided: a ready pod has restored everything.
    assert instances.asked == ["127.0.100.3", "127.0.100.2"]
    restoring = next(c for c in status["conditions"] if c["type"] == RESTORING)
    assert (restoring["status"], restoring["message"]) == (
        "True",
        "pod flights-per-carrier-1 restores tasks 0_3 (77 records left)",
    )
    assert status["restoreRemaining"] == 77
    # An invalid spec does not stop the pods from being observed.
    invalid = reconcile(APP, flights_spec(threads=0), status, world, T0).status
    assert next(c for c in invalid["conditions"] if c["type"] == RESTORING)["status"] == "True"


@pytest.fixture
def runtime_server() -> Any:
    document = _document(TaskStatus("2_1", "restoring", ["x-1"], restore_remaining=5))
    server = MonitoringServer("127.0.0.1", 0, lambda: (True, "ok"), lambda: (False, "restoring"),
                              CollectorRegistry(), lambda: document)  # fmt: skip
    server.start()
    yield server
    server.stop()


def test_http_reader_reads_the_runtime_status_endpoint(runtime_server: MonitoringServer) -> None:
    document = HttpInstanceReader().status("127.0.0.1", runtime_server.port)
    assert restore_view({"p-0": document}).tasks == (RestoringTask("p-0", "2_1", 5),)


def test_http_reader_turns_a_pod_that_does_not_listen_into_instance_unavailable(
    runtime_server: MonitoringServer,
) -> None:
    port = runtime_server.port
    runtime_server.stop()
    with pytest.raises(InstanceUnavailable, match=f"GET http://127.0.0.1:{port}/status"):
        HttpInstanceReader(timeout=1.0).status("127.0.0.1", port)


def test_restore_remaining_is_null_not_zero_when_restoring_is_unknown(
    cluster: TestingCluster, kafka: TestingKafka
) -> None:
    instances = TestingInstances()  # answers nothing: "connection refused"
    world = World(cluster=cluster, kafka_for=lambda servers: kafka, instances=instances)
    cluster.add_pod("apps", "flights-per-carrier-0", LABELS, _pod_status("127.0.100.2", ready=False))
    status = reconcile(APP, flights_spec(), {}, world, T0).status
    assert next(c for c in status["conditions"] if c["type"] == RESTORING)["status"] == "Unknown"
    assert status["restoreRemaining"] is None


def test_restore_started_is_announced_once_per_restore_even_when_its_pod_was_first_unreadable() -> None:
    restoring = _made(RestoreView((RestoringTask("a-0", "0_0", 10),)))

    def started(previous_status: str | None, reason: str = "NotObserved") -> bool:
        previous = [] if previous_status is None else [{"type": RESTORING, "status": previous_status, "reason": reason}]
        return "RestoreStarted" in [e.reason for e in condition_events(previous, restoring)]

    # a pod restoring as it starts (its /status not served yet: Unknown first) is announced ...
    assert (started(None), started("False"), started("Unknown"), started("True")) == (True, True, True, False)
    # ... but not again when its /status was unreadable for a while during the same restore
    assert not started("Unknown", reason=RESTORE_UNOBSERVED)


def test_an_unreadable_status_during_a_restore_is_marked_so_and_stays_marked() -> None:
    def restoring_after(previous: list[dict[str, str]]) -> dict[str, object]:
        found = conditions(
            Health(generation=1, problems=[], progress=None, topology_checked=True, restore=None),
            previous=previous,
            now=T0,
        )
        return next(c for c in found if c["type"] == RESTORING)

    assert restoring_after([{"type": RESTORING, "status": "True"}])["reason"] == RESTORE_UNOBSERVED
    assert restoring_after([{"type": RESTORING, "status": "Unknown", "reason": RESTORE_UNOBSERVED}])["reason"] == (
        RESTORE_UNOBSERVED
    )
    assert restoring_after([{"type": RESTORING, "status": "False"}])["reason"] == "NotObserved"


def test_the_restoring_message_names_pods_that_could_not_be_read() -> None:
    view = RestoreView((RestoringTask("a-0", "0_0", 10),), {"a-1": "timed out", "a-2": "refused"})
    message = _restoring(view)["message"]
    assert message == "pod a-0 restores tasks 0_0 (10 records left); /status unreadable: pods a-1, a-2"
