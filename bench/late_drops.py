"""``python -m bench.late_drops``: late drops in a catch-up after a repartition, streamapp vs Kafka Streams.

Issue 22: a stream thread that ran each upstream task's whole backlog before the next one's let the writers of a
repartition topic drift days apart in event time, and a downstream windowed count dropped most records as late.
This benchmark puts the same multi-day backlog on the broker once (``VIEWS`` page views over ``DAYS`` days, keyed by
user, ``PARTITIONS`` partitions, each partition in event-time order, the event time in the value's ``ts``) and runs,
from scratch (a fresh application id, so from the earliest offsets, fresh state), one stream thread, at-least-once:

    page views -> re-key by country -> repartition -> hourly tumbling count (grace ``GRACE_MS``) -> output

on (a) streamapp (``streamapp run``, the topology below) and (b) Kafka Streams (``bench.WindowedCountAfterRepartition``
in ``bench/peers/kstreams``, the same topology in the DSL), in interleaved rounds. A run is done when the group has
committed the end of the input topic and of the repartition topic (checked from the broker, the same for both).
For each run it reports the records in, the records dropped as late (streamapp: the sum of
``streamapp_task_dropped_records_total{reason="late"}`` from ``/metrics``; Kafka Streams: the sum of the task metric
``dropped-records-total``, printed by the peer on SIGTERM), the windows in the output (distinct (country, hour)
keys) and the records their final counts hold (their sum: records in - dropped, when nothing is lost).
Prints a table and writes the numbers to ``.cache/bench/results/late-drops-<time>.json``.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import shutil
import signal
import struct
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import click
import yaml
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from bench.data import delete_topics, produce_all, recreate_topic
from bench.measure import GroupProgress

__all__ = ["LateDropRun", "counted_windows", "main", "page_views", "streamapp_topology"]

log = logging.getLogger("bench.late_drops")

REPO = Path(__file__).resolve().parent.parent
WORK = REPO / ".cache" / "bench"
HOUR_MS = 3_600_000
GRACE_MS = HOUR_MS
PARTITIONS = 4
VIEWS = 4_949
DAYS = 2
COUNTRIES = ["de", "fr", "nl", "pl", "se", "us"]
LATE_METRIC = "streamapp_task_dropped_records_total"


def page_views(
    views: int = VIEWS, days: int = DAYS, seed: int = 22, end_ms: int | None = None
) -> Iterator[tuple[bytes, bytes, int]]:
    """``views`` page views spread evenly over ``days`` days ending an hour before ``end_ms`` (now), by user (the
    key), in event-time order, as ``(key, value, timestamp)``: the input of the catch-up integration test
    (``runtime/tests/integration/test_catch_up_interleaves_tasks_so_few_records_are_late.py``) for the defaults."""
    span = days * 24 * HOUR_MS
    now = int(time.time() * 1000) if end_ms is None else end_ms
    start = (now - span - HOUR_MS) // HOUR_MS * HOUR_MS
    rng = random.Random(seed)
    step = span // views
    for n in range(views):
        ts = start + n * step
        key = f"user-{rng.randrange(500)}"
        value = {"n": n, "country": rng.choice(COUNTRIES), "ts": ts}
        yield key.encode(), json.dumps(value, separators=(",", ":")).encode(), ts


def streamapp_topology(source: str, output: str, grace_ms: int = GRACE_MS) -> dict[str, Any]:
    """page views (event time from ``ts``) -> re-key by country -> repartition -> hourly tumbling count -> output."""
    return {
        "nodes": [
            {"name": "views", "type": "source", "topics": [source], "keySerde": "string", "valueSerde": "json",
             "timestampExtractor": {"type": "field", "field": "ts"}},
            {"name": "by-country", "type": "select_key", "input": "views", "mapper": "bench.functions:country"},
            {"name": "per-country", "type": "repartition", "input": "by-country", "keySerde": "string",
             "valueSerde": "json"},
            {"name": "count", "type": "windowed_count", "input": "per-country", "store": "hourly-views",
             "windows": {"type": "tumbling", "sizeMs": HOUR_MS, "graceMs": grace_ms}},
            {"name": "changes", "type": "to_stream", "input": "count"},
            {"name": "out", "type": "sink", "input": "changes", "topic": output,
             "keySerde": f"windowed:string:{HOUR_MS}", "valueSerde": "long"},
        ],
        "stores": [
            {"name": "hourly-views", "type": "window", "keySerde": "string", "valueSerde": "long",
             "retentionMs": HOUR_MS + grace_ms, "windowSizeMs": HOUR_MS},
        ],
    }  # fmt: skip


@dataclass
class LateDropRun:
    engine: str
    round: int
    records_in: int
    dropped_late: int | None
    """From the engine's own metric; None when it could not be read."""
    windows: int
    counted: int
    """The records the final counts of all windows hold."""
    seconds: float
    status: str = "ok"


def counted_windows(records: list[tuple[bytes, bytes]]) -> tuple[int, int]:
    """``(windows, counted)`` from the output's ``(key, value)`` records in offset order per key: distinct window
    keys, and the sum of each one's last count (an 8-byte big-endian long, both engines' long serde)."""
    latest: dict[bytes, int] = {}
    for key, value in records:
        latest[key] = struct.unpack(">q", value)[0]
    return len(latest), sum(latest.values())


def read_topic(bootstrap: str, topic: str) -> list[tuple[bytes, bytes]]:
    """Every record of ``topic`` up to its current end, partition by partition, in offset order."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"late-read-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False}
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in partitions}
        wanted = {p: hi for p, (lo, hi) in ends.items() if hi > lo}
        consumer.assign([TopicPartition(topic, p, ends[p][0]) for p in wanted])
        out: list[tuple[bytes, bytes]] = []
        position = {p: ends[p][0] for p in wanted}
        deadline = time.monotonic() + 60
        while any(position[p] < wanted[p] for p in wanted) and time.monotonic() < deadline:
            for message in consumer.consume(1000, timeout=1.0):
                if message.error() is not None:
                    continue
                position[message.partition()] = message.offset() + 1
                key, value = message.key(), message.value()
                if key is not None and value is not None:
                    out.append((key, value))
        return out
    finally:
        consumer.close()


def _repartition_topics(bootstrap: str, tag: str) -> list[str]:
    topics = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics
    return sorted(t for t in topics if tag in t and t.endswith("-repartition"))


def wait_caught_up(
    bootstrap: str, group: str, source: str, tag: str, process: subprocess.Popen[Any], timeout_s: float
) -> bool:
    """Wait until ``group`` committed the end of ``source`` and of its repartition topic; False on a timeout."""
    deadline = time.monotonic() + timeout_s
    inputs = GroupProgress(bootstrap, group, [source], None)
    try:
        while time.monotonic() < deadline and process.poll() is None:
            time.sleep(1.0)
            if inputs.committed() < inputs.total:
                continue
            repartition = _repartition_topics(bootstrap, tag)
            if not repartition:
                continue
            inner = GroupProgress(bootstrap, group, repartition, None)
            try:
                if inner.total > 0 and inner.committed() >= inner.total:
                    return True
            finally:
                inner.close()
        return False
    finally:
        inputs.close()


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def streamapp_late(port: int) -> int:
    """The sum of ``streamapp_task_dropped_records_total{reason="late"}`` on ``/metrics``."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith(LATE_METRIC + "{") and 'reason="late"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return int(total)


@dataclass
class LateBench:
    bootstrap: str
    source: str
    records_in: int
    work_dir: Path
    commit_interval_ms: int = 1000
    timeout_s: float = 300.0
    grace_ms: int = GRACE_MS

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        env.pop("STREAMAPP_INSTANCE_ID", None)
        env["STREAMAPP_HTTP_HOST"] = "127.0.0.1"
        return env

    def run(self, engine: str, round_: int) -> LateDropRun:
        tag = f"late-{engine}-{round_}-{uuid.uuid4().hex[:6]}"
        run_dir = self.work_dir / "runs" / tag
        run_dir.mkdir(parents=True, exist_ok=True)
        output = f"{tag}-out"
        recreate_topic(self.bootstrap, output, PARTITIONS, {"retention.ms": "-1"})
        log_file = (self.work_dir / "logs" / f"{tag}.log").open("w")
        started = time.monotonic()
        try:
            if engine == "streamapp":
                port = _free_port()
                config = {
                    "application.id": tag,
                    "bootstrap.servers": self.bootstrap,
                    "num.stream.threads": 1,
                    "processing.guarantee": "at_least_once",
                    "commit.interval.ms": self.commit_interval_ms,
                    "state.dir": str(run_dir / "state"),
                    "http.port": port,
                }
                (run_dir / "topology.yaml").write_text(
                    yaml.safe_dump(streamapp_topology(self.source, output, self.grace_ms))
                )
                (run_dir / "streams.yaml").write_text(yaml.safe_dump(config))
                command = [str(Path(sys.executable).parent / "streamapp"), "run", "--topology",
                           str(run_dir / "topology.yaml"), "--config", str(run_dir / "streams.yaml")]  # fmt: skip
            else:
                from bench.peers.kstreams import ensure_kstreams, windowed_count_command

                command = windowed_count_command(
                    ensure_kstreams(), self.bootstrap, tag, self.source, output, self.commit_interval_ms,
                    run_dir / "state", HOUR_MS, self.grace_ms,
                )  # fmt: skip
            process = subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=log_file, env=self.env(), cwd=REPO, text=True,
                start_new_session=True,
            )  # fmt: skip
            done = wait_caught_up(self.bootstrap, tag, self.source, tag, process, self.timeout_s)
            seconds = time.monotonic() - started
            time.sleep(self.commit_interval_ms / 1000 + 2.0)  # the last commit's flush reaches the output
            dropped: int | None = None
            if engine == "streamapp" and process.poll() is None:
                dropped = streamapp_late(port)
            process.send_signal(signal.SIGTERM)
            stdout, _ = process.communicate(timeout=90)
            log_file.write(stdout)
            if engine == "kstreams":
                match = re.search(r"LATE-DROPS dropped=(\d+)", stdout)
                dropped = int(match.group(1)) if match else None
            windows, counted = counted_windows(read_topic(self.bootstrap, output))
            status = "ok" if done else "timeout"
            return LateDropRun(engine, round_, self.records_in, dropped, windows, counted, round(seconds, 1), status)
        finally:
            log_file.close()
            self.cleanup(tag, run_dir)

    def cleanup(self, tag: str, run_dir: Path) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        delete_topics(self.bootstrap, [t for t in admin.list_topics(timeout=10).topics if tag in t])
        try:
            admin.delete_consumer_groups([tag])[tag].result(10)
        except Exception as exc:  # the group may be gone already
            log.debug("deleting group %s: %s", tag, exc)
        shutil.rmtree(run_dir / "state", ignore_errors=True)


def render(runs: list[LateDropRun]) -> str:
    """A Markdown table, one row per run."""
    lines = [
        "| engine | round | records in | dropped as late (metric) | windows | records in final counts | s | status |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        dropped = "-" if r.dropped_late is None else f"{r.dropped_late:,}"
        lines.append(
            f"| {r.engine} | {r.round} | {r.records_in:,} | {dropped} | {r.windows:,} | {r.counted:,} | {r.seconds} |"
            f" {r.status} |"
        )
    return "\n".join(lines)


@click.command()
@click.option("--bootstrap", default=lambda: os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:9092"), show_default=True)
@click.option("--rounds", default=3, show_default=True, help="Interleaved rounds (streamapp, then Kafka Streams).")
@click.option("--engines", default="streamapp,kstreams", show_default=True)
@click.option("--views", default=VIEWS, show_default=True)
@click.option("--days", default=DAYS, show_default=True)
@click.option("--grace-ms", default=GRACE_MS, show_default=True, help="The windows' grace.")
@click.option("--timeout", "timeout_s", default=300.0, show_default=True, help="Per run, seconds.")
def main(bootstrap: str, rounds: int, engines: str, views: int, days: int, grace_ms: int, timeout_s: float) -> None:
    """Late drops of an hourly count after a repartition, catching up a multi-day backlog (see the module doc)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    WORK.mkdir(parents=True, exist_ok=True)
    (WORK / "logs").mkdir(exist_ok=True)
    source = f"bench-late-page-views-{uuid.uuid4().hex[:6]}"
    recreate_topic(bootstrap, source, PARTITIONS, {"retention.ms": "-1"})
    try:
        sent = produce_all(bootstrap, source, page_views(views, days))
        log.info("%d page views over %d days in %s (%d partitions)", sent, days, source, PARTITIONS)
        bench = LateBench(bootstrap, source, sent, WORK, timeout_s=timeout_s, grace_ms=grace_ms)
        runs: list[LateDropRun] = []
        for round_ in range(1, rounds + 1):
            for engine in engines.split(","):
                run = bench.run(engine, round_)
                log.info("%s", run)
                runs.append(run)
    finally:
        delete_topics(bootstrap, [source])
    table = render(runs)
    print(table)
    results = WORK / "results"
    results.mkdir(parents=True, exist_ok=True)
    out = results / f"late-drops-{time.strftime('%Y%m%dT%H%M%S')}.json"
    out.write_text(
        json.dumps({"views": views, "days": days, "grace_ms": grace_ms, "runs": [asdict(r) for r in runs]}, indent=2)
    )
    print(f"written to {out}")


if __name__ == "__main__":
    main()
