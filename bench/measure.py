"""Measuring one engine run from the outside: progress on the broker, memory from ``/proc``.

The clock starts when the engine's process is started and stops at the first poll (every 0.1 s) where the
engine's consumer group has committed the end offset of every input partition (lag 0). "Startup" ends
at the first poll where the output topic has a record (or, without an output topic, where the group has
committed anything); the rate "after startup" divides the records by the time from there to the end.

CPU: the user + system time of the worker processes (all threads, librdkafka's included) when the run
ends; records per worker CPU-second is the throughput measure that other load on the machine disturbs
least.

Memory: every 0.5 s the peak resident set (``VmHWM``) of the engine's worker processes is read from
``/proc/<pid>/status``; the largest per-worker peak is reported. For streamapp the workers are the
stream-thread processes (children whose command line runs ``multiprocessing.spawn``), the supervisor is
reported apart; for single-process engines the worker is the process itself.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

__all__ = ["GroupProgress", "RunMeasurement", "measure_process", "peak_rss_mib", "process_tree"]

_POLL_S = 0.1
_RSS_EVERY_S = 0.5


def _read_status(pid: int) -> dict[str, str]:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return {}
    fields = {}
    for line in text.splitlines():
        name, _, value = line.partition(":")
        fields[name] = value.strip()
    return fields


_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of ``pid`` (all its threads) in seconds; None when the process is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def peak_rss_mib(pid: int) -> float | None:
    """``VmHWM`` (peak resident set) of ``pid`` in MiB; None when the process is gone."""
    value = _read_status(pid).get("VmHWM")
    return int(value.split()[0]) / 1024 if value else None


def rss_mib(pid: int) -> float | None:
    """``VmRSS`` (current resident set) of ``pid`` in MiB; None when the process is gone."""
    value = _read_status(pid).get("VmRSS")
    return int(value.split()[0]) / 1024 if value else None


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def process_tree(root: int) -> list[int]:
    """``root`` and all its live descendants (from the parent pids in ``/proc/*/stat``)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(parents.get(pid, []))
    return found


class GroupProgress:
    """Committed offsets of a consumer group and the size of an output topic, read from the broker."""

    def __init__(self, bootstrap: str, group: str, input_topics: Sequence[str], output_topic: str | None) -> None:
        self.group = group
        self.output_topic = output_topic
        self._admin = AdminClient({"bootstrap.servers": bootstrap})
        self._consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": f"{group}-monitor", "enable.auto.commit": False}
        )
        self.ends: dict[tuple[str, int], int] = {}
        for topic in input_topics:
            metadata = self._consumer.list_topics(topic, timeout=10).topics[topic]
            for p in metadata.partitions:
                self.ends[(topic, p)] = self._consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
        self.total = sum(self.ends.values())
        self._output_partitions: list[int] = []

    def committed(self) -> int:
        """Records of the input topics below the group's committed offsets (0 before the first commit)."""
        request = [ConsumerGroupTopicPartitions(self.group, [TopicPartition(t, p) for t, p in self.ends])]
        try:
            result = self._admin.list_consumer_group_offsets(request)[self.group].result(10)
        except KafkaException:
            return 0
        done = 0
        for tp in result.topic_partitions or []:
            if tp.error is None and tp.offset >= 0:
                done += min(tp.offset, self.ends.get((tp.topic, tp.partition), 0))
        return done

    def output(self) -> int:
        """Sum of the output topic's high watermarks (records plus transaction markers); 0 without one."""
        if self.output_topic is None:
            return 0
        if not self._output_partitions:
            metadata = self._consumer.list_topics(self.output_topic, timeout=10).topics.get(self.output_topic)
            if metadata is None or not metadata.partitions:
                return 0
            self._output_partitions = sorted(metadata.partitions)
        total = 0
        for p in self._output_partitions:
            tp = TopicPartition(self.output_topic, p)
            total += self._consumer.get_watermark_offsets(tp, timeout=10, cached=False)[1]
        return total

    def close(self) -> None:
        self._consumer.close()


@dataclass
class RunMeasurement:
    """One measured run. Times in seconds since the process was started."""

    records: int
    """Input records committed at the end (all of them unless ``timed_out``)."""
    seconds: float
    """End-to-end: start to lag 0 (or to the timeout)."""
    startup_s: float | None
    """Start to the first output record (None if none appeared)."""
    output_records: int
    timed_out: bool = False
    exit_code: int | None = None
    worker_peak_rss_mib: dict[int, float] = field(default_factory=dict)
    other_peak_rss_mib: dict[int, float] = field(default_factory=dict)
    worker_cpu_s: dict[int, float] = field(default_factory=dict)
    """CPU seconds (user + system, all threads) each worker had used at the end."""

    @property
    def cpu_s(self) -> float:
        return sum(self.worker_cpu_s.values())

    @property
    def records_per_cpu_s(self) -> float | None:
        """Records per worker CPU-second: throughput with the noise of other load on the machine removed."""
        return self.records / self.cpu_s if self.cpu_s > 0 else None

    @property
    def rate(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0

    @property
    def steady_rate(self) -> float | None:
        if self.startup_s is None or self.seconds <= self.startup_s:
            return None
        return self.records / (self.seconds - self.startup_s)

    @property
    def peak_worker_rss_mib(self) -> float | None:
        return max(self.worker_peak_rss_mib.values()) if self.worker_peak_rss_mib else None


def stop_process(
    process: subprocess.Popen[bytes], timeout_s: float = 90.0, stop_signal: int = signal.SIGTERM
) -> int | None:
    """Signal the process (SIGTERM), wait for it, then SIGKILL its process group (it was started in its own)."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(stop_signal)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout_s)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(10)
    return process.returncode


def measure_process(
    command: Sequence[str],
    progress: GroupProgress,
    log_path: Path,
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout_s: float = 600.0,
    is_worker: Callable[[int, str], bool] = lambda pid, cmd: True,
    on_started: Callable[[subprocess.Popen[bytes]], None] | None = None,
    stop: bool = True,
    stop_signal: int = signal.SIGTERM,
) -> tuple[RunMeasurement, subprocess.Popen[bytes]]:
    """Start ``command`` and measure it until its group reaches lag 0 (see the module docstring).

    ``is_worker(pid, cmdline)`` picks the processes whose peak RSS counts as a worker's. The process is
    stopped at the end with ``stop_signal`` unless ``stop`` is False (then the caller stops it). Raises
    RuntimeError when the process exits before it has processed everything.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as log:
        started = time.monotonic()
        process = subprocess.Popen(
            list(command),
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
        )
    if on_started is not None:
        on_started(process)
    workers: dict[int, float] = {}
    others: dict[int, float] = {}
    cpu: dict[int, float] = {}
    first_output: float | None = None
    last_rss = 0.0
    committed = output = 0
    timed_out = False

    def sample_rss() -> None:
        for pid in process_tree(process.pid):
            peak = peak_rss_mib(pid)
            if peak is not None:
                worker = is_worker(pid, cmdline(pid))
                target = workers if worker else others
                target[pid] = max(target.get(pid, 0.0), peak)
                used = cpu_seconds(pid)
                if worker and used is not None:
                    cpu[pid] = used

    try:
        while True:
            now = time.monotonic()
            if now - last_rss >= _RSS_EVERY_S:
                last_rss = now
                sample_rss()
            committed = progress.committed()
            output = progress.output()
            now = time.monotonic()
            if first_output is None and (output > 0 or (progress.output_topic is None and committed > 0)):
                first_output = now - started
            if committed >= progress.total:
                break
            if process.poll() is not None:
                raise RuntimeError(
                    f"{command[0]} exited with code {process.returncode} after {now - started:.1f}s "
                    f"having committed {committed}/{progress.total} records; see {log_path}"
                )
            if now - started > timeout_s:
                timed_out = True
                break
            time.sleep(_POLL_S)
        elapsed = time.monotonic() - started
        sample_rss()
    except BaseException:
        stop_process(process)
        raise
    exit_code = stop_process(process, stop_signal=stop_signal) if stop else None
    return (
        RunMeasurement(
            records=committed,
            seconds=elapsed,
            startup_s=first_output,
            output_records=output,
            timed_out=timed_out,
            exit_code=exit_code,
            worker_peak_rss_mib=workers,
            other_peak_rss_mib=others,
            worker_cpu_s=cpu,
        ),
        process,
    )
