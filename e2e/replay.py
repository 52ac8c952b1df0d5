"""Helpers of the replay scenarios (``e2e/test_replay.py``, the end of ``make demo``): flights topologies that
count departures per key, StreamApp and StreamReplay manifests, waiting for a replay's phase with its
progress, and pandas' reference counts per key."""

from __future__ import annotations

import json
import struct
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd
from confluent_kafka import Consumer

from e2e import cluster

KEYS: dict[str, Callable[[pd.DataFrame], pd.Series]] = {
    "flights_app.logic:carrier": lambda frame: frame["carrier"],
    "flights_app.logic:carrier_and_origin": lambda frame: frame["carrier"] + "/" + frame["origin"],
}


def counting_topology(source: str, sink: str, key: str, name: str) -> dict[str, Any]:
    """Departed flights of ``source`` counted per ``key`` (a ``flights_app.logic`` function), to ``sink``."""
    return {
        "nodes": [
            {"name": "flights", "type": "source", "topics": [source], "keySerde": "string", "valueSerde": "json"},
            {"name": "departed", "type": "filter", "input": "flights", "predicate": "flights_app.logic:is_departed"},
            {"name": "rekey", "type": "select_key", "input": "departed", "mapper": key},
            {"name": f"{name}", "type": "repartition", "input": "rekey", "keySerde": "string", "valueSerde": "json"},
            {"name": "count", "type": "count", "input": name, "store": f"{name}-store"},
            {"name": "changes", "type": "to_stream", "input": "count"},
            {"name": "out", "type": "sink", "input": "changes", "topic": sink, "keySerde": "string",
             "valueSerde": "long"},
        ],
        "stores": [{"name": f"{name}-store", "type": "key_value", "keySerde": "string", "valueSerde": "long"}],
    }  # fmt: skip


def streamapp(
    name: str, application_id: str, topology: dict[str, Any], replicas: int = 1, config: dict[str, str] | None = None
) -> dict[str, Any]:
    """A StreamApp of the flights image (``config``: more Kafka Streams settings, e.g. the record cache's)."""
    return {
        "apiVersion": "streamapp.io/v1alpha1",
        "kind": "StreamApp",
        "metadata": {"name": name},
        "spec": {
            "image": "localhost/streamapp:dev",
            "imagePullPolicy": "Never",
            "applicationId": application_id,
            "replicas": replicas,
            "threads": 1,
            "kafka": {"bootstrapServers": cluster.stack_env()["KAFKA_BOOTSTRAP"]},
            "topology": topology,
            "config": {"commit.interval.ms": "200", **(config or {})},
        },
    }


def streamreplay(name: str, app: str, mode: str, topology: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"appRef": {"name": app}, "mode": mode, **spec}
    if topology is not None:
        body["topology"] = topology
    return {"apiVersion": "streamapp.io/v1alpha1", "kind": "StreamReplay", "metadata": {"name": name}, "spec": body}


def replay_status(name: str, namespace: str) -> dict[str, Any]:
    status: dict[str, Any] = cluster.get_json("streamreplay", name, namespace).get("status") or {}
    return status


def wait_phase(
    name: str,
    namespace: str,
    phases: tuple[str, ...],
    timeout_s: float = 600,
    show: Callable[[str], None] = lambda line: None,
    observe: Callable[[dict[str, Any]], None] = lambda status: None,
    interval_s: float = 2,
) -> dict[str, Any]:
    """Wait until the StreamReplay's phase is one of ``phases`` (Failed raises, with its condition); returns
    the status. ``show`` gets each new progress line, ``observe`` every status read (every ``interval_s``)."""
    deadline = time.monotonic() + timeout_s
    last = ""
    while True:
        status = replay_status(name, namespace)
        observe(status)
        line = f"{status.get('phase', '-')}: {status.get('progress', '')}"
        if line != last:
            show(line)
            last = line
        if status.get("phase") in phases:
            return status
        if status.get("phase") == "Failed":
            failed: dict[str, Any] = next((c for c in status.get("conditions") or [] if c["type"] == "Failed"), {})
            raise RuntimeError(f"StreamReplay {name} failed: {json.dumps(failed)}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"StreamReplay {name} is not {phases} after {timeout_s:.0f}s: {json.dumps(status)}")
        time.sleep(interval_s)


HANDOVER_STEPS = ("setGroupOffsets", "createNewVersion", "awaitCaughtUp", "removeOldVersion")
"""The handover's steps in the controller's order (docs/replay.md, ``hand_over``)."""


def handover_position(steps: Sequence[dict[str, Any]]) -> tuple[int, int]:
    """Where a ``status.handover`` is: ``(steps Done, 1 if the next step is Started else 0)``, which only grows
    while a handover goes forward. AssertionError unless the steps are a prefix of ``HANDOVER_STEPS`` and every
    step but the last is Done (each is recorded Started before it acts, Done after)."""
    names, states = [step["name"] for step in steps], [step["state"] for step in steps]
    assert names == list(HANDOVER_STEPS[: len(names)]), f"handover steps out of order: {steps}"
    assert set(states[:-1]) <= {"Done"} and set(states[-1:]) <= {"Started", "Done"}, f"a step not done: {steps}"
    done = states.count("Done")
    return done, len(states) - done


def assert_never_went_back(observed: Sequence[Sequence[dict[str, Any]]]) -> None:
    """The handover positions of ``observed`` (``status.handover`` as read over time) never decrease."""
    positions = [handover_position(steps) for steps in observed]
    assert positions == sorted(positions), f"the handover went back: {positions}"


OPERATOR_NAMESPACE, OPERATOR_SELECTOR = "streamapp-system", "app.kubernetes.io/name=streamapp-operator"


def restart_operator(timeout_s: float = 120) -> str:
    """Delete the operator's pod and wait until its Deployment runs another; returns the new pod's
    ``creationTimestamp``."""

    def live() -> dict[str, str]:
        listed = cluster.kubectl("get", "pods", "-n", OPERATOR_NAMESPACE, "-l", OPERATOR_SELECTOR, "-o", "json")
        pods = [pod["metadata"] for pod in json.loads(listed)["items"]]
        return {pod["name"]: pod["creationTimestamp"] for pod in pods if not pod.get("deletionTimestamp")}

    (deleted,) = live()
    cluster.kubectl("delete", "pod", deleted, "-n", OPERATOR_NAMESPACE, "--wait=false")
    cluster.wait_until(lambda: bool(set(live()) - {deleted}), timeout_s, "a new operator pod")
    (created,) = (stamp for name, stamp in live().items() if name != deleted)
    return created


def count_sequences(
    topic: str, records: int, timeout_s: float = 120, key_text: Callable[[bytes], str] = bytes.decode
) -> dict[str, list[int]]:
    """Every count (``long``) on ``topic`` per key (``key_text`` of its bytes, default a string key), in offset
    order (a key's records are in one partition), read with ``read_committed`` until ``records`` arrived or the
    timeout, then 3 s more: a record beyond them is a duplicate."""
    consumer = Consumer({"bootstrap.servers": cluster.stack_env()["KAFKA_BOOTSTRAP"],
                         "group.id": f"sequences-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed", "enable.auto.commit": False})  # fmt: skip
    consumer.subscribe([topic])
    sequences: dict[str, list[int]] = {}
    deadline, settle = time.monotonic() + timeout_s, None
    try:
        while time.monotonic() < deadline and (settle is None or time.monotonic() < settle):
            for message in consumer.consume(1_000, timeout=0.5):
                key, value = message.key(), message.value()
                assert message.error() is None and key is not None and value is not None, (key, value)
                sequences.setdefault(key_text(key), []).append(struct.unpack(">q", value)[0])
            if settle is None and sum(map(len, sequences.values())) >= records:
                settle = time.monotonic() + 3
    finally:
        consumer.close()
    return sequences


def running_counts(expected: dict[str, int]) -> dict[str, list[int]]:
    """A keyed running count's every update with the record cache off: ``1..n`` per key."""
    return {key: list(range(1, n + 1)) for key, n in expected.items()}


def counts_while_running(
    app: str, namespace: str, topic: str, expected: dict[str, int], timeout_s: float = 120
) -> dict[str, int]:
    """Wait until the last count per key on ``topic`` (read_committed) equals ``expected``, read while StreamApp
    ``app`` still runs: each read is followed by a look at the StreamApp, and one that is gone or being deleted
    before the counts match raises AssertionError (what it wrote up to then is not all it should have)."""
    from e2e import flights

    bootstrap = cluster.stack_env()["KAFKA_BOOTSTRAP"]
    deadline = time.monotonic() + timeout_s
    while True:
        found = flights.read_counts(bootstrap, topic)
        listed = cluster.kubectl("get", "streamapp", app, "-n", namespace, "--ignore-not-found", "-o", "json")
        running = bool(listed.strip()) and not json.loads(listed)["metadata"].get("deletionTimestamp")
        if found == expected and running:
            return found
        if not running:
            raise AssertionError(f"StreamApp {app} was removed before {topic} reached pandas' counts: "
                                 f"read {found}, pandas {expected}")  # fmt: skip
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic} is not pandas' counts after {timeout_s:.0f}s: read {found}, pandas {expected}")
        time.sleep(1)


def expected_counts(frames: list[pd.DataFrame], key: str) -> dict[str, int]:
    """Departed flights of ``frames`` per key, by pandas."""
    every = pd.concat(frames, ignore_index=True)
    departed = every[every["dep_time"].notna()]
    return {str(k): int(v) for k, v in departed.groupby(KEYS[key](departed)).size().items()}


# --- the end of `make demo`: a handover to a second topology ---------------------------------------------------

DEMO_REPLAY = "flights-per-carrier-origin"
DEMO_OUTPUT = "departures-per-carrier-origin"


def reset_demo(namespace: str, timeout_s: float = 180) -> None:
    """Remove what an earlier demo's replay left: the StreamReplay, the new version, its topics and group."""
    from e2e import flights

    cluster.kubectl("delete", "streamreplay", DEMO_REPLAY, "-n", namespace, "--ignore-not-found", "--wait=true")
    cluster.kubectl("delete", "streamapp", DEMO_REPLAY, "-n", namespace, "--ignore-not-found", "--wait=true")
    cluster.wait_until(
        lambda: (
            not cluster.kubectl(
                "get", "pods", "-n", namespace, "-l", f"app.kubernetes.io/instance={DEMO_REPLAY}", "-o", "name"
            ).strip()
        ),
        timeout_s,
        f"the pods of {DEMO_REPLAY} to terminate",
    )
    claims = cluster.kubectl("get", "pvc", "-n", namespace, "-o", "name").split()
    mine = [c for c in claims if c.startswith(f"persistentvolumeclaim/state-{DEMO_REPLAY}-")]
    if mine:
        cluster.kubectl("delete", "-n", namespace, "--wait=true", *mine)
    flights.delete_app_data(cluster.stack_env()["KAFKA_BOOTSTRAP"], DEMO_REPLAY, [DEMO_OUTPUT], timeout_s)


def comparison_table(actual: dict[str, int], expected: dict[str, int], what: str) -> str:
    rows = [f"{what:<10}{'new version':>13}{'pandas':>10}  match"]
    for key in sorted(set(actual) | set(expected)):
        a, e = actual.get(key), expected.get(key)
        rows.append(f"{key:<10}{a if a is not None else '-':>13}{e if e is not None else '-':>10}  {a == e}")
    rows.append(f"{'total':<10}{sum(actual.values()):>13}{sum(expected.values()):>10}  {actual == expected}")
    return "\n".join(rows)


def demo_handover(app: str, namespace: str, timeout_s: float) -> bool:
    """Hand the running flights app over to a second topology (departures per carrier and origin) through a
    StreamReplay, with its progress; print the new version's counts next to pandas'. True when they match."""
    from e2e import flights

    topology = counting_topology(flights.INPUT_TOPIC, DEMO_OUTPUT, "flights_app.logic:carrier_and_origin", "by-co")
    manifest = streamreplay(DEMO_REPLAY, app, "handover", topology, applicationId=DEMO_REPLAY)
    print(f"\nReplay: {DEMO_REPLAY} hands {app} over to a new version counting per carrier and origin")
    cluster.apply(manifest, namespace)
    status = wait_phase(DEMO_REPLAY, namespace, ("Succeeded",), timeout_s, show=lambda line: print(f"  {line}"))
    print(
        f"  read {status['recordsRead']} records, wrote {status['recordsWritten']} (output and state) "
        f"in {status['durationSeconds']}s of Spark; handover: " + ", ".join(step["name"] for step in status["handover"])
    )
    cluster.wait_until(lambda: cluster.streamapp_settled(DEMO_REPLAY, 2, namespace), timeout_s, "the new version")
    print(cluster.kubectl("get", "streamreplays,streamapps", "-n", namespace), end="")
    expected = expected_counts([flights.load_flights(0)], "flights_app.logic:carrier_and_origin")
    actual = flights.read_counts(cluster.stack_env()["KAFKA_BOOTSTRAP"], DEMO_OUTPUT)
    print(comparison_table(actual, expected, "carrier/origin"))
    return actual == expected
