"""Run real StreamApp instances (``streamapp run`` processes) against the real local broker.

``StreamAppInstance`` writes a topology and a config file, starts ``streamapp run`` as a subprocess
(worker processes and all), polls its HTTP endpoints and stops it with SIGTERM like a kubelet would.
``KafkaTestClient`` creates uniquely named topics, produces records and reads topics to their end.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

HERE = Path(__file__).resolve().parent
STREAMAPP = Path(sys.executable).parent / "streamapp"


STACK_ENV_FILE = HERE.parents[2] / ".cache" / "run" / "env"


def stack_env() -> dict[str, str]:
    """The ``export NAME=value`` lines ``hack/stack/up.sh`` writes into ``.cache/run/env`` (empty when the stack
    never ran)."""
    if not STACK_ENV_FILE.exists():
        return {}
    lines = (line.strip().removeprefix("export ") for line in STACK_ENV_FILE.read_text().splitlines())
    return {k: v.strip("'\"") for k, _, v in (line.partition("=") for line in lines if "=" in line)}


def broker_version() -> tuple[int, int] | None:
    """(major, minor) of the stack's Kafka broker: ``KAFKA_BROKER_VERSION`` from the environment (a shell that
    sourced a broker's env file), else from the stack's env file (``hack/stack/up.sh`` writes it); None when
    neither names one (a stack started before the variable existed)."""
    version = os.environ.get("KAFKA_BROKER_VERSION") or stack_env().get("KAFKA_BROKER_VERSION", "")
    match = re.match(r"(\d+)\.(\d+)", version)
    return (int(match.group(1)), int(match.group(2))) if match else None


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def app_config(kafka: KafkaTestClient, application_id: str, workdir: Path) -> dict[str, Any]:
    """The config of an instance of ``application_id`` on ``kafka``: 200 ms commits, state under ``workdir``, Kafka's
    other defaults (the record cache on)."""
    return {
        "application.id": application_id,
        "bootstrap.servers": kafka.bootstrap,
        "commit.interval.ms": 200,
        "state.dir": str(workdir / "state"),
    }


def recent_window_start(window_ms: int, seconds_ago: int = 120) -> int:
    """A window start (epoch ms, a multiple of ``window_ms``) about ``seconds_ago`` back: records stamped from it are
    recent enough that the broker keeps them."""
    return (int(time.time() * 1000) - seconds_ago * 1000) // window_ms * window_ms


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str, interval_s: float = 0.5) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}")


class KafkaTestClient:
    """Topic setup, producing and reading for tests (uses confluent-kafka directly)."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.producer = Producer(
            # idempotent: a retried request never lands behind later ones, so the broker holds the test's order
            {
                "bootstrap.servers": bootstrap,
                "partitioner": "murmur2_random",
                "linger.ms": 5,
                "enable.idempotence": True,
            }
        )

    def create_topics(self, partitions: dict[str, int]) -> None:
        futures = self.admin.create_topics([NewTopic(t, n, 1) for t, n in partitions.items()])
        for future in futures.values():
            future.result()

    def produce(self, topic: str, records: Iterable[tuple[str | None, Any]], partition: int | None = None) -> None:
        for key, value in records:
            kwargs: dict[str, Any] = {}
            if partition is not None:
                kwargs["partition"] = partition
            self.producer.produce(
                topic, key=None if key is None else key.encode(), value=json.dumps(value).encode(), **kwargs
            )
            self.producer.poll(0)
        assert self.producer.flush(30) == 0

    def end_offsets_of_existing(self, topics: list[str]) -> dict[str, dict[int, int]]:
        """End offsets of those ``topics`` that exist."""
        existing = self.admin.list_topics(timeout=10).topics
        return {t: self.end_offsets(t) for t in topics if t in existing}

    def end_offsets(self, topic: str) -> dict[int, int]:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": unique("probe")})
        try:
            metadata = consumer.list_topics(topic, timeout=10)
            return {
                p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in metadata.topics[topic].partitions
            }
        finally:
            consumer.close()

    def read_all(self, topic: str) -> list[tuple[int, int, bytes | None, bytes | None]]:
        """Every record of ``topic`` up to its current end: ``(partition, offset, key, value)``."""
        ends = self.end_offsets(topic)
        consumer = Consumer(
            {"bootstrap.servers": self.bootstrap, "group.id": unique("reader"), "enable.auto.commit": False}
        )
        out: list[tuple[int, int, bytes | None, bytes | None]] = []
        try:
            consumer.assign([TopicPartition(topic, p, 0) for p, end in ends.items() if end > 0])
            remaining = {p for p, end in ends.items() if end > 0}
            deadline = time.monotonic() + 60
            while remaining and time.monotonic() < deadline:
                message = consumer.poll(1.0)
                if message is None or message.error():
                    continue
                p, offset = int(message.partition() or 0), int(message.offset() or 0)
                if offset < ends[p]:
                    out.append((p, offset, message.key(), message.value()))
                if offset + 1 >= ends[p]:
                    remaining.discard(p)
            assert not remaining, f"could not read {topic} to its end"
        finally:
            consumer.close()
        return out

    def read_committed(self, topic: str, timeout_s: float = 60) -> list[tuple[int, int, bytes | None, bytes | None]]:
        """Every committed record of ``topic`` up to its last stable offset, as a ``read_committed`` consumer
        sees it: ``(partition, offset, key, value)`` in offset order per partition. Aborted records and
        transaction markers are skipped (the end is found by partition-EOF events, since the last offsets of
        a transactional topic are markers, not records)."""
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": unique("committed-reader"),
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "enable.partition.eof": True,
            }
        )
        out: list[tuple[int, int, bytes | None, bytes | None]] = []
        try:
            partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
            consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
            remaining = set(partitions)
            deadline = time.monotonic() + timeout_s
            while remaining and time.monotonic() < deadline:
                message = consumer.poll(1.0)
                if message is None:
                    continue
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        remaining.discard(int(message.partition() or 0))
                    continue
                out.append((int(message.partition() or 0), int(message.offset() or 0), message.key(), message.value()))
            assert not remaining, f"could not read {topic} to its end"
        finally:
            consumer.close()
        return out

    def latest_longs(self, topic: str) -> dict[str, int]:
        """The last long value per string key of ``topic`` (committed records: also right for the output of an
        exactly-once application)."""
        latest: dict[str, int] = {}
        for _, _, key, value in sorted(self.read_committed(topic)):
            assert key is not None and value is not None
            latest[key.decode()] = struct.unpack(">q", value)[0]
        return latest


class StreamAppInstance:
    """One ``streamapp run`` process with its own state dir and HTTP port."""

    def __init__(
        self,
        workdir: Path,
        topology: dict[str, Any],
        config: dict[str, Any],
        instance_id: str | None = None,
        *,
        advertise: bool = False,
    ) -> None:
        """``advertise``: set ``application.server`` to the instance's own address, so that other instances
        forward interactive queries to it (docs/interactive-queries.md)."""
        workdir.mkdir(parents=True, exist_ok=True)
        self.workdir = workdir
        self.port = free_port()
        self.topology_file = workdir / "topology.yaml"
        self.config_file = workdir / "streams.yaml"
        self.topology_file.write_text(yaml.safe_dump(topology))
        endpoint = {"application.server": f"127.0.0.1:{self.port}"} if advertise else {}
        self.config_file.write_text(yaml.safe_dump({**config, "http.port": self.port, **endpoint}))
        self.instance_id = instance_id
        self.log_file = workdir / f"streamapp-{self.port}.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> StreamAppInstance:
        env = {**os.environ, "STREAMAPP_HTTP_HOST": "127.0.0.1"}
        env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        env.pop("STREAMAPP_INSTANCE_ID", None)
        if self.instance_id:
            env["STREAMAPP_INSTANCE_ID"] = self.instance_id
        with open(self.log_file, "ab") as log:
            self.process = subprocess.Popen(
                [str(STREAMAPP), "run", "--topology", str(self.topology_file), "--config", str(self.config_file)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        return self

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()
        except OSError as exc:
            return 0, str(exc)

    def status(self) -> dict[str, Any]:
        code, body = self.get("/status")
        assert code == 200, f"/status answered {code}: {body}"
        result: dict[str, Any] = json.loads(body)
        return result

    def ready(self) -> bool:
        self.assert_running()
        return self.get("/readyz")[0] == 200

    def wait_ready(self, timeout_s: float = 90) -> None:
        wait_for(self.ready, timeout_s, f"instance on port {self.port} to be ready (log: {self.log_file})")

    def assert_running(self) -> None:
        assert self.process is not None
        code = self.process.poll()
        assert code is None, f"streamapp exited with {code}; log:\n{self.log_tail()}"

    def metric_samples(self, prefix: str) -> dict[str, float]:
        """The ``/metrics`` samples whose line starts with ``prefix``: the sample (name and labels) -> its value."""
        _, text = self.get("/metrics")
        lines = (line.rsplit(" ", 1) for line in text.splitlines() if line.startswith(prefix))
        return {sample: float(value) for sample, value in lines}

    def metric(self, name: str) -> float:
        """Sum of all samples of one metric."""
        samples = self.metric_samples(name)
        return sum(value for sample, value in samples.items() if sample == name or sample.startswith(name + "{"))

    def worker_pids(self) -> list[int]:
        return [int(w["pid"]) for w in self.status()["workers"] if w.get("pid")]

    def stop(self, timeout_s: float = 90) -> int:
        """SIGTERM and wait; returns the exit code."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"streamapp did not stop within {timeout_s}s; log:\n{self.log_tail()}") from None

    def kill(self) -> None:
        """SIGKILL the supervisor and every process of its session (workers included)."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])


def two_instances(
    kafka: KafkaTestClient, workdir: Path, app: str, topology: dict[str, Any], *, advertise: bool = False
) -> tuple[StreamAppInstance, StreamAppInstance]:
    """Instances ``a`` and ``b`` of ``app`` (not started), one stream thread each, ``num.standby.replicas`` 1, the
    classic protocol with a 6 s session timeout (a dead instance's partitions move quickly); ``advertise``: each
    sets its ``application.server``."""
    config: dict[str, Any] = {
        "application.id": app,
        "bootstrap.servers": kafka.bootstrap,
        "num.standby.replicas": 1,
        "commit.interval.ms": 200,
        "group.protocol": "classic",
        "consumer.session.timeout.ms": 6000,
        "consumer.heartbeat.interval.ms": 1000,
    }

    def instance(name: str) -> StreamAppInstance:
        state = {**config, "state.dir": str(workdir / f"{name}-state")}
        return StreamAppInstance(workdir / name, topology, state, f"{app}-{name}", advertise=advertise)

    return instance("a"), instance("b")


def count_by_color_topology(sources: list[str], output: str) -> dict[str, Any]:
    """sources (JSON ``{"n", "color"}``) → drop n % 3 == 0 → re-key by color → repartition ``by-color`` →
    count in store ``counts`` → ``output`` (string → long)."""
    return {
        "nodes": [
            {"name": "events", "type": "source", "topics": sources, "keySerde": "string", "valueSerde": "json"},
            {
                "name": "kept",
                "type": "filter",
                "input": "events",
                "predicate": "integration_functions:not_multiple_of_three",
            },
            {"name": "rekeyed", "type": "select_key", "input": "kept", "mapper": "integration_functions:color"},
            {"name": "by-color", "type": "repartition", "input": "rekeyed", "keySerde": "string", "valueSerde": "json"},
            {"name": "count", "type": "count", "input": "by-color", "store": "counts"},
            {"name": "changes", "type": "to_stream", "input": "count"},
            {
                "name": "out",
                "type": "sink",
                "input": "changes",
                "topic": output,
                "keySerde": "string",
                "valueSerde": "long",
            },
        ],
        "stores": [{"name": "counts", "type": "key_value", "keySerde": "string", "valueSerde": "long"}],
    }


def color_events(start: int, count: int, colors: int = 7) -> list[tuple[str, dict[str, Any]]]:
    """Events ``n`` in [start, start + count), keyed ``k<n>``, colour ``c<n % colors>``."""
    return [(f"k{n}", {"n": n, "color": f"c{n % colors}"}) for n in range(start, start + count)]


def expected_color_counts(events: Iterable[tuple[str, dict[str, Any]]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for _, value in events:
        if value["n"] % 3 != 0:
            counts[value["color"]] = counts.get(value["color"], 0) + 1
    return counts


def count_by_key_topology(sources: list[str], output: str) -> dict[str, Any]:
    """sources (string keys) → count per key in store ``counts`` → ``output`` (string → long).

    One sub-topology reading all ``sources``: the count of a key is exact only if partition p of every
    source is processed by the same task.
    """
    return {
        "nodes": [
            {"name": "events", "type": "source", "topics": sources, "keySerde": "string", "valueSerde": "json"},
            {"name": "count", "type": "count", "input": "events", "store": "counts"},
            {"name": "changes", "type": "to_stream", "input": "count"},
            {
                "name": "out",
                "type": "sink",
                "input": "changes",
                "topic": output,
                "keySerde": "string",
                "valueSerde": "long",
            },
        ],
        "stores": [{"name": "counts", "type": "key_value", "keySerde": "string", "valueSerde": "long"}],
    }


WINDOW_MS = 1_000
EVENT_STEP_MS = 7
EVENT_EPOCH_MS = int(time.time() * 1000) // 60_000 * 60_000
"""Event times start near now: output records carry them as their timestamps, and a topic's ``retention.ms``
(7 days by default) would delete records with older timestamps while a test reads them."""


def timed_color_events(start: int, count: int, colors: int = 7) -> list[tuple[str, dict[str, Any]]]:
    """``color_events`` whose values also carry an event time ``ts`` (epoch ms, ``EVENT_STEP_MS`` apart)."""
    return [
        (key, {**value, "ts": EVENT_EPOCH_MS + value["n"] * EVENT_STEP_MS})
        for key, value in color_events(start, count, colors)
    ]


def windowed_count_by_color_topology(sources: list[str], output: str) -> dict[str, Any]:
    """sources (JSON ``{"n", "color", "ts"}``, event time from the ``ts`` field) → drop n % 3 == 0 → re-key by
    colour → repartition → count per colour and ``WINDOW_MS`` tumbling window (grace 1 h, so no record is late
    whatever the interleaving) in window store ``window-counts`` → ``output`` (key: colour + 8-byte window
    start, Kafka's TimeWindowedSerializer; value: long)."""
    return {
        "nodes": [
            {
                "name": "events",
                "type": "source",
                "topics": sources,
                "keySerde": "string",
                "valueSerde": "json",
                "timestampExtractor": {"type": "field", "field": "ts"},
            },
            {
                "name": "kept",
                "type": "filter",
                "input": "events",
                "predicate": "integration_functions:not_multiple_of_three",
            },
            {"name": "rekeyed", "type": "select_key", "input": "kept", "mapper": "integration_functions:color"},
            {"name": "by-color", "type": "repartition", "input": "rekeyed", "keySerde": "string", "valueSerde": "json"},
            {
                "name": "count",
                "type": "windowed_count",
                "input": "by-color",
                "store": "window-counts",
                "windows": {"type": "tumbling", "sizeMs": WINDOW_MS, "graceMs": 3_600_000},
            },
            {"name": "changes", "type": "to_stream", "input": "count"},
            {
                "name": "out",
                "type": "sink",
                "input": "changes",
                "topic": output,
                "keySerde": f"windowed:string:{WINDOW_MS}",
                "valueSerde": "long",
            },
        ],
        "stores": [
            {
                "name": "window-counts",
                "type": "window",
                "keySerde": "string",
                "valueSerde": "long",
                "retentionMs": 3_600_000 + WINDOW_MS,
                "windowSizeMs": WINDOW_MS,
            }
        ],
    }


def expected_windowed_color_counts(events: Iterable[tuple[str, dict[str, Any]]]) -> dict[bytes, int]:
    """Count per output key (colour bytes + 8-byte big-endian window start) of ``windowed_count_by_color_topology``."""
    counts: dict[bytes, int] = {}
    for _, value in events:
        if value["n"] % 3 != 0:
            start = value["ts"] - value["ts"] % WINDOW_MS
            key = value["color"].encode() + struct.pack(">q", start)
            counts[key] = counts.get(key, 0) + 1
    return counts
