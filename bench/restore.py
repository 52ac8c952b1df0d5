"""Restore throughput and memory with a 1-million-key store (streamapp, one stream thread).

1. Build: count ``bench-keys`` (1,000,000 distinct keys) into the key-value store ``keys-store`` until the
   group's lag is 0; the worker's peak RSS is "RSS with a 1M-key store". Clean stop (commit, close).
2. Delete the application's local state folder (``<state.dir>/<application.id>``).
3. Restart the same application: every task restores its store from the changelog. The restore time
   runs from the first "Restoring store" log line of the worker to its last "Restored task" line (log
   timestamps, ms resolution); records are summed from the "Restored task <id>: <n> records" lines.
   Bytes: the changelog's size on the broker's disk (its ``.log`` segment files, lz4 batches), when the
   broker's log folder is local, and the key + value payload (what RocksDB receives).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import yaml

from bench import topologies
from bench.engines import REPO, Bench
from bench.measure import GroupProgress, measure_process, peak_rss_mib, process_tree, stop_process

__all__ = ["RestoreResult", "run_restore"]

_LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")
_RESTORED = re.compile(r"Restored task (\S+): (\d+) records")


@dataclass
class RestoreResult:
    keys: int
    build_seconds: float
    build_peak_rss_mib: float | None
    restored_records: int
    restore_seconds: float
    restart_to_restored_s: float
    changelog_disk_bytes: int | None
    payload_bytes: int
    restore_peak_rss_mib: float | None
    block_cache_bytes: int
    write_buffer_bytes: int

    @property
    def records_per_s(self) -> float:
        return self.restored_records / self.restore_seconds if self.restore_seconds > 0 else 0.0

    @property
    def disk_mb_per_s(self) -> float | None:
        if self.changelog_disk_bytes is None or self.restore_seconds <= 0:
            return None
        return self.changelog_disk_bytes / 1e6 / self.restore_seconds

    @property
    def payload_mb_per_s(self) -> float:
        return self.payload_bytes / 1e6 / self.restore_seconds if self.restore_seconds > 0 else 0.0


def _log_time(line: str) -> float | None:
    match = _LOG_TIME.match(line)
    if match is None:
        return None
    return datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()


def _kafka_log_dir() -> Path | None:
    properties = REPO / ".cache" / "run" / "kafka-server.properties"
    if not properties.exists():
        return None
    for line in properties.read_text().splitlines():
        if line.startswith("log.dirs="):
            return Path(line.split("=", 1)[1].split(",")[0])
    return None


def _changelog_disk_bytes(topic: str) -> int | None:
    log_dir = _kafka_log_dir()
    if log_dir is None or not log_dir.exists():
        return None
    folders = [p for p in log_dir.iterdir() if p.is_dir() and p.name.rsplit("-", 1)[0] == topic]
    if not folders:
        return None
    return sum(f.stat().st_size for folder in folders for f in folder.glob("*.log"))


def run_restore(bench: Bench, tag: str, timeout_s: float = 600.0) -> RestoreResult:
    """Build a 1M-key store, delete local state, restart and time the restore (see the module docstring)."""
    from streamapp.config import StreamsConfig

    ds = bench.dataset
    run_dir = bench.work_dir / "runs" / tag
    run_dir.mkdir(parents=True, exist_ok=True)
    output = f"{tag}-out"
    description = topologies.build("restore", ds, output)
    settings = bench.streamapp_config(tag, run_dir, 1, "at_least_once")
    config = StreamsConfig.from_mapping(settings)
    (run_dir / "topology.yaml").write_text(description.to_yaml())
    (run_dir / "streams.yaml").write_text(yaml.safe_dump(settings))
    from bench.data import recreate_topic

    recreate_topic(bench.bootstrap, output, ds.partitions, {"retention.ms": "-1"})
    try:
        progress = GroupProgress(bench.bootstrap, tag, [ds.keys_topic], output)
        try:
            built, _ = measure_process(
                bench.streamapp_command(run_dir),
                progress,
                bench.work_dir / "logs" / f"{tag}-build.log",
                env=bench.env(),
                cwd=REPO,
                timeout_s=timeout_s,
                is_worker=lambda pid, cmd: "spawn_main" in cmd,
            )
        finally:
            progress.close()
        if built.timed_out:
            raise RuntimeError(f"building the 1M-key store did not finish in {timeout_s:.0f}s")
        shutil.rmtree(config.application_state_dir)
        restore_log = bench.work_dir / "logs" / f"{tag}-restore.log"
        started = time.time()
        with restore_log.open("wb") as log_file:
            process = subprocess.Popen(
                bench.streamapp_command(run_dir),
                stdout=log_file,
                stderr=subprocess.STDOUT,
                env=bench.env(),
                cwd=REPO,
                start_new_session=True,
            )
        peak: float | None = None
        tasks = ds.partitions
        try:
            while True:
                for pid in process_tree(process.pid)[1:]:
                    value = peak_rss_mib(pid)
                    if value is not None:
                        peak = max(peak or 0.0, value)
                text = restore_log.read_text(errors="replace")
                if len(_RESTORED.findall(text)) >= tasks:
                    break
                if process.poll() is not None:
                    raise RuntimeError(f"streamapp exited with {process.returncode} while restoring; see {restore_log}")
                if time.time() - started > timeout_s:
                    raise RuntimeError(f"restore did not finish in {timeout_s:.0f}s; see {restore_log}")
                time.sleep(0.2)
            for pid in process_tree(process.pid)[1:]:
                value = peak_rss_mib(pid)
                if value is not None:
                    peak = max(peak or 0.0, value)
        finally:
            stop_process(process)
        lines = restore_log.read_text(errors="replace").splitlines()
        begin = min(t for line in lines if "Restoring store" in line and (t := _log_time(line)) is not None)
        end = max(t for line in lines if _RESTORED.search(line) and (t := _log_time(line)) is not None)
        restored = sum(int(m.group(2)) for line in lines if (m := _RESTORED.search(line)))
        changelog = description.changelog_topic(tag, topologies.RESTORE_STORE)
        key_bytes = len("k0000000")
        return RestoreResult(
            keys=ds.keys,
            build_seconds=built.seconds,
            build_peak_rss_mib=built.peak_worker_rss_mib,
            restored_records=restored,
            restore_seconds=max(end - begin, 1e-3),
            restart_to_restored_s=end - started,
            changelog_disk_bytes=_changelog_disk_bytes(changelog),
            payload_bytes=restored * (key_bytes + 8),
            restore_peak_rss_mib=peak,
            block_cache_bytes=config.rocksdb_block_cache_bytes,
            write_buffer_bytes=config.rocksdb_write_buffer_bytes,
        )
    finally:
        bench.cleanup(tag, run_dir)
