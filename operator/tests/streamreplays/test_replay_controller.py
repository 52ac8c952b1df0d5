"""The StreamReplay controller: its pure decisions and its steps over the hand-written fakes.

Resolution of offset ranges (earliest/now, explicit offsets, timestamps, refusals naming topic and partition),
the plan, the Job (restricted pod, no token, local master), the Job's phase, the handover's order, and a
controller run from a new StreamReplay to a handed-over version, including a restart in the middle of it.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from typing import Any

import pytest
import yaml
from operator_fakes import flights_spec
from replay_fakes import (
    EARLIEST,
    HANDOVER,
    LATEST,
    NS,
    REPLAY,
    SECOND_TOPOLOGY,
    ReplayCluster,
    ReplayKafka,
    add_job_pod,
    finish_job,
    new_version_ready,
    reconcile_step,
    replay_world,
)
from streamapp.replay import ReplayPlan
from streamapp.replay.progress import PROGRESS_PREFIX, ReplayProgress
from streamapp_operator.k8s import KubernetesUnavailable
from streamapp_operator.kinds import Owner
from streamapp_operator.streamapps.resources import StreamAppSpec
from streamapp_operator.streamreplays import handover, job_manifests, job_reports, offset_range, replay_plan, resources
from streamapp_operator.streamreplays.reconcile import ReplayWorld, reconcile_replay
from streamapp_operator.streamreplays.resources import ReplayFrom, ReplayTo, StreamReplaySpec

POSITIONS = offset_range.KafkaPositions(earliest=EARLIEST, latest=LATEST)


def test_earliest_to_now_is_the_retained_range() -> None:
    assert offset_range.resolve_range(ReplayFrom(earliest=True), ReplayTo(now=True), POSITIONS) == (EARLIEST, LATEST)


def test_explicit_offsets_are_checked_against_the_retained_range() -> None:
    start = ReplayFrom(offsets={"flights": {"0": 10, "1": 5}})
    end = ReplayTo(offsets={"flights": {"0": 50, "1": 90}})
    assert offset_range.resolve_range(start, end, POSITIONS) == (
        {"flights": {0: 10, 1: 5}},
        {"flights": {0: 50, 1: 90}},
    )
    with pytest.raises(offset_range.RangeError, match="'flights' partition 1: 2 is outside the retained range"):
        offset_range.resolve_range(ReplayFrom(offsets={"flights": {"0": 0, "1": 2}}), ReplayTo(now=True), POSITIONS)
    with pytest.raises(offset_range.RangeError, match=r"needs an offset for each of partitions \[0, 1\], got \[0\]"):
        offset_range.resolve_range(ReplayFrom(offsets={"flights": {"0": 0}}), ReplayTo(now=True), POSITIONS)
    with pytest.raises(offset_range.RangeError, match="from 60 is after to 50"):
        offset_range.resolve_range(
            ReplayFrom(offsets={"flights": {"0": 60, "1": 5}}), ReplayTo(offsets={"flights": {"0": 50, "1": 90}}),
            POSITIONS,
        )  # fmt: skip


def test_timestamps_take_the_first_record_at_or_after_them_and_none_means_the_end() -> None:
    kafka = offset_range.KafkaPositions(
        EARLIEST, LATEST, from_time={"flights": {0: 20, 1: -1}}, to_time={"flights": {0: 70, 1: -1}}
    )
    start, end = offset_range.resolve_range(
        ReplayFrom(timestamp="2013-01-01T00:00:00Z"), ReplayTo(timestamp="2013-06-01T00:00:00Z"), kafka
    )
    assert start == {"flights": {0: 20, 1: 90}}
    assert end == {"flights": {0: 70, 1: 90}}
    assert offset_range.timestamp_ms("2013-01-01T00:00:00Z") == 1356998400000


# -- the plan, the Job, its phase ----------------------------------------------------------------------------


def _plan() -> dict[str, Any]:
    return replay_plan.plan_document(
        replay_plan.PlanInputs(
            replay_id="r-1234abcd",
            topology=SECOND_TOPOLOGY,
            config=replay_plan.replay_config({"commit.interval.ms": "100"}, "flights-r"),
            bootstrap_servers="kafka:9092",
            start=EARLIEST,
            end=LATEST,
            sink_partitions={"per-key": 2},
        )
    )


def test_the_plan_is_what_the_replay_engine_reads() -> None:
    text = yaml.safe_dump(json.loads(json.dumps(_plan())))  # as the ConfigMap carries it
    plan = ReplayPlan.from_document(yaml.safe_load(text)).check()
    assert plan.application_id == "flights-r"
    assert plan.start_offsets == EARLIEST and plan.end_offsets == LATEST
    assert plan.partitions == {"per-key": 2}


def test_the_job_runs_local_spark_as_a_restricted_pod_without_a_token() -> None:
    spec = StreamReplaySpec.parse({"appRef": {"name": "flights"}, "spark": {"driver": {"cores": 2, "memory": "2g"}}})
    owner = Owner("StreamReplay", "r", NS, "uid-1")
    account, config_map, job = job_manifests.job_manifests(owner, spec, _plan(), job_manifests.JobImages("img:1"))
    assert account["kind"] == "ServiceAccount" and account["automountServiceAccountToken"] is False
    assert "plan.yaml" in config_map["data"]
    pod = job["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["command"][-4:] == ["--master", "local[2]", "--driver-memory", "2g"]
    assert container["resources"]["limits"]["memory"] == "2560Mi"
    assert pod["serviceAccountName"] == "streamapp-replay" and pod["automountServiceAccountToken"] is False
    assert pod["restartPolicy"] == "Never" and job["spec"]["backoffLimit"] == 1
    assert container["securityContext"]["runAsNonRoot"] and container["securityContext"]["capabilities"] == {
        "drop": ["ALL"]
    }
    assert job["metadata"]["ownerReferences"][0]["kind"] == "StreamReplay"


def test_kubernetes_mode_runs_the_driver_in_the_job_and_executors_from_a_restricted_pod_template() -> None:
    spark = {"mode": "kubernetes", "serviceAccountName": "spark", "executor": {"instances": 2, "memory": "512m"}}
    spec = StreamReplaySpec.parse({"appRef": {"name": "flights"}, "spark": spark})
    owner = Owner("StreamReplay", "r", NS, "uid-1")
    config_map, job = job_manifests.job_manifests(
        owner, spec, _plan(), job_manifests.JobImages("img:1")
    )  # the user's ServiceAccount: no other
    pod = job["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "spark" and pod["automountServiceAccountToken"] is True
    command = pod["containers"][0]["command"][-1]
    assert '--master "k8s://https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT"' in command
    assert "spark.driver.host=$POD_IP" in command
    defaults = dict(line.split(" ", 1) for line in config_map["data"]["spark-defaults.conf"].splitlines())
    assert defaults["spark.executor.instances"] == "2" and defaults["spark.executor.memory"] == "512m"
    assert defaults["spark.kubernetes.container.image"] == "img:1" and defaults["spark.kubernetes.namespace"] == NS
    template = yaml.safe_load(config_map["data"]["executor.yaml"])["spec"]
    assert template["automountServiceAccountToken"] is False and template["securityContext"]["runAsNonRoot"]
    assert "KubernetesExecutorBackend" in template["containers"][0]["command"][-1]


@pytest.mark.parametrize(
    ("status", "phase"),
    [
        (None, "Pending"),
        ({}, "Running"),
        ({"active": 1}, "Running"),
        ({"conditions": [{"type": "Complete", "status": "True"}]}, "Succeeded"),
        ({"conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]}, "Failed"),
    ],
)
def test_job_state(status: dict[str, Any] | None, phase: str) -> None:
    job = None if status is None else {"status": status}
    assert job_reports.job_state(job).phase == phase


def test_the_result_line_and_the_failure_come_from_the_pod_log() -> None:
    log = 'WARN something\n{"records_read": {"flights": 9}, "records_written": {"per-key": 4}, "seconds": {}}\n'
    assert job_reports.replay_result(log) == {
        "records_read": {"flights": 9},
        "records_written": {"per-key": 4},
        "seconds": {},
    }
    assert (
        job_reports.failure_detail("a\nError: plan.yaml: topic 'x' is unknown\n")
        == "Error: plan.yaml: topic 'x' is unknown"
    )


def test_records_written_are_counted_from_the_done_markers_once_per_chunk() -> None:
    marker = {"topic": "per-key", "partition": 0, "chunk": 0, "records": 10}
    values = [
        json.dumps(marker).encode(),
        json.dumps(marker).encode(),
        json.dumps({**marker, "chunk": 1, "records": 3}).encode(),
    ]
    assert job_reports.records_in_markers(values) == 13


def test_without_a_pod_log_the_markers_give_the_records_written() -> None:
    world, cluster, kafka = replay_world()
    spec = {"appRef": {"name": "flights"}, "topology": SECOND_TOPOLOGY}
    status = reconcile_step(world, spec, {})
    finish_job(cluster)
    cluster.logs.clear()
    marker = {"topic": "per-key", "partition": 1, "chunk": 0, "records": 5}
    kafka.values[f"streamapp-replay-{status['replayId']}-markers"] = [json.dumps(marker).encode()]
    assert reconcile_step(world, spec, status)["recordsWritten"] == 5


def test_handover_steps_resume_at_the_first_not_done() -> None:
    steps = handover.record_step(None, "setGroupOffsets", resources.StepState.DONE, "t")
    steps = handover.record_step(steps, "createNewVersion", resources.StepState.STARTED, "t")
    assert handover.next_step(steps) == "createNewVersion"
    assert [s["name"] for s in steps] == ["setGroupOffsets", "createNewVersion"]
    done = [{"name": n, "state": "Done"} for n in handover.HANDOVER_STEPS]
    assert handover.next_step(done) is None


def test_the_new_version_is_the_app_with_the_replays_topology_and_application_id() -> None:
    app = {"metadata": {"name": "flights", "namespace": NS, "uid": "u"}, "spec": flights_spec()}
    new = handover.new_version(
        app, handover.NewVersion("flights-v2", "flights-flights-v2", SECOND_TOPOLOGY), "flights-v2", "uid-1"
    )
    assert new["spec"]["topology"] == SECOND_TOPOLOGY and new["spec"]["applicationId"] == "flights-flights-v2"
    assert new["spec"]["image"] == app["spec"]["image"] and "ownerReferences" not in new["metadata"]


# -- the controller over fakes -------------------------------------------------------------------------------


def test_backfill_resolves_launches_and_succeeds() -> None:
    world, cluster, kafka = replay_world()
    status = reconcile_step(world, {"appRef": {"name": "flights"}, "topology": SECOND_TOPOLOGY}, {})
    assert status["phase"] == "Running" and status["resolvedOffsets"]["to"] == {"flights": {"0": 100, "1": 90}}
    assert status["recordsRead"] == 185 and status["applicationId"] == "flights-flights-v2"
    assert kafka.topics["per-key"] == 2  # the output topic, as many partitions as the input
    assert [m["kind"] for m in cluster.applied] == ["ServiceAccount", "ConfigMap", "Job"]
    # the resolved range was in status before the Job existed (a restart must not resolve another one)
    assert cluster.journal == ["replay status", "apply ServiceAccount", "apply ConfigMap", "apply Job"]
    assert cluster.replay_status_writes[0]["resolvedOffsets"] == status["resolvedOffsets"]
    add_job_pod(cluster)
    status = reconcile_step(world, {"appRef": {"name": "flights"}, "topology": SECOND_TOPOLOGY}, status)
    assert status["phase"] == "Running" and status["progress"] == "spark job running 0s"
    marker = {"topic": "per-key", "partition": 0, "chunk": 0, "records": 4}
    kafka.values[f"streamapp-replay-{status['replayId']}-markers"] = [json.dumps(marker).encode()]
    status = reconcile_step(world, {"appRef": {"name": "flights"}, "topology": SECOND_TOPOLOGY}, status)
    assert status["progress"] == "spark job running 0s, 4 records written"
    finish_job(cluster)
    status = reconcile_step(world, {"appRef": {"name": "flights"}, "topology": SECOND_TOPOLOGY}, status)
    assert status["phase"] == "Succeeded" and status["recordsWritten"] == 7
    assert {c["type"]: c["status"] for c in status["conditions"]}["Complete"] == "True"
    assert cluster.get("StreamApp", NS, "flights") is not None  # backfill never touches the app


def test_a_job_waits_until_the_output_topics_just_created_are_in_the_brokers_metadata() -> None:
    """The broker's metadata lags a topic's creation (KRaft): a plan built at once would have no partition count
    for it and the Job would fail ('partitions has no count for sink topic'); it waits a pass instead."""
    world, cluster, kafka = replay_world()
    kafka.metadata_lag = True
    status = reconcile_step(world, {"appRef": {"name": "flights"}, "topology": SECOND_TOPOLOGY}, {})
    assert "per-key" in kafka.topics and not [m for m in cluster.applied if m["kind"] == "Job"]
    assert "per-key" in status["progress"] or any("per-key" in c.get("message", "") for c in status["conditions"])
    kafka.unseen.clear()
    status = reconcile_step(world, {"appRef": {"name": "flights"}, "topology": SECOND_TOPOLOGY}, status)
    (job,) = [m for m in cluster.applied if m["kind"] == "Job"]
    plan = next(m for m in cluster.applied if m["kind"] == "ConfigMap")["data"]["plan.yaml"]
    assert yaml.safe_load(plan)["partitions"]["per-key"] == 2 and status["job"] == job["metadata"]["name"]


@pytest.mark.parametrize(("input_retention", "output_retention"), [("-1", "-1"), ("31536000000", "31536000000")])
def test_an_output_topic_the_replay_creates_keeps_records_as_long_as_its_input(
    input_retention: str, output_retention: str
) -> None:
    """Output records carry their input's (often years old) timestamps: with the broker's 7-day default the
    next retention check would delete them."""
    world, _, kafka = replay_world()
    kafka.configs["flights"] = {"retention.ms": input_retention}
    reconcile_step(world, {"appRef": {"name": "flights"}, "topology": SECOND_TOPOLOGY}, {})
    assert kafka.configs["per-key"] == {"retention.ms": output_retention}


def test_sink_retention_is_the_longest_of_the_sources_and_for_ever_wins() -> None:
    assert replay_plan.sink_retention_ms({"a": 604_800_000, "b": 31_536_000_000}) == 31_536_000_000
    assert replay_plan.sink_retention_ms({"a": 604_800_000, "b": -1}) == -1
    assert replay_plan.sink_retention_ms({}) is None


def test_a_failed_job_fails_the_replay_with_the_pods_error_and_leaves_the_app_alone() -> None:
    world, cluster, _ = replay_world()
    status = reconcile_step(world, HANDOVER, {})
    finish_job(cluster, "Failed")
    status = reconcile_step(world, HANDOVER, status)
    failed = {c["type"]: c for c in status["conditions"]}["Failed"]
    assert status["phase"] == "Failed" and failed["status"] == "True"
    assert "ValueError: boom" in failed["message"]
    assert cluster.get("StreamApp", NS, "flights") is not None and cluster.get("StreamApp", NS, "flights-v2") is None


def test_handover_sets_offsets_before_the_new_version_exists_waits_for_it_then_removes_the_old() -> None:
    world, cluster, kafka = replay_world()
    status = reconcile_step(world, HANDOVER, {})
    finish_job(cluster)
    status = reconcile_step(world, HANDOVER, status)
    assert status["phase"] == "HandingOver"
    assert kafka.group_offsets["flights-flights-v2"] == LATEST
    new = cluster.get("StreamApp", NS, "flights-v2")
    assert new is not None and new["spec"]["applicationId"] == "flights-flights-v2"
    assert [s["name"] for s in status["handover"] if s["state"] == "Done"] == ["setGroupOffsets", "createNewVersion"]
    assert status["progress"] == "handover 3/4: awaitCaughtUp"
    # each step's intent was written before it acted
    assert [w["handover"][-1]["name"] for w in cluster.replay_status_writes if "handover" in w] == [
        "setGroupOffsets", "createNewVersion", "awaitCaughtUp"
    ]  # fmt: skip
    new_version_ready(cluster)
    status = reconcile_step(world, HANDOVER, status)
    assert status["phase"] == "Succeeded" and status["newVersion"] == "flights-v2"
    assert cluster.get("StreamApp", NS, "flights") is None


def test_a_restart_after_the_new_version_started_never_rewinds_its_offsets() -> None:
    world, cluster, kafka = replay_world()
    status = reconcile_step(world, HANDOVER, {})
    finish_job(cluster)
    status = reconcile_step(world, HANDOVER, status)
    kafka.group_offsets["flights-flights-v2"] = {"flights": {0: 120, 1: 95}}  # the new version committed
    # an operator that crashed after recording setGroupOffsets Started, before Done: it resumes that step
    restarted = {**status, "handover": [{"name": "setGroupOffsets", "state": "Started"}]}
    status = reconcile_step(world, HANDOVER, restarted)
    assert kafka.group_offsets["flights-flights-v2"] == {"flights": {0: 120, 1: 95}}
    assert status["phase"] == "HandingOver" and handover.next_step(status["handover"]) == "awaitCaughtUp"


def test_a_topology_writing_the_apps_own_output_is_refused_before_anything_runs() -> None:
    world, cluster, _ = replay_world()
    own = copy.deepcopy(SECOND_TOPOLOGY)
    own["nodes"][-1]["topic"] = "departures-per-carrier"  # what the running app writes
    status = reconcile_step(world, {**HANDOVER, "topology": own}, {})
    failed = {c["type"]: c for c in status["conditions"]}["Failed"]
    assert status["phase"] == "Failed" and failed["reason"] == "OutputInUse"
    assert "departures-per-carrier" in failed["message"] and not cluster.applied


def test_a_topology_the_replay_cannot_run_is_refused_naming_it_before_any_job() -> None:
    """The engine's own check (plain Python, no pyspark in the operator) runs before the Job is created."""
    world, cluster, _ = replay_world()
    loop = copy.deepcopy(SECOND_TOPOLOGY)
    loop["nodes"][-1]["topic"] = "flights"  # writes the topic it reads: a fixed offset range cannot see that
    status = reconcile_step(world, {**HANDOVER, "topology": loop}, {})
    failed = {c["type"]: c for c in status["conditions"]}["Failed"]
    assert status["phase"] == "Failed" and failed["reason"] == "UnsupportedTopology"
    assert "'flights'" in failed["message"] and not cluster.applied
    lam = copy.deepcopy(SECOND_TOPOLOGY)
    lam["nodes"][1]["mapper"] = "flights_app.logic:<lambda>"
    status = reconcile_step(world, {**HANDOVER, "topology": lam}, {})
    failed = {c["type"]: c for c in status["conditions"]}["Failed"]
    assert failed["reason"] == "InvalidTopology" and "node 'key': mapper" in failed["message"]
    assert not cluster.applied


def test_checking_a_replay_needs_no_pyspark() -> None:
    """The operator's image has no pyspark: importing the replay's checks must not import it."""
    code = "import sys; from streamapp.replay import check_topology; print('pyspark' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_waits_for_a_missing_app_and_fails_on_a_missing_input_topic() -> None:
    world, _, kafka = replay_world()
    status = reconcile_step(world, {"appRef": {"name": "nope"}}, {})
    assert status["phase"] == "Pending" and "StreamApp nope does not exist" in status["progress"]
    del kafka.topics["flights"]
    status = reconcile_step(world, HANDOVER, {})
    assert (
        status["phase"] == "Failed" and "flights" in {c["type"]: c for c in status["conditions"]}["Failed"]["message"]
    )


def test_an_app_deleted_before_the_new_version_exists_fails_the_handover() -> None:
    world, cluster, _ = replay_world()
    status = reconcile_step(world, HANDOVER, {})
    finish_job(cluster, "Complete")
    del cluster.objects[("StreamApp", NS, "flights")]
    status = reconcile_step(world, HANDOVER, {**status, "phase": "HandingOver"})
    assert (
        status["phase"] == "Failed" and {c["type"]: c for c in status["conditions"]}["Failed"]["reason"] == "AppMissing"
    )


# -- progress of the running Spark job ------------------------------------------------------------------------


def _report(processed: int, total: int = 185, phase: str = "stages") -> str:
    return PROGRESS_PREFIX + ReplayProgress(phase, processed, total, 0, 2, 1, 4, 12.0).to_json()


def test_the_last_progress_report_is_found_among_sparks_own_log_lines() -> None:
    log = "\n".join(["WARN NativeCodeLoader: ...", _report(10), "26/11/24 WARN TaskSetManager: ...", _report(40), "x"])
    report = job_reports.latest_progress(log)
    assert report is not None and (report.records_processed, report.records_total) == (40, 185)
    assert job_reports.progress_fields(report) == {"recordsProcessed": 40, "percentProcessed": 21, "jobPhase": "stages"}
    assert job_reports.latest_progress("WARN only spark\nreplay-progress {broken") is None


def test_a_running_job_shows_its_pods_last_progress_report_in_status_and_the_progress_column() -> None:
    world, cluster, _ = replay_world()
    spec = {"appRef": {"name": "flights"}, "topology": SECOND_TOPOLOGY}
    status = reconcile_step(world, spec, {})
    add_job_pod(cluster)
    cluster.logs["flights-v2-replay-abc"] = "\n".join([_report(37), "WARN spark says something"])
    status = reconcile_step(world, spec, status)
    assert (status["recordsProcessed"], status["recordsRead"], status["percentProcessed"]) == (37, 185, 20)
    assert status["jobPhase"] == "stages"
    assert status["progress"] == "spark job running 0s, stages: 37/185 records processed (20%)"
    cluster.logs["flights-v2-replay-abc"] += "\n" + _report(185, phase="write")
    status = reconcile_step(world, spec, status)
    assert (status["recordsProcessed"], status["percentProcessed"], status["jobPhase"]) == (185, 100, "write")
    assert status["phase"] == "Running" and status["progress"].startswith("spark job running 0s, write: 185/185")


class _LoglessCluster(ReplayCluster):
    __test__ = False

    def read_pod_log(self, namespace: str, name: str, tail_lines: int = 50) -> str:
        raise KubernetesUnavailable("the kubelet does not answer")

    def list_pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        if selector.startswith("job-name="):
            raise KubernetesUnavailable("the API server is overloaded")
        return super().list_pods(namespace, selector)


def test_an_unreadable_pod_log_leaves_progress_out_and_never_fails_the_replay() -> None:
    _, _, kafka = replay_world()
    cluster = _LoglessCluster()
    cluster.add(
        {"kind": "StreamApp", "metadata": {"name": "flights", "namespace": NS, "uid": "u"}, "spec": flights_spec()}
    )
    world = ReplayWorld(cluster=cluster, kafka_for=lambda _: kafka, image="replay:1")
    spec = {"appRef": {"name": "flights"}, "topology": SECOND_TOPOLOGY}
    status = reconcile_step(world, spec, {})
    status = reconcile_step(world, spec, status)
    assert status["phase"] == "Running" and status["progress"] == "spark job running 0s"
    assert "recordsProcessed" not in status
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "Complete": "False", "Progressing": "True", "Failed": "False", "Degraded": "False"
    }  # fmt: skip


# -- SASL and TLS ---------------------------------------------------------------------------------------------

PASSWORD = {"name": "kafka-user", "key": "password"}
SASL = {"mechanism": "SCRAM-SHA-512", "username": "app", "passwordSecret": PASSWORD}
SECURE_KAFKA = {
    "bootstrapServers": "kafka:9093",
    "authentication": SASL,
    "tls": {"caSecret": {"name": "kafka-ca", "key": "ca.crt"}},
}


def test_a_sasl_tls_app_replays_with_its_credentials_from_secrets_and_no_secret_is_written() -> None:
    cluster, kafka = ReplayCluster(), ReplayKafka()
    cluster.secrets[(NS, "kafka-user")] = {"password": "s3cr3t-pw"}
    cluster.secrets[(NS, "kafka-ca")] = {"ca.crt": "-----BEGIN CERTIFICATE-----"}
    app = {"kind": "StreamApp", "metadata": {"name": "flights", "namespace": NS, "uid": "u"}}
    cluster.add({**app, "spec": flights_spec(kafka=SECURE_KAFKA)})
    connections: list[Any] = []
    world = ReplayWorld(cluster=cluster, kafka_for=lambda c: connections.append(c) or kafka, image="replay:1")
    spec = {"appRef": {"name": "flights"}, "topology": SECOND_TOPOLOGY}
    result = reconcile_replay(REPLAY, spec, {}, world, "2026-01-01T00:00:10Z")
    assert result.status["phase"] == "Running"
    # the operator's own admin client (offsets, topics) connects as the app does
    settings = connections[0].settings()
    assert (settings["sasl.password"], settings["sasl.mechanism"]) == ("s3cr3t-pw", "SCRAM-SHA-512")
    assert settings["security.protocol"] == "SASL_SSL" and settings["ssl.ca.pem"].startswith("-----BEGIN")
    config_map, job = (m for m in cluster.applied if m["kind"] in ("ConfigMap", "Job"))
    plan = yaml.safe_load(config_map["data"]["plan.yaml"])
    ca_file = "/etc/streamapp/kafka-ca/ca.crt"
    assert plan["kafka"] == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "ssl.ca.location": ca_file,
    }
    pod = job["spec"]["template"]["spec"]
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    assert env["STREAMAPP_KAFKA_SASL_USERNAME"]["value"] == "app"
    assert env["STREAMAPP_KAFKA_SASL_PASSWORD"]["valueFrom"] == {"secretKeyRef": PASSWORD}
    mounts = {m["name"]: m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert mounts["kafka-ca"] == "/etc/streamapp/kafka-ca"
    assert volumes["kafka-ca"]["secret"] == {"secretName": "kafka-ca", "items": [{"key": "ca.crt", "path": "ca.crt"}]}
    written = json.dumps([result.status, cluster.applied, cluster.replay_status_writes]) + repr(result.events)
    assert "s3cr3t-pw" not in written and "BEGIN CERTIFICATE" not in written


def test_the_executor_pods_of_a_kubernetes_mode_replay_mount_the_kafka_ca_too() -> None:
    owner = Owner("StreamReplay", "flights-v2", NS, "uid")
    spec = StreamReplaySpec.parse(
        {"appRef": {"name": "flights"}, "spark": {"mode": "kubernetes", "serviceAccountName": "spark"}}
    )
    app = StreamAppSpec.parse(flights_spec(kafka=SECURE_KAFKA))
    config_map, _ = job_manifests.job_manifests(owner, spec, _plan(), job_manifests.JobImages("img:1"), app)
    template = yaml.safe_load(config_map["data"]["executor.yaml"])["spec"]
    assert template["containers"][0]["volumeMounts"][-1] == {
        "name": "kafka-ca", "mountPath": "/etc/streamapp/kafka-ca", "readOnly": True
    }  # fmt: skip
    assert template["volumes"][-1]["secret"]["secretName"] == "kafka-ca"


# -- global tables ----------------------------------------------------------------------------------------------

GLOBAL_TOPOLOGY: dict[str, Any] = {
    "nodes": [
        {"name": "flights", "type": "source", "topics": ["flights"], "keySerde": "string", "valueSerde": "json"},
        {"name": "planes", "type": "global_table", "topic": "planes", "store": "planes-store", "keySerde": "string",
         "valueSerde": "json"},
        {"name": "enrich", "type": "stream_global_join", "inputs": ["flights", "planes"],
         "keySelector": "flights_app.logic:tailnum", "joiner": "flights_app.logic:with_plane"},
        {"name": "out", "type": "sink", "input": "enrich", "topic": "flights-with-planes", "keySerde": "string",
         "valueSerde": "json"},
    ],
    "stores": [{"name": "planes-store", "type": "key_value", "keySerde": "string", "valueSerde": "json"}],
}  # fmt: skip


def test_a_global_table_topology_replays_and_its_topics_offsets_are_resolved_too() -> None:
    world, cluster, kafka = replay_world()
    kafka.topics["planes"] = 1
    kafka.earliest["planes"], kafka.latest["planes"] = {0: 0}, {0: 30}
    status = reconcile_step(world, {"appRef": {"name": "flights"}, "topology": GLOBAL_TOPOLOGY}, {})
    assert status["phase"] == "Running", status["conditions"]
    assert status["resolvedOffsets"]["to"] == {"flights": {"0": 100, "1": 90}, "planes": {"0": 30}}
    config_map = next(m for m in cluster.applied if m["kind"] == "ConfigMap")
    plan = ReplayPlan.from_document(yaml.safe_load(config_map["data"]["plan.yaml"]))
    assert plan.start_offsets["planes"] == {0: 0} and plan.end_offsets["planes"] == {0: 30}
    plan.check()  # the engine accepts the plan: global topics have their ranges


# -- emit: every_update | final -------------------------------------------------------------------------------

#: A keyed count of a source topic: the shape the engine runs Spark-native, so ``emit: final`` may run it.
COUNT_TOPOLOGY: dict[str, Any] = {
    "nodes": [
        {"name": "flights", "type": "source", "topics": ["flights"], "keySerde": "string", "valueSerde": "json"},
        {"name": "count", "type": "count", "input": "flights", "store": "per-tail-store"},
        {"name": "changes", "type": "to_stream", "input": "count"},
        {"name": "out", "type": "sink", "input": "changes", "topic": "per-tail", "keySerde": "string",
         "valueSerde": "long"},
    ],
    "stores": [{"name": "per-tail-store", "type": "key_value", "keySerde": "string", "valueSerde": "long"}],
}  # fmt: skip


def _launched_plan(cluster: ReplayCluster) -> ReplayPlan:
    config_map = next(m for m in cluster.applied if m["kind"] == "ConfigMap")
    return ReplayPlan.from_document(yaml.safe_load(config_map["data"]["plan.yaml"])).check()


def test_emit_defaults_to_every_update_and_reaches_the_engines_plan() -> None:
    assert StreamReplaySpec.parse({"appRef": {"name": "flights"}}).emit == "every_update"
    world, cluster, _ = replay_world()
    reconcile_step(world, {"appRef": {"name": "flights"}, "topology": SECOND_TOPOLOGY}, {})
    assert _launched_plan(cluster).emit == "every_update"


def test_emit_final_of_a_spark_native_topology_reaches_the_engines_plan() -> None:
    world, cluster, _ = replay_world()
    status = reconcile_step(world, {"appRef": {"name": "flights"}, "topology": COUNT_TOPOLOGY, "emit": "final"}, {})
    assert status["phase"] == "Running", status["conditions"]
    assert _launched_plan(cluster).emit == "final"


def test_emit_final_of_a_topology_through_the_runtimes_task_reaches_the_engines_plan() -> None:
    """``final`` runs any topology (the task path flushes the runtime's own record cache once, at the end):
    SECOND_TOPOLOGY re-keys before it counts, so its first sub-topology is no Spark-native count."""
    world, cluster, _ = replay_world()
    status = reconcile_step(world, {**HANDOVER, "emit": "final"}, {})
    assert status["phase"] == "Running", status["conditions"]
    assert _launched_plan(cluster).emit == "final"


#: Run in a fresh interpreter where pyarrow, numpy and pyspark cannot be imported (the operator's image).
_WITHOUT_PYARROW = """
import sys
for name in ("pyarrow", "numpy", "pyspark"):
    sys.modules[name] = None  # import raises ImportError
import streamapp_operator.streamreplays.reconcile
print("streamapp.replay.spark.native" in sys.modules)
"""


def test_the_replay_controller_imports_without_pyarrow() -> None:
    """The operator's image has no pyarrow (it comes with the runtime's ``replay`` extra): the replay controller
    and its decisions import the engine's plain-Python modules only."""
    run = subprocess.run([sys.executable, "-c", _WITHOUT_PYARROW], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "False"


# -- the handover's policy and the Job's duration ---------------------------------------------------------------


def test_old_version_keep_hands_over_and_leaves_the_old_streamapp_running() -> None:
    world, cluster, kafka = replay_world()
    spec = {**HANDOVER, "handover": {"oldVersion": "Keep"}}
    status = reconcile_step(world, spec, {})
    finish_job(cluster)
    status = reconcile_step(world, spec, status)
    new_version_ready(cluster)
    status = reconcile_step(world, spec, status)
    assert status["phase"] == "Succeeded" and status["newVersion"] == "flights-v2"
    assert [s["name"] for s in status["handover"] if s["state"] == "Done"] == list(handover.HANDOVER_STEPS)
    assert status["handover"][-1]["message"] == "StreamApp flights kept (oldVersion: Keep)"
    old = cluster.get("StreamApp", NS, "flights")
    assert old is not None and old["metadata"]["uid"] == "app-uid"
    assert cluster.get("StreamApp", NS, "flights-v2") is not None
    assert not [entry for entry in cluster.journal if entry.startswith("delete")]
    assert kafka.group_offsets["flights-flights-v2"] == LATEST  # the new version started where the replay ended


def test_duration_seconds_is_the_jobs_time_from_its_start_while_running_and_once_done() -> None:
    world, cluster, _ = replay_world()
    spec = {"appRef": {"name": "flights"}, "topology": SECOND_TOPOLOGY}

    def at(status: dict[str, Any], now: str) -> dict[str, Any]:
        return {**status, **reconcile_replay(REPLAY, spec, status, world, now).status}

    status = at({}, "2026-01-01T00:00:10Z")
    assert status["startTime"] == "2026-01-01T00:00:10Z" and status["durationSeconds"] == 0  # the Job just made
    add_job_pod(cluster)
    status = at(status, "2026-01-01T00:00:50Z")
    assert status["durationSeconds"] == 40 and status["progress"] == "spark job running 40s"
    finish_job(cluster)
    status = at(status, "2026-01-01T00:02:05Z")
    assert status["phase"] == "Succeeded" and status["durationSeconds"] == 115
    assert status["completionTime"] == "2026-01-01T00:02:05Z"
    assert at(status, "2026-01-01T01:00:00Z")["durationSeconds"] == 115  # a finished replay's status stays
