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


def expected_counts(frames: list[pd.DataFrame], key: str) -> dict[str, int]:
    """Departed flights of ``frames`` per key, by pandas."""
    every = pd.concat(frames, ignore_index=True)
    departed = every[every["dep_time"].notna()]
    return {str(k): int(v) for k, v in departed.groupby(KEYS[key](departed)).size().items()}
