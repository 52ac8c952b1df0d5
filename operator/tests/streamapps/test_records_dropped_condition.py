"""``status.droppedRecords`` sums the records the app's pods dropped, by reason, and ``RecordsDropped`` is True
exactly when they grew since the previous observation, naming the reasons.

The pods' ``/status`` documents are built from the runtime's real ``WorkerStatus``/``ThreadMetrics`` dataclasses,
as its supervisor serves them, and once from a real stream thread's report read over the runtime's own HTTP
endpoint: a renamed field on the runtime side fails here.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from operator_fakes import TestingCluster, TestingInstances, TestingKafka, flights_spec
from prometheus_client import CollectorRegistry
from streamapp import StreamsBuilder
from streamapp.app import _worker_status
from streamapp.dsl.windows import TimeWindows
from streamapp.monitoring.health import WorkerView
from streamapp.monitoring.server import MonitoringServer
from streamapp.processing.status import ThreadMetrics, WorkerStatus
from streamapp.testing import TopologyTestDriver
from streamapp_operator.instances import HttpInstanceReader
from streamapp_operator.streamapps.conditions import RECORDS_DROPPED
from streamapp_operator.streamapps.dropped_records import PodDrops, dropped_records, pod_drops
from streamapp_operator.streamapps.reconcile import App, Result, World, reconcile
from streamapp_operator.streamapps.resources import StreamAppStatus

T0 = "2026-01-01T00:00:00Z"
APP = App(name="flights-per-carrier", namespace="apps", uid="uid-1", generation=1)
LABELS = {"app.kubernetes.io/name": "streamapp", "app.kubernetes.io/instance": "flights-per-carrier"}
PODS = {"flights-per-carrier-0": "127.0.100.2", "flights-per-carrier-1": "127.0.100.3"}
NONE_DROPPED = {"late": 0, "nullKeyOrValue": 0, "invalidTimestamp": 0, "deserializationError": 0, "processingError": 0}


def _document(*threads: dict[str, int]) -> dict[str, Any]:
    """A pod's /status as ``streamapp.app.App.status`` builds it: one worker per ``{reason: records}``."""
    workers = []
    for index, dropped in enumerate(threads):
        metrics = ThreadMetrics(dropped_records_total=sum(dropped.values()), dropped_records_by_reason=dropped)
        status = WorkerStatus(index, 1, "running", True, True, 0.0, metrics=metrics)
        workers.append({"thread": index, "alive": True, "restarts": 0, **asdict(status)})
    return {"ready": True, "workers": workers}


def _pod_status(ip: str) -> dict[str, Any]:
    return {"phase": "Running", "podIP": ip, "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": "streamapp", "started": True}]}  # fmt: skip


def _condition(result: Result) -> tuple[str, str, str]:
    found = next(c for c in result.status["conditions"] if c["type"] == RECORDS_DROPPED)
    return found["status"], found["reason"], found["message"]


def test_records_dropped_is_true_when_the_pods_counts_grew_and_names_the_reasons() -> None:
    cluster, kafka, instances = TestingCluster(), TestingKafka(), TestingInstances()
    world = World(cluster=cluster, kafka_for=lambda servers: kafka, instances=instances)
    for pod, ip in PODS.items():
        cluster.add_pod("apps", pod, LABELS, _pod_status(ip))
    pod_0, pod_1 = PODS.values()
    instances.documents[pod_0] = _document({"late": 3}, {})
    instances.documents[pod_1] = _document({"late": 1, "null_key_or_value": 2})

    first = reconcile(APP, flights_spec(), {}, world, T0)
    assert first.status["droppedRecords"] == {**NONE_DROPPED, "late": 4, "nullKeyOrValue": 2}
    assert _condition(first) == (
        "True",
        "RecordsDropped",
        "records dropped since the last observation: late +4, nullKeyOrValue +2 (totals: late 4, nullKeyOrValue 2)",
    )
    assert [(e.type, e.reason) for e in first.events if e.reason == RECORDS_DROPPED] == [("Warning", "RecordsDropped")]
    StreamAppStatus.model_validate(first.status)  # the typed status (the CRD's schema) accepts it

    same = reconcile(APP, flights_spec(), first.status, world, T0)
    assert _condition(same) == (
        "False",
        "NoNewDrops",
        "no records dropped since the last observation (totals: late 4, nullKeyOrValue 2)",
    )
    assert [e for e in same.events if e.reason == RECORDS_DROPPED] == []

    instances.documents[pod_0] = _document({"late": 3, "deserialization_error": 1}, {"late": 5})
    grown = reconcile(APP, flights_spec(), same.status, world, T0)
    assert grown.status["droppedRecords"] == {**NONE_DROPPED, "late": 9, "nullKeyOrValue": 2, "deserializationError": 1}
    assert _condition(grown)[:2] == ("True", "RecordsDropped")
    growth = "records dropped since the last observation: late +5, deserializationError +1"
    assert _condition(grown)[2].startswith(growth)


def test_a_restarted_pod_counting_from_zero_raises_no_false_alarm_and_an_unread_pod_keeps_its_last_counts() -> None:
    pod = "flights-per-carrier-0"
    before = {"droppedRecordsByPod": [{"pod": pod, **NONE_DROPPED, "late": 40}, {"pod": "gone", "late": 7}]}

    restarted = dropped_records({pod: PodDrops({"late": 2})}, [pod], before)
    assert restarted.condition[:2] == ("False", "NoNewDrops")
    assert restarted.totals == {**NONE_DROPPED, "late": 2}  # a pod that no longer exists is not counted

    unread = dropped_records({"flights-per-carrier-1": PodDrops({})}, [pod, "flights-per-carrier-1"], before)
    assert unread.totals == {**NONE_DROPPED, "late": 40}
    assert [entry["pod"] for entry in unread.by_pod] == [pod, "flights-per-carrier-1"]

    assert dropped_records(None, [pod], before).condition == ("Unknown", "NotObserved", "no pod's /status was read")


def test_the_drops_a_real_stream_thread_reports_reach_the_operator_over_the_runtimes_status_endpoint() -> None:
    builder = StreamsBuilder()
    events = builder.stream("events", key_serde="string", value_serde="json", name="events")
    events.group_by_key().windowed_by(TimeWindows.of_size_and_grace(10, 0)).count(name="counts")
    with TopologyTestDriver(builder) as driver:
        topic = driver.create_input_topic("events")
        topic.pipe_records([("k", {}, 100), ("k", {}, 5), (None, {}, 101)])  # one late, one null key
        reported = driver._thread.status()  # what the stream thread's worker sends its supervisor
    document = {"workers": [_worker_status(WorkerView(0, True, 0.0, 0, reported))]}  # App.status's entries
    server = MonitoringServer("127.0.0.1", 0, lambda: (True, "ok"), lambda: (True, "ok"), CollectorRegistry(),
                              lambda: document)  # fmt: skip
    server.start()
    try:
        read = HttpInstanceReader().status("127.0.0.1", server.port)
    finally:
        server.stop()

    assert pod_drops({"flights-per-carrier-0": read}) == {
        "flights-per-carrier-0": PodDrops(
            {
                "late": 1,
                "null_key_or_value": 1,
                "invalid_timestamp": 0,
                "deserialization_error": 0,
                "processing_error": 0,
            }
        )
    }
