"""One benchmark run per scenario: which engine, which topology, which guarantee, how many threads.

Every run is a separate process against the same broker and the same input topic, with a fresh consumer
group (so it reads from the beginning), a fresh output topic and a fresh state folder; its topics, group
and state are deleted afterwards. All engines commit every ``commit_interval_ms`` (1 s by default, for all
of them: a 30 s commit interval would make "lag 0" a 30 s-resolution clock).
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from bench import topologies
from bench.data import Dataset, delete_topics, recreate_topic
from bench.measure import GroupProgress, RunMeasurement, measure_process
from bench.peers.venvs import ensure_venv
from bench.topologies import NotAvailable

__all__ = ["ENGINES", "Bench", "Result", "Scenario"]

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parent.parent
ENGINES = ("raw", "streamapp", "quixstreams", "faust", "kstreams")
GUARANTEES = ("at_least_once", "exactly_once_v2")


@dataclass(frozen=True)
class Scenario:
    engine: str
    topology: str
    guarantee: str = "at_least_once"
    threads: int = 1

    @property
    def name(self) -> str:
        guarantee = "alos" if self.guarantee == "at_least_once" else "eos"
        return f"{self.engine}-{self.topology}-{guarantee}-{self.threads}t"


@dataclass
class Result:
    scenario: Scenario
    status: str
    """``ok``, ``timeout`` (a partial rate), ``not available yet: ...`` or ``failed: ...``."""
    measurement: RunMeasurement | None = None
    version: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Bench:
    """Shared settings of a benchmark run."""

    bootstrap: str
    dataset: Dataset
    work_dir: Path
    timeout_s: float = 600.0
    commit_interval_ms: int = 1000
    runtime_src: Path | None = None
    """Run streamapp from this source tree (``.../runtime/src``) instead of the installed one."""
    wrap: Callable[[list[str], Path], list[str]] | None = None
    """Optional command wrapper (the profiler), given the command and the run's folder."""
    streamapp_settings: dict[str, str] = field(default_factory=dict)
    """Extra streams config keys for every streamapp run (``--set key=value``)."""
    _cpu_dataset: Dataset | None = field(default=None, repr=False)

    def run(self, scenario: Scenario) -> Result:
        """Run one scenario; never raises for a scenario failure (the result says what happened)."""
        runner = {
            "raw": self._run_raw,
            "streamapp": self._run_streamapp,
            "quixstreams": self._run_quix,
            "faust": self._run_faust,
            "kstreams": self._run_kstreams,
        }[scenario.engine]
        tag = f"{scenario.name}-{uuid.uuid4().hex[:6]}"
        run_dir = self.work_dir / "runs" / tag
        try:
            return runner(scenario, tag, run_dir)
        except NotAvailable as exc:
            return Result(scenario, f"not available yet: {exc}")
        except Exception as exc:
            log.exception("%s failed", scenario.name)
            return Result(scenario, f"failed: {type(exc).__name__}: {exc}")
        finally:
            self.cleanup(tag, run_dir)

    # -- engines -----------------------------------------------------------------------------------

    def _run_raw(self, scenario: Scenario, tag: str, run_dir: Path) -> Result:
        if scenario.guarantee != "at_least_once" or scenario.threads != 1:
            raise NotAvailable("the raw loop runs at-least-once with one process")
        output = f"{tag}-out"
        recreate_topic(self.bootstrap, output, self.dataset.partitions, {"retention.ms": "-1"})
        command = [
            sys.executable,
            "-m",
            "bench.raw_loop",
            "--bootstrap",
            self.bootstrap,
            "--group",
            tag,
            "--input",
            self.dataset.flights_topic,
            "--output",
            output,
            "--commit-interval-ms",
            str(self.commit_interval_ms),
        ]
        measurement = self._measure(command, tag, [self.dataset.flights_topic], output, run_dir)
        import confluent_kafka

        return self._result(scenario, measurement, f"confluent-kafka {confluent_kafka.version()[0]}")

    def input_for(self, topology: str) -> Dataset:
        """The dataset a topology reads: the CPU-bound one reads the one-copy subset (``bench.subset``)."""
        if topology != topologies.CPU_TOPOLOGY:
            return self.dataset
        if self._cpu_dataset is None:
            from bench.subset import ensure_cpu_subset

            self._cpu_dataset = ensure_cpu_subset(self.bootstrap, self.dataset)
        return self._cpu_dataset

    def _run_streamapp(self, scenario: Scenario, tag: str, run_dir: Path) -> Result:
        output = f"{tag}-out"
        dataset = self.input_for(scenario.topology)
        description = topologies.build(scenario.topology, dataset, output)
        settings = self.streamapp_config(tag, run_dir, scenario.threads, scenario.guarantee)
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "topology.yaml").write_text(description.to_yaml())
        (run_dir / "streams.yaml").write_text(yaml.safe_dump(settings))
        recreate_topic(self.bootstrap, output, self.dataset.partitions, {"retention.ms": "-1"})
        inputs = [dataset.flights_topic]
        if scenario.topology == "join":
            inputs.append(self.dataset.planes_topic)
        measurement = self._measure(
            self.streamapp_command(run_dir),
            tag,
            inputs,
            output,
            run_dir,
            is_worker=lambda pid, cmd: "spawn_main" in cmd,
        )
        return self._result(scenario, measurement, "streamapp (this repo)")

    def _run_quix(self, scenario: Scenario, tag: str, run_dir: Path) -> Result:
        if scenario.topology not in ("stateless", "count") or scenario.threads != 1:
            raise NotAvailable("Quix Streams runs the stateless and count topologies, one process")
        python, version = ensure_venv("quixstreams")
        output = f"{tag}-out"
        recreate_topic(self.bootstrap, output, self.dataset.partitions, {"retention.ms": "-1"})
        guarantee = "exactly-once" if scenario.guarantee == "exactly_once_v2" else "at-least-once"
        command = [
            str(python),
            str(REPO / "bench" / "peers" / "quix_app.py"),
            "--bootstrap",
            self.bootstrap,
            "--group",
            tag,
            "--input",
            self.dataset.flights_topic,
            "--output",
            output,
            "--topology",
            scenario.topology,
            "--guarantee",
            guarantee,
            "--commit-interval-ms",
            str(self.commit_interval_ms),
            "--state-dir",
            str(run_dir / "state"),
        ]
        measurement = self._measure(command, tag, [self.dataset.flights_topic], output, run_dir)
        return self._result(scenario, measurement, f"quixstreams {version}")

    def _run_faust(self, scenario: Scenario, tag: str, run_dir: Path) -> Result:
        if scenario.topology not in ("stateless", "count") or scenario.threads != 1:
            raise NotAvailable("Faust runs the stateless and count topologies, one process")
        python, version = ensure_venv("faust-streaming")
        output = f"{tag}-out"
        recreate_topic(self.bootstrap, output, self.dataset.partitions, {"retention.ms": "-1"})
        guarantee = "exactly_once" if scenario.guarantee == "exactly_once_v2" else "at_least_once"
        command = [
            str(python),
            str(REPO / "bench" / "peers" / "faust_app.py"),
            "--bootstrap",
            self.bootstrap,
            "--group",
            tag,
            "--input",
            self.dataset.flights_topic,
            "--output",
            output,
            "--topology",
            scenario.topology,
            "--partitions",
            str(self.dataset.partitions),
            "--guarantee",
            guarantee,
            "--commit-interval-ms",
            str(self.commit_interval_ms),
            "--state-dir",
            str(run_dir / "state"),
        ]
        measurement = self._measure(command, tag, [self.dataset.flights_topic], output, run_dir)
        return self._result(scenario, measurement, f"faust-streaming {version}")

    def _run_kstreams(self, scenario: Scenario, tag: str, run_dir: Path) -> Result:
        """Kafka Streams 4.1 (Java, ``bench.peers.kstreams``) on the count, windowed or join topology, one stream
        thread, its default record cache unless ``statestore.cache.max.bytes`` is among the ``--set`` settings."""
        from bench.peers.kstreams import KAFKA_STREAMS_VERSION, TOPOLOGIES, ensure_kstreams, kstreams_command

        if scenario.topology not in TOPOLOGIES or scenario.threads != 1:
            raise NotAvailable(f"the Kafka Streams peer runs {', '.join(TOPOLOGIES)}, one stream thread")

        classpath = ensure_kstreams()
        output = f"{tag}-out"
        recreate_topic(self.bootstrap, output, self.dataset.partitions, {"retention.ms": "-1"})
        cache = self.streamapp_settings.get("statestore.cache.max.bytes")
        command = kstreams_command(
            classpath,
            self.bootstrap,
            tag,
            self.dataset.flights_topic,
            output,
            scenario.guarantee,
            self.commit_interval_ms,
            run_dir / "state",
            None if cache is None else int(cache),
            scenario.topology,
            self.dataset.planes_topic,
        )
        inputs = [self.dataset.flights_topic]
        if scenario.topology == "join":
            inputs.append(self.dataset.planes_topic)
        measurement = self._measure(command, tag, inputs, output, run_dir)
        return self._result(scenario, measurement, f"kafka-streams {KAFKA_STREAMS_VERSION}")

    # -- shared ------------------------------------------------------------------------------------

    def streamapp_config(self, app_id: str, run_dir: Path, threads: int, guarantee: str) -> dict[str, Any]:
        """The streams config of a benchmark app; raises NotAvailable for a guarantee the runtime rejects."""
        from streamapp.config import ConfigError, StreamsConfig

        settings: dict[str, Any] = {
            "application.id": app_id,
            "bootstrap.servers": self.bootstrap,
            "num.stream.threads": threads,
            "processing.guarantee": guarantee,
            "commit.interval.ms": self.commit_interval_ms,
            "state.dir": str(run_dir / "state"),
            "http.port": _free_port(),
            **self.streamapp_settings,
        }
        try:
            StreamsConfig.from_mapping(settings)
        except ConfigError as exc:
            raise NotAvailable(str(exc)) from None
        return settings

    def streamapp_command(self, run_dir: Path) -> list[str]:
        """The real CLI: ``streamapp run --topology ... --config ...``."""
        script = Path(sys.executable).parent / "streamapp"
        return [
            str(script),
            "run",
            "--topology",
            str(run_dir / "topology.yaml"),
            "--config",
            str(run_dir / "streams.yaml"),
        ]

    def env(self) -> dict[str, str]:
        """The environment of engine processes: this repo (and a chosen runtime source tree) importable."""
        env = dict(os.environ)
        paths = [str(REPO)]
        if self.runtime_src is not None:
            paths.insert(0, str(self.runtime_src))
        env["PYTHONPATH"] = os.pathsep.join(paths + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        env.pop("STREAMAPP_INSTANCE_ID", None)
        env["STREAMAPP_HTTP_HOST"] = "127.0.0.1"
        return env

    def _measure(
        self,
        command: list[str],
        group: str,
        inputs: list[str],
        output: str | None,
        run_dir: Path,
        is_worker: Callable[[int, str], bool] = lambda pid, cmd: True,
    ) -> RunMeasurement:
        run_dir.mkdir(parents=True, exist_ok=True)
        if self.wrap is not None:
            command = self.wrap(command, run_dir)
        progress = GroupProgress(self.bootstrap, group, inputs, output)
        try:
            measurement, _ = measure_process(
                command,
                progress,
                self.work_dir / "logs" / f"{group}.log",
                env=self.env(),
                cwd=REPO,
                timeout_s=self.timeout_s,
                is_worker=is_worker,
                # the profiler writes its output on SIGINT; the engine is then killed with its group
                stop_signal=signal.SIGINT if self.wrap is not None else signal.SIGTERM,
            )
        finally:
            progress.close()
        return measurement

    def _result(self, scenario: Scenario, measurement: RunMeasurement, version: str) -> Result:
        status = "timeout" if measurement.timed_out else "ok"
        log.info(
            "%s: %s, %d records in %.1fs (%.0f records/s), startup %s s",
            scenario.name,
            status,
            measurement.records,
            measurement.seconds,
            measurement.rate,
            f"{measurement.startup_s:.1f}" if measurement.startup_s is not None else "-",
        )
        return Result(scenario, status, measurement, version)

    def cleanup(self, tag: str, run_dir: Path) -> None:
        """Delete the run's topics (every topic whose name contains ``tag``), its group and its state."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        try:
            topics = [t for t in admin.list_topics(timeout=10).topics if tag in t]
            delete_topics(self.bootstrap, topics)
        except (KafkaException, TimeoutError) as exc:
            log.warning("cleanup of %s topics failed: %s", tag, exc)
        deadline = time.monotonic() + 30
        while True:
            try:
                admin.delete_consumer_groups([tag])[tag].result(10)
                break
            except KafkaException as exc:
                if "GROUP_ID_NOT_FOUND" in str(exc) or time.monotonic() > deadline:
                    break
                time.sleep(1)
        shutil.rmtree(run_dir / "state", ignore_errors=True)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port
