"""Hand-written fakes and helpers of the StreamReplay controller's tests: the cluster (status patches, pod logs)
and Kafka (offsets, committed offsets, done markers) behind the controller's seams, a StreamApp ``flights`` to
replay, and one reconcile at a time."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from typing import Any

from operator_fakes import TestingCluster, TestingKafka, flights_spec
from streamapp_operator.kafka import TopicSpec
from streamapp_operator.streamreplays.reconcile import Replay, ReplayWorld, reconcile_replay

NS = "replays"
EARLIEST = {"flights": {0: 0, 1: 5}}
LATEST = {"flights": {0: 100, 1: 90}}

SECOND_TOPOLOGY: dict[str, Any] = {
    "nodes": [
        {"name": "flights", "type": "source", "topics": ["flights"], "keySerde": "string", "valueSerde": "json"},
        {"name": "key", "type": "select_key", "input": "flights", "mapper": "flights_app.logic:carrier"},
        {"name": "by-key", "type": "repartition", "input": "key", "keySerde": "string", "valueSerde": "json"},
        {"name": "count", "type": "count", "input": "by-key", "store": "per-key-store"},
        {"name": "changes", "type": "to_stream", "input": "count"},
        {
            "name": "out",
            "type": "sink",
            "input": "changes",
            "topic": "per-key",
            "keySerde": "string",
            "valueSerde": "long",
        },
    ],
    "stores": [{"name": "per-key-store", "type": "key_value", "keySerde": "string", "valueSerde": "long"}],
}


# -- offset ranges -------------------------------------------------------------------------------------------


class ReplayCluster(TestingCluster):
    __test__ = False

    def __init__(self) -> None:
        super().__init__()
        self.replay_status_writes: list[dict[str, Any]] = []
        self.logs: dict[str, str] = {}

    def patch_replay_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        self.replay_status_writes.append(copy.deepcopy(status))
        self.journal.append("replay status")

    def read_pod_log(self, namespace: str, name: str, tail_lines: int = 50) -> str:
        return self.logs.get(name, "")

    def scale_streamapp(self, namespace: str, name: str, replicas: int) -> None:
        """The /scale subresource: only spec.replicas changes."""
        self.objects[("StreamApp", namespace, name)]["spec"]["replicas"] = replicas
        self.journal.append(f"scale StreamApp {name} {replicas}")


class ReplayKafka(TestingKafka):
    __test__ = False

    def __init__(self) -> None:
        super().__init__({"flights": 2})
        self.earliest, self.latest = copy.deepcopy(EARLIEST), copy.deepcopy(LATEST)
        self.group_offsets: dict[str, dict[str, dict[int, int]]] = {}
        self.values: dict[str, list[bytes]] = {}
        #: topics created but not yet in the broker's metadata (KRaft: the metadata cache lags the controller)
        self.unseen: set[str] = set()
        self.metadata_lag = False

    def create_topics(self, topics: Sequence[TopicSpec], replication_factor: int) -> list[str]:
        created = super().create_topics(topics, replication_factor)
        self.unseen |= set(created) if self.metadata_lag else set()
        return created

    def partition_counts(self, topics: Iterable[str]) -> dict[str, int]:
        return {t: n for t, n in super().partition_counts(topics).items() if t not in self.unseen}

    def list_offsets(self, partitions: dict[str, int], at: str | int) -> dict[str, dict[int, int]]:
        offsets = self.earliest if at == "earliest" else self.latest
        return {topic: dict(offsets[topic]) for topic in partitions}

    def set_group_offsets(self, group_id: str, offsets: Any) -> None:
        self.group_offsets[group_id] = {t: dict(p) for t, p in offsets.items()}

    def committed_offsets(self, group_id: str, partitions: dict[str, int]) -> dict[str, dict[int, int]]:
        return copy.deepcopy(self.group_offsets.get(group_id, {}))

    def read_committed_values(self, topic: str, timeout: float = 20.0) -> list[bytes]:
        return list(self.values.get(topic, []))


def replay_world() -> tuple[ReplayWorld, ReplayCluster, ReplayKafka]:
    cluster, kafka = ReplayCluster(), ReplayKafka()
    cluster.add(
        {
            "kind": "StreamApp",
            "metadata": {"name": "flights", "namespace": NS, "uid": "app-uid"},
            "spec": flights_spec(),
        }
    )
    return ReplayWorld(cluster=cluster, kafka_for=lambda _: kafka, image="replay:1"), cluster, kafka


REPLAY = Replay("flights-v2", NS, "0123456789ab", 1)
HANDOVER = {"appRef": {"name": "flights"}, "mode": "handover", "topology": SECOND_TOPOLOGY}


def reconcile_step(
    world: ReplayWorld, spec: dict[str, Any], status: dict[str, Any], replay: Replay = REPLAY
) -> dict[str, Any]:
    result = reconcile_replay(replay, spec, status, world, "2026-01-01T00:00:10Z")
    return {**status, **result.status}


def add_job_pod(
    cluster: ReplayCluster, name: str = "flights-v2-replay-abc", status: dict[str, Any] | None = None
) -> None:
    """The pod the Job controller makes for the replay's Job (labelled ``job-name``, owned by the Job), by default
    started (``status``: what the kubelet reports)."""
    cluster.add_pod(NS, name, {"job-name": "flights-v2-replay"}, {"phase": "Running"} if status is None else status)
    job = cluster.objects[("Job", NS, "flights-v2-replay")]
    cluster.objects[("Pod", NS, name)]["metadata"]["ownerReferences"] = [
        {"kind": "Job", "name": "flights-v2-replay", "uid": job["metadata"]["uid"], "controller": True}
    ]


def finish_job(cluster: ReplayCluster, outcome: str = "Complete") -> None:
    cluster.set_status("Job", NS, "flights-v2-replay", {"conditions": [{"type": outcome, "status": "True"}]})
    add_job_pod(cluster)
    cluster.logs["flights-v2-replay-abc"] = (
        '{"records_read": {"flights": 180}, "records_written": {"per-key": 7}, "seconds": {}}'
        if outcome == "Complete"
        else "Traceback...\nValueError: boom"
    )


def new_version_ready(cluster: ReplayCluster, name: str = "flights-v2") -> None:
    """The handover's new version reports Ready and caught up (lag 0), as its operator would."""
    ready = {"conditions": [{"type": "Ready", "status": "True"}], "lag": 0, "readyReplicas": 1}
    cluster.set_status("StreamApp", NS, name, ready)


def fail_job_by_policy(cluster: ReplayCluster, exit_code: int) -> None:
    """The Job controller's verdict when the replay container's exit code matches the pod failure policy."""
    message = (
        f"Container replay for pod {NS}/flights-v2-replay-abc failed with exit code {exit_code} "
        "matching FailJob rule at index 0"
    )
    failed = {"type": "Failed", "status": "True", "reason": "PodFailurePolicy", "message": message}
    cluster.set_status("Job", NS, "flights-v2-replay", {"conditions": [failed]})
