"""Operator benchmark (issue 11): apply -> Ready, scale-out to a stable group, the processing pause during the
scale-out and during a rolling update of 3 pods, and the changelog records each restarted pod restored;
operator-driven (one pod at a time, ADR 0009) against the plain StatefulSet rollout, in one run on the local stack.

Run: ``hack/bin/uv run --frozen python -m bench.operator`` (stack up, operator installed). Per mode, a counting
app (``e2e.operations.counting_app``, ``exactly_once_v2``) under a steady load of ~100 records/s over 6
partitions is applied with 1 replica, scaled out to 3, then rolled:

- ``operator``: a ``spec.config`` change; the operator hands the pods over one at a time;
- ``statefulset``: the app is paused (``streamapp.io/paused``) and the StatefulSet's pod template is patched
  directly, so the StatefulSet controller rolls at its own pace (the next pod once the previous one is Ready).

The pause is measured on the output topic, created with ``message.timestamp.type=LogAppendTime`` (the broker's
append time is when the app's transaction wrote the record): the gaps between consecutive records of each
key within the rollout window (a key's records come from one input partition, one task), as p50/p99/max in
seconds (the same over the scale-out window); with 30 keys at ~100 records/s the gap without any pause is ~0.3 s.
Restored records: each pod's ``/status`` after the rollout (records its threads restored since the process
started). Prints one JSON line per mode and ``uptime``.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import time
import uuid
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from e2e import cluster, operations

REPLICAS = 3


def _create_topics(name: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.stack_env()["KAFKA_BOOTSTRAP"]})
    topics = [
        NewTopic(f"{name}-in", operations.PARTITIONS, 1),
        NewTopic(f"{name}-out", operations.PARTITIONS, 1, config={"message.timestamp.type": "LogAppendTime"}),
    ]
    for future in admin.create_topics(topics).values():
        future.result(30)


def _status(namespace: str, name: str) -> dict[str, Any]:
    return dict(cluster.get_json("streamapp", name, namespace).get("status") or {})


def _timed(condition: Any, timeout_s: float, what: str) -> float:
    started = time.monotonic()
    cluster.wait_until(condition, timeout_s, what, interval_s=0.5)
    return time.monotonic() - started


def _rolled(namespace: str, name: str) -> bool:
    sts = cluster.get_json("statefulset", name, namespace)
    status = sts.get("status") or {}
    return bool(
        status.get("observedGeneration") == sts["metadata"]["generation"]
        and status.get("updatedReplicas") == REPLICAS
        and status.get("currentRevision") == status.get("updateRevision")
        and status.get("readyReplicas") == REPLICAS
    )


def _gaps(topic: str, start_ms: int, end_ms: int) -> list[float]:
    """Seconds between consecutive output records of each key appended within ``[start_ms, end_ms]`` (a key's
    records come from one input partition, so a paused task shows as a gap of its keys)."""
    consumer = Consumer({"bootstrap.servers": cluster.stack_env()["KAFKA_BOOTSTRAP"],
                         "group.id": f"bench-{uuid.uuid4().hex[:6]}", "isolation.level": "read_committed",
                         "enable.auto.commit": False})  # fmt: skip
    stamps: dict[bytes, list[int]] = {}
    try:
        parts = [TopicPartition(topic, p, start_ms) for p in range(operations.PARTITIONS)]
        consumer.assign(consumer.offsets_for_times(parts, timeout=10))
        idle = 0
        while idle < 6:
            messages = consumer.consume(1000, timeout=0.5)
            idle = idle + 1 if not messages else 0
            for message in messages:
                stamp, key = message.timestamp()[1], message.key()
                if message.error() is None and key is not None and start_ms <= stamp <= end_ms:
                    stamps.setdefault(key, []).append(stamp)
    finally:
        consumer.close()
    gaps = []
    for values in stamps.values():
        values.sort()
        gaps += [(b - a) / 1000 for a, b in itertools.pairwise(values)]
    return sorted(gaps)


def _quantile(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def run_mode(mode: str) -> dict[str, Any]:
    namespace = cluster.create_namespace(f"bench-op-{mode[:3]}")
    name = f"bop-{uuid.uuid4().hex[:6]}"
    _create_topics(name)
    try:
        load = operations.Load(f"{name}-in")
        load.produce(3000)
        with load:
            cluster.apply(operations.counting_app(name, 1, processingGuarantee="exactly_once_v2"), namespace)
            ready = _timed(lambda: operations.ready_replicas_are(namespace, name, 1), 240, "1 pod ready")
            scale_start_ms = int(time.time() * 1000)
            cluster.kubectl("scale", "streamapp", name, "-n", namespace, f"--replicas={REPLICAS}")
            scale_out = _timed(
                lambda: (
                    operations.ready_replicas_are(namespace, name, REPLICAS)
                    and _status(namespace, name).get("consumerGroupState") == "Stable"
                ),
                240,
                "3 pods in a stable group",
            )
            start_ms = int(time.time() * 1000)
            patch: dict[str, Any]
            if mode == "operator":
                patch = {"spec": {"config": {"commit.interval.ms": "200"}}}
                cluster.kubectl("patch", "streamapp", name, "-n", namespace, "--type=merge", "-p", json.dumps(patch))
            else:
                cluster.kubectl("annotate", "streamapp", name, "-n", namespace, "streamapp.io/paused=true")
                time.sleep(2)
                patch = {"spec": {"template": {"metadata": {"annotations": {"bench/roll": str(start_ms)}}}}}
                cluster.kubectl("patch", "statefulset", name, "-n", namespace, "--type=merge", "-p", json.dumps(patch))
            time.sleep(5)
            rollout = 5 + _timed(lambda: _rolled(namespace, name), 420, "the rollout")
            end_ms = int(time.time() * 1000)
            restored = operations.restored_per_pod(namespace, name)
            time.sleep(3)
        gaps = _gaps(f"{name}-out", start_ms, end_ms)  # read once the load stopped: the topic goes idle
        scale_gaps = _gaps(f"{name}-out", scale_start_ms, start_ms)
        return {
            "mode": mode,
            "apply_to_ready_s": round(ready, 1),
            "scale_out_to_stable_s": round(scale_out, 1),
            "rollout_s": round(rollout, 1),
            "pause_p50_s": round(_quantile(gaps, 0.5), 3),
            "pause_p99_s": round(_quantile(gaps, 0.99), 3),
            "pause_max_s": round(max(gaps, default=float("nan")), 3),
            "gaps": len(gaps),
            "scale_out_pause_p50_s": round(_quantile(scale_gaps, 0.5), 3),
            "scale_out_pause_p99_s": round(_quantile(scale_gaps, 0.99), 3),
            "scale_out_pause_max_s": round(max(scale_gaps, default=float("nan")), 3),
            "restored_records_per_restarted_pod": restored,
        }
    finally:
        cluster.kubectl("annotate", "streamapp", name, "-n", namespace, "streamapp.io/paused-", check=False)
        cluster.delete_namespace(namespace)
        cluster.delete_topics(name)


def main() -> None:
    print(subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip())
    for mode in ("operator", "statefulset"):
        print(json.dumps(run_mode(mode)), flush=True)
    print(subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip())


if __name__ == "__main__":
    main()
