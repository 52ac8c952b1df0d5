"""Helpers of the replay scenarios (``e2e/test_replay.py``, the end of ``make demo``): flights topologies that
count departures per key, StreamApp and StreamReplay manifests, waiting for a replay's phase with its
progress, and pandas' reference counts per key."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pandas as pd

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


def streamapp(name: str, application_id: str, topology: dict[str, Any], replicas: int = 1) -> dict[str, Any]:
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
            "config": {"commit.interval.ms": "200"},
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
) -> dict[str, Any]:
    """Wait until the StreamReplay's phase is one of ``phases`` (Failed raises, with its condition); returns
    the status. ``show`` gets each new progress line."""
    deadline = time.monotonic() + timeout_s
    last = ""
    while True:
        status = replay_status(name, namespace)
        line = f"{status.get('phase', '-')}: {status.get('progress', '')}"
        if line != last:
            show(line)
            last = line
        if status.get("phase") in phases:
            return status
        if status.get("phase") == "Failed":
            failed = next((c for c in status.get("conditions") or [] if c["type"] == "Failed"), {})
            raise RuntimeError(f"StreamReplay {name} failed: {json.dumps(failed)}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"StreamReplay {name} is not {phases} after {timeout_s:.0f}s: {json.dumps(status)}")
        time.sleep(2)


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
