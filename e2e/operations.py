"""Helpers of the operations scenarios (issue 11): a counting app under load, and watchers of its pods, its
consumer group and its pods' ``/status``.

Everything runs against the real stack: the producer and the reader are real Kafka clients, the pods are real
processes of the node agent (their IPs answer on the host), the group is described by the broker.
"""

from __future__ import annotations

import contextlib
import functools
import json
import struct
import threading
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from e2e import cluster

KEYS = 30
PARTITIONS = 6


def counting_app(name: str, replicas: int, **spec: Any) -> dict[str, Any]:
    """A StreamApp counting the records per key of ``<name>-in`` into the store ``counts`` and writing every
    new count to ``<name>-out`` (string keys, long values): no user code, so the image runs it as is."""
    manifest = cluster.passthrough_app(name, f"{name}-in", f"{name}-out", replicas=replicas, **spec)
    manifest["spec"]["topology"] = {
        "nodes": [
            {"name": "in", "type": "source", "topics": [f"{name}-in"], "keySerde": "string", "valueSerde": "json"},
            {"name": "count", "type": "count", "input": "in", "store": "counts"},
            {"name": "changes", "type": "to_stream", "input": "count"},
            {"name": "out", "type": "sink", "input": "changes", "topic": f"{name}-out", "keySerde": "string",
             "valueSerde": "long"},
        ],
        "stores": [{"name": "counts", "type": "key_value", "keySerde": "string", "valueSerde": "long"}],
    }  # fmt: skip
    return manifest


class Load:
    """Produces JSON records to ``topic`` over ``KEYS`` keys at about ``rate`` records/s in a thread, and counts
    what was acknowledged per key (the expected final counts)."""

    def __init__(self, topic: str, rate: float = 100.0) -> None:
        self.topic, self.rate = topic, rate
        self.sent: Counter[str] = Counter()
        self._stop = threading.Event()
        self._producer = Producer({"bootstrap.servers": cluster.stack_env()["KAFKA_BOOTSTRAP"],
                                   "enable.idempotence": True, "linger.ms": 5})  # fmt: skip
        self._thread = threading.Thread(target=self._run, daemon=True)

    def produce(self, count: int) -> None:
        """``count`` records at once (before the app starts, for state to restore)."""
        for i in range(count):
            self._send(f"k{i % KEYS}", i)
        assert self._producer.flush(30) == 0

    def _send(self, key: str, n: int) -> None:
        def acked(err: Any, _msg: Any, key: str = key) -> None:
            if err is None:
                self.sent[key] += 1

        self._producer.produce(self.topic, json.dumps({"n": n}).encode(), key.encode(), on_delivery=acked)
        self._producer.poll(0)

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            self._send(f"k{n % KEYS}", n)
            n += 1
            time.sleep(1 / self.rate)

    def __enter__(self) -> Load:
        self._thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self._stop.set()
        self._thread.join(10)
        assert self._producer.flush(30) == 0


def latest_counts(topic: str, expected: Counter[str], timeout_s: float = 120) -> dict[str, int]:
    """The latest count per key on ``topic`` (``read_committed``), read until it equals ``expected`` or the
    timeout, then 3 s more (a later, higher count is a duplicate)."""
    consumer = Consumer({"bootstrap.servers": cluster.stack_env()["KAFKA_BOOTSTRAP"],
                         "group.id": f"probe-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed"})  # fmt: skip
    consumer.subscribe([topic])
    latest: dict[str, int] = {}
    deadline, settle = time.monotonic() + timeout_s, None
    try:
        while time.monotonic() < deadline and (settle is None or time.monotonic() < settle):
            for message in consumer.consume(500, timeout=0.5):
                key, value = message.key(), message.value()
                if message.error() is None and key is not None and value is not None:
                    latest[key.decode()] = struct.unpack(">q", value)[0]
            if settle is None and latest == dict(expected):
                settle = time.monotonic() + 3
    finally:
        consumer.close()
    return latest


def pod_status(pod: dict[str, Any]) -> dict[str, Any] | None:
    """The pod's ``/status`` document (None when it does not answer)."""
    ip = (pod.get("status") or {}).get("podIP")
    if not ip:
        return None
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"http://{ip}:8080/status", timeout=2) as response:
            document: dict[str, Any] = json.loads(response.read())
            return document
    except (OSError, ValueError):
        return None


def pod_http(pod: dict[str, Any], path: str, body: dict[str, Any] | None = None) -> Any:
    """The JSON answer of the pod's HTTP server (port 8080) to ``GET path``, or ``POST path`` with ``body``; raises
    OSError (``urllib.error.HTTPError`` naming the status) when it does not answer 200."""
    ip = pod["status"]["podIP"]
    data = None if body is None else json.dumps(body).encode()
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(urllib.request.Request(f"http://{ip}:8080{path}", data=data), timeout=10) as response:
        return json.loads(response.read())


def restored_records(document: dict[str, Any]) -> int:
    """Changelog records the pod restored since its process started (``restore_records_total`` of its threads)."""
    workers = document.get("workers") or []
    return sum(int((w.get("metrics") or {}).get("restore_records_total", 0)) for w in workers)


def restored_per_pod(namespace: str, name: str) -> list[int]:
    """``restored_records`` of each of the app's pods whose ``/status`` answers."""
    documents = [pod_status(p) for p in pods(namespace, name)]
    return [restored_records(d) for d in documents if d is not None]


def describe(namespace: str, name: str) -> Callable[[], str]:
    """The StreamApp's status as text, for a timeout's message."""
    return lambda: str(cluster.get_json("streamapp", name, namespace).get("status"))


def wait_settled(namespace: str, name: str, replicas: int, timeout_s: float = 240) -> None:
    """Until every replica is ready and the lag 0 (no load running)."""
    settled = functools.partial(cluster.streamapp_settled, name, replicas, namespace)
    cluster.wait_until(settled, timeout_s, f"{replicas} pods of {name} settled", describe=describe(namespace, name))


def ready_replicas_are(namespace: str, name: str, replicas: int) -> bool:
    """Whether the StreamApp's status counts ``replicas`` ready pods (under load: the lag need not be 0)."""
    return (cluster.get_json("streamapp", name, namespace).get("status") or {}).get("readyReplicas") == replicas


def pods(namespace: str, name: str) -> list[dict[str, Any]]:
    selector = f"app.kubernetes.io/instance={name}"
    return list(json.loads(cluster.kubectl("get", "pods", "-n", namespace, "-l", selector, "-o", "json"))["items"])


def ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return not pod["metadata"].get("deletionTimestamp") and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in conditions
    )


@dataclass
class Watch:
    """What the watcher saw: the most pods down at once (missing, terminating or not ready), the pod uids seen per
    name (a new uid is a replacement), and the assignment changes of each group member (by ``group.instance.id``)."""

    most_down: int = 0
    uids: dict[str, list[str]] = field(default_factory=dict)
    replaced_order: list[str] = field(default_factory=list)
    assignment_changes: Counter[str] = field(default_factory=Counter)
    #: assignment changes of members whose pod was Ready, with the same uid, in this sample and the one before:
    #: a rebalance that moved a surviving pod's partitions
    survivor_changes: Counter[str] = field(default_factory=Counter)
    states: list[str] = field(default_factory=list)
    samples: int = 0


@contextmanager
def watching(namespace: str, name: str, replicas: int, interval_s: float = 0.5) -> Iterator[Watch]:
    """Sample the app's pods and consumer group every ``interval_s`` while the block runs."""
    watch, stop = Watch(), threading.Event()
    admin = AdminClient({"bootstrap.servers": cluster.stack_env()["KAFKA_BOOTSTRAP"]})
    assignments: dict[str, frozenset[str]] = {}
    was_up: dict[str, str] = {}  # pod name -> uid of the pods Ready in the previous sample

    def sample() -> None:
        found = {p["metadata"]["name"]: p for p in pods(namespace, name)}
        up = {pod_name: pod["metadata"]["uid"] for pod_name, pod in found.items() if ready(pod)}
        down = sum(1 for i in range(replicas) if not ready(found.get(f"{name}-{i}", {"metadata": {}})))
        watch.most_down = max(watch.most_down, down)
        for pod_name, pod in found.items():
            uids = watch.uids.setdefault(pod_name, [])
            if pod["metadata"]["uid"] not in uids:
                uids.append(pod["metadata"]["uid"])
                if len(uids) > 1:
                    watch.replaced_order.append(pod_name)
        group = admin.describe_consumer_groups([name])[name].result(10)
        state = group.state.name
        if not watch.states or watch.states[-1] != state:
            watch.states.append(state)
        for member in group.members:
            owned = frozenset(f"{tp.topic}-{tp.partition}" for tp in member.assignment.topic_partitions)
            key = member.group_instance_id or member.member_id
            if key in assignments and assignments[key] != owned:
                watch.assignment_changes[key] += 1
                pod_name = key.rsplit("-", 1)[0]  # group.instance.id is <pod>-<thread>
                if pod_name in up and was_up.get(pod_name) == up[pod_name]:
                    watch.survivor_changes[key] += 1
            assignments[key] = owned
        was_up.clear()
        was_up.update(up)
        watch.samples += 1

    def run() -> None:
        while not stop.is_set():
            with contextlib.suppress(Exception):  # a transient API or broker error: the next sample counts
                sample()
            stop.wait(interval_s)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield watch
    finally:
        stop.set()
        thread.join(10)
