"""KafkaStreams: one StreamApp instance (a pod): the supervisor of its stream-thread worker processes.

``run()``:

1. serves ``/healthz``, ``/readyz``, ``/metrics`` and ``/status`` on ``http.port`` (bind address from
   ``STREAMAPP_HTTP_HOST``, default 0.0.0.0), and the interactive queries' ``/query`` and ``/metadata`` once the
   stream threads run (``streamapp.query.http``; ``query``, ``query_metadata_for_key`` and
   ``metadata_for_all_clients`` here, docs/interactive-queries.md);
2. checks the topology can run here and imports its user functions, and that librdkafka accepts every client
   setting (``streamapp.kafka.config_check``; else ``run`` returns 1, with every refused key), then prepares the
   topics: waits until the source and sink topics exist, then creates the internal topics
   (repartition, changelog) that are missing, with the partition counts the topology implies;
3. starts ``num.stream.threads`` worker processes (``spawn``), each one a stream thread and consumer-group
   member (``group.instance.id`` = ``<STREAMAPP_INSTANCE_ID>-<i>`` when that variable is set);
4. restarts a worker that exits unexpectedly, with backoff, and aggregates the workers' reports;
5. on SIGTERM or SIGINT asks every worker to commit and close, waits for them, and returns 0.

Giving up (Kafka Streams' ``SHUTDOWN_CLIENT``): when one stream thread failed more often than
``streamapp.monitoring.health.restart_allowed`` allows (5 restarts within 10 minutes), or the instance cannot
start at all (the topology cannot run here, the topics do not fit it, Kafka rejects the credentials), the phase
becomes ``failed`` with the cause in ``/status`` ``last_failure``, the other workers commit and close, the HTTP
server keeps answering for ``failed_exit_delay_s`` (default ``FAILED_EXIT_DELAY_S``, 5 s) so that the last
``/status`` can be read, and ``run`` returns 1. The cause is also written to the container's termination message
file (``STREAMAPP_TERMINATION_MESSAGE_PATH``, default ``/dev/termination-log``) when that file exists.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import queue
import signal
import threading
import time
from dataclasses import asdict, dataclass, field
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from streamapp.config import StreamsConfig
from streamapp.kafka.admin import TopicAdmin, TopicMismatchError, TopicSpec
from streamapp.kafka.clients import admin_config
from streamapp.kafka.config_check import client_config_problems
from streamapp.kafka.schema_registry import configure_registry_serdes
from streamapp.kafka.types import KafkaAuthenticationError, KafkaClientError
from streamapp.monitoring.health import (
    RESTART_WINDOW_S,
    MissingTopics,
    WorkerView,
    find_missing,
    liveness,
    missing_topics_due,
    readiness,
    restart_allowed,
)
from streamapp.monitoring.metrics import WorkerMetricsCollector
from streamapp.monitoring.server import MonitoringServer, loopback_also
from streamapp.processing.status import Failure, ThreadFailed, WorkerStatus, bounded_text
from streamapp.processing.stream_thread import source_topic_subtopologies
from streamapp.processing.worker import EXIT_WAITING, WorkerSpec, run_worker
from streamapp.query.channel import QueryChannel
from streamapp.query.http import QueryRoutes
from streamapp.query.metadata import KeyQueryMetadata, StreamsMetadata
from streamapp.query.requests import QueryError, StateQueryRequest, StateQueryResult
from streamapp.query.router import InteractiveQueries
from streamapp.state.directory import StateDirectory
from streamapp.topology import TopologyDescription, TopologyError
from streamapp.topology.references import check_references

__all__ = ["FAILED_EXIT_DELAY_S", "KafkaStreams"]

log = logging.getLogger(__name__)

SHUTDOWN_TIMEOUT_S = 60.0
"""How long workers get to commit and close after a stop request before they are killed."""
FAILED_EXIT_DELAY_S = 5.0
"""How long a failed instance keeps serving ``/status`` (phase ``failed``) before ``run`` returns 1."""
TERMINATION_MESSAGE_PATH = "/dev/termination-log"
"""Kubernetes' default ``terminationMessagePath``: the cause of a give-up goes there when the file exists."""
_TOPIC_RETRY_S = 5.0
_WAITING_RETRY_S = 5.0
_MAX_BACKOFF_S = 60.0
_HEALTHY_RUN_S = 60.0


@dataclass
class _Worker:
    index: int
    process: BaseProcess | None = None
    started_at: float = 0.0
    restarts: int = 0
    backoff_s: float = 1.0
    restart_at: float | None = None
    status: WorkerStatus | None = None
    exit_code: int | None = None
    last_failure: Failure | None = None
    failure_pid: int | None = None
    """The worker process that reported ``last_failure`` (a process that died without a report gets one made up)."""
    failures: list[float] = field(default_factory=list)
    """Epoch seconds of the thread's failures within the restart window (``restart_allowed``)."""
    queries: QueryChannel | None = None
    """The supervisor's end of the worker's query pipe (a new one per worker process)."""

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.is_alive()


class KafkaStreams:
    """A StreamApp instance running ``topology`` with ``config`` (see the module docstring).

    ``instance_id`` and ``http_host`` default to the ``STREAMAPP_INSTANCE_ID`` and ``STREAMAPP_HTTP_HOST``
    environment variables.
    """

    def __init__(
        self,
        topology: TopologyDescription,
        config: StreamsConfig,
        *,
        instance_id: str | None = None,
        http_host: str | None = None,
        failed_exit_delay_s: float = FAILED_EXIT_DELAY_S,
    ) -> None:
        self.topology = topology
        self.config = config
        self.instance_id = instance_id if instance_id is not None else os.environ.get("STREAMAPP_INSTANCE_ID") or None
        self.http_host = http_host or os.environ.get("STREAMAPP_HTTP_HOST") or "0.0.0.0"
        self.http_port: int | None = None
        self._failed_exit_delay_s = failed_exit_delay_s
        self._stop = threading.Event()
        self._phase = "preparing"
        self._failure: Failure | None = None
        """Why the instance gave up (phase ``failed``)."""
        self._missing = MissingTopics()
        """The external topics ``_prepare_topics`` waits for (readiness reason and ``/status`` ``missing_topics``)."""
        self._heartbeat = time.time()
        self._workers = [_Worker(i) for i in range(config.num_stream_threads)]
        self._lock = threading.Lock()
        self._mp = multiprocessing.get_context("spawn")
        self._status_queue: Any = self._mp.Queue(maxsize=10_000)
        self._worker_stop: Any = self._mp.Event()
        self._queries: InteractiveQueries | None = None
        """The interactive-query entry point, once the stream threads run (``streamapp.query.router``)."""

    # -- public ------------------------------------------------------------------------------------

    def run(self) -> int:
        """Run until SIGTERM/SIGINT or ``close()``; returns the process exit code (0 after a clean stop)."""
        if not logging.getLogger().handlers:
            logging.basicConfig(
                level=logging.INFO, format="%(asctime)s %(levelname)s [supervisor] %(name)s: %(message)s"
            )
        try:
            server = self._start_server()
        except OSError as exc:
            log.error("Cannot serve HTTP on %s:%d: %s", self.http_host, self.config.http_port, exc)
            return 1
        previous_handlers = self._install_signal_handlers()
        try:
            try:
                source_topic_subtopologies(self.topology, self.config.application_id)
                check_references(self.topology)  # every module:attr at once
                configure_registry_serdes(self.config, self.topology)  # fails early: extra missing, no URL, ...
            except TopologyError as exc:
                log.error("The topology cannot run: %s", exc)
                return self._give_up(_failure("TopologyError", f"the topology cannot run: {exc}"), every_worker=True)
            refused = client_config_problems(self.config)  # before any topic exists: a typo is not a crash loop
            if refused:
                log.error("The Kafka client settings are invalid: %s", "; ".join(refused))
                return self._give_up(
                    _failure("ConfigError", f"Kafka client settings refused: {'; '.join(refused)}"), every_worker=True
                )
            if not self._prepare_topics():
                if self._failure is not None:
                    return self._give_up(self._failure, every_worker=True)
                return 0 if self._stop.is_set() else 1
            self._phase = "running"
            for worker in self._workers:
                self._start_worker(worker)
            self._queries = self._query_router()
            while not self._stop.is_set() and self._failure is None:
                self._supervise()
                self._stop.wait(0.2)
            if self._failure is not None:
                return self._give_up(self._failure)
            self._phase = "stopping"
            self._stop_workers()
            return 0
        finally:
            self._phase = "stopped"
            self._queries = None
            server.stop()
            for sig, handler in previous_handlers.items():
                signal.signal(sig, handler)

    def close(self) -> None:
        """Ask ``run()`` to stop gracefully (thread-safe)."""
        self._stop.set()

    def query(self, request: StateQueryRequest) -> StateQueryResult:
        """``KafkaStreams#query`` (IQv2, KIP-796): ``request`` answered for the whole application, each partition
        labelled active / standby / restoring (``streamapp.query.router``). Thread-safe while ``run()`` runs.
        Raises QueryError (``status`` 400 / 404; 503 before the stream threads run)."""
        return self._query_entry().query(request)

    def query_metadata_for_key(self, store: str, key: Any) -> KeyQueryMetadata:
        """``KafkaStreams#queryMetadataForKey``: the key's partition and the instances holding its task."""
        return self._query_entry().query_metadata_for_key(store, key)

    def metadata_for_all_clients(self) -> list[StreamsMetadata]:
        """``KafkaStreams#metadataForAllStreamsClients``: every instance and the store partitions it holds."""
        return self._query_entry().metadata_for_all_clients()

    def _query_entry(self) -> InteractiveQueries:
        queries = self._queries
        if queries is None:
            raise QueryError("the instance is not running yet (or any more)", status=503)
        return queries

    # -- views (used by the HTTP server) -----------------------------------------------------------

    def worker_views(self) -> list[WorkerView]:
        with self._lock:
            return [
                WorkerView(w.index, w.alive, w.started_at, w.restarts, w.status, w.exit_code, w.last_failure)
                for w in self._workers
            ]

    def liveness(self) -> tuple[bool, str]:
        return liveness(time.time(), self._heartbeat, self.worker_views())

    def readiness(self) -> tuple[bool, str]:
        return readiness(time.time(), self._phase, self.worker_views(), self._missing)

    def status(self) -> dict[str, Any]:
        """The ``/status`` document. Per worker: ``thread``, ``alive``, ``restarts``, ``exit_code``, ``error`` (the
        last error text, at most 1 KiB) and ``last_failure`` (``Failure.to_dict`` or ``None``), plus the fields
        of its latest ``WorkerStatus``. ``last_failure`` at the top: why the instance gave up (phase
        ``failed``), else ``None``; ``missing_topics``: while preparing, the source and sink topics that do not
        exist yet (``{"sources": [...], "sinks": [...], "since": epoch s}``), else ``None``."""
        ready, reason = self.readiness()
        failure = self._failure
        return {
            "application_id": self.config.application_id,
            "instance_id": self.instance_id,
            "phase": self._phase,
            "ready": ready,
            "reason": reason,
            "last_failure": failure.to_dict() if failure else None,
            "missing_topics": self._missing.to_dict() if self._missing else None,
            "workers": [_worker_status(view) for view in self.worker_views()],
        }

    # -- steps -------------------------------------------------------------------------------------

    def _install_signal_handlers(self) -> dict[signal.Signals, Any]:
        """SIGTERM and SIGINT stop ``run``; returns the handlers they replaced (restored on return)."""
        if threading.current_thread() is not threading.main_thread():
            return {}
        previous = {}
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, lambda signum, _frame: self._on_signal(signum))
        return previous

    def _on_signal(self, signum: int) -> None:
        log.info("Received %s, shutting down", signal.Signals(signum).name)
        self._stop.set()

    def _start_server(self) -> MonitoringServer:
        registry = CollectorRegistry(auto_describe=False)
        registry.register(WorkerMetricsCollector(self.worker_views, lambda: self.readiness()[0]))
        server = MonitoringServer(
            self.http_host,
            self.config.http_port,
            self.liveness,
            self.readiness,
            registry,
            self.status,
            extra_routes=QueryRoutes(lambda: self._queries),
            also_on=loopback_also(self.http_host),  # kubectl port-forward's address in a pod
        )
        server.start()
        self.http_port = server.port
        log.info("Serving health, metrics and status on %s", ", ".join(server.addresses))
        return server

    def _prepare_topics(self) -> bool:
        """Wait for the source and sink topics (an application never creates external topics), then create
        the missing internal topics. False if stopped or fatal."""
        admin = TopicAdmin(admin_config(self.config))
        sources = self.topology.external_source_topics()
        sinks = self.topology.sink_topics()
        external = sources + [t for t in sinks if t not in sources]
        started, logged_at = time.time(), None
        while not self._stop.is_set():
            self._heartbeat = time.time()
            try:
                counts = admin.partition_counts(external)
                missing = find_missing(sources, sinks, counts, started)
                if missing_topics_due(self._missing, missing, logged_at, self._heartbeat):
                    log.warning("Not ready: %s", missing.reason(self._heartbeat))
                    logged_at = self._heartbeat
                self._missing = missing
                if not missing:
                    if logged_at is not None:
                        log.info("The source and sink topics exist now")
                    internal = self.topology.internal_topics(
                        self.config.application_id, {t: counts[t] for t in sources}
                    )
                    admin.ensure_topics(
                        [TopicSpec(t.name, t.partitions, t.config) for t in internal], self.config.replication_factor
                    )
                    return True
            except TopologyError as exc:
                log.error("The topology does not fit the topics: %s", exc)
                self._failure = _failure("TopologyError", f"the topology does not fit the topics: {exc}")
                return False
            except TopicMismatchError as exc:
                log.error("The topics do not fit the topology: %s", exc)
                self._failure = _failure(type(exc).__name__, str(exc))
                return False
            except KafkaAuthenticationError as exc:  # retrying with the same credentials cannot succeed
                log.error("Kafka rejected the credentials: %s", exc)
                self._failure = _failure(type(exc).__name__, str(exc))
                return False
            except KafkaClientError as exc:
                log.warning("Cannot prepare topics yet: %s", exc)
            self._stop.wait(_TOPIC_RETRY_S)
        return False

    def _start_worker(self, worker: _Worker) -> None:
        spec = WorkerSpec(
            thread_index=worker.index,
            topology=self.topology.to_dict(),
            config=self.config.to_mapping(),
            instance_id=self.instance_id,
            log_level=logging.getLogger().getEffectiveLevel(),
        )
        supervisor_end, worker_end = self._mp.Pipe()
        process = self._mp.Process(
            target=run_worker,
            args=(spec, self._status_queue, self._worker_stop, worker_end),
            name=f"StreamThread-{worker.index}",
        )
        process.start()
        worker_end.close()  # the worker holds its own copy: the pipe closes when the worker ends
        with self._lock:
            if worker.queries is not None:
                worker.queries.close()
            worker.queries = QueryChannel(supervisor_end)
            worker.process = process
            worker.started_at = time.time()
            worker.restart_at = None
            worker.exit_code = None
            worker.status = None
        log.info("Started stream thread %d (pid %s)", worker.index, process.pid)

    def _query_router(self) -> InteractiveQueries:
        """The instance's ``InteractiveQueries``: its stream threads' query pipes and an admin client of its own
        to describe the group (``application.server`` endpoints, docs/adr/0012-query-endpoints.md)."""
        admin = TopicAdmin(admin_config(self.config), timeout_s=5.0)
        instance = self.instance_id or StateDirectory(self.config.application_state_dir).process_id()

        def channels() -> list[QueryChannel]:
            with self._lock:
                return [w.queries for w in self._workers if w.queries is not None and w.alive]

        return InteractiveQueries(
            self.topology,
            self.config,
            instance,
            channels=channels,
            describe_group=lambda: admin.describe_group(self.config.application_id),
            partition_counts=admin.partition_counts,
            running=lambda: self._phase == "running",
        )

    def _supervise(self) -> None:
        self._heartbeat = time.time()
        exited = [
            w for w in self._workers if w.process is not None and not w.process.is_alive() and w.restart_at is None
        ]
        self._drain_reports()  # after the liveness check: an exited worker's last reports are all in the queue
        now = time.time()
        for worker in exited:
            self._on_exit(worker, now)
            if self._failure is not None:
                return
        for worker in self._workers:
            if worker.restart_at is not None and now >= worker.restart_at:
                with self._lock:
                    worker.restarts += 1
                self._start_worker(worker)

    def _on_exit(self, worker: _Worker, now: float) -> None:
        """A worker process ended: schedule its restart, or give up when its thread failed too often."""
        assert worker.process is not None
        code = worker.process.exitcode
        ran_for = now - worker.started_at
        if code == EXIT_WAITING:
            delay = _WAITING_RETRY_S
        else:
            worker.backoff_s = 1.0 if ran_for > _HEALTHY_RUN_S else min(worker.backoff_s * 2, _MAX_BACKOFF_S)
            delay = worker.backoff_s
        failed = code not in (0, EXIT_WAITING)
        with self._lock:
            worker.exit_code = code
            if failed:
                if worker.failure_pid != worker.process.pid:  # died without a report: killed, or crashed hard
                    worker.last_failure = _failure("WorkerExit", f"stream thread process {_exit_text(code)}", now)
                worker.failures = [at for at in worker.failures if now - at < RESTART_WINDOW_S] + [now]
            else:
                worker.restart_at = now + delay
        if failed and not restart_allowed(worker.failures, now):
            log.error(
                "Stream thread %d failed %d times within %.0fs; shutting the instance down: %s",
                worker.index,
                len(worker.failures),
                RESTART_WINDOW_S,
                worker.last_failure.error if worker.last_failure else code,
            )
            self._failure = worker.last_failure
            return
        if failed:
            with self._lock:
                worker.restart_at = now + delay
        log.warning(
            "Stream thread %d exited with code %s after %.0fs; restarting in %.0fs", worker.index, code, ran_for, delay
        )

    def _give_up(self, failure: Failure, every_worker: bool = False) -> int:
        """Phase ``failed``: stop the workers, keep ``/status`` readable for a moment, return 1 (module docstring).
        ``every_worker``: the instance failed before its threads ran, so ``failure`` is every worker's too."""
        self._failure = failure
        if every_worker:
            with self._lock:
                for worker in self._workers:
                    worker.last_failure = failure
        self._phase = "failed"
        log.error("Giving up: %s", failure.error)
        self._stop_workers()
        _write_termination_message(failure)
        self._stop.wait(self._failed_exit_delay_s)
        return 1

    def _drain_reports(self) -> None:
        while True:
            try:
                report: WorkerStatus | ThreadFailed = self._status_queue.get_nowait()
            except queue.Empty:
                return
            if 0 <= report.thread < len(self._workers):
                worker = self._workers[report.thread]
                if worker.process is not None and worker.process.pid == report.pid:
                    with self._lock:
                        if isinstance(report, ThreadFailed):
                            worker.last_failure = report.failure
                            worker.failure_pid = report.pid
                        else:
                            worker.status = report

    def _stop_workers(self) -> None:
        if all(worker.process is None for worker in self._workers):
            return
        log.info("Stopping %d stream threads", len(self._workers))
        self._worker_stop.set()
        deadline = time.monotonic() + SHUTDOWN_TIMEOUT_S
        for worker in self._workers:
            if worker.process is None:
                continue
            while worker.process.is_alive() and time.monotonic() < deadline:
                worker.process.join(0.2)
                self._drain_reports()
            if worker.process.is_alive():
                log.error("Stream thread %d did not stop in %.0fs; killing it", worker.index, SHUTDOWN_TIMEOUT_S)
                worker.process.kill()
                worker.process.join(5)
        self._drain_reports()
        log.info("All stream threads stopped")


def _worker_status(view: WorkerView) -> dict[str, Any]:
    """One entry of ``/status`` ``workers`` (see ``KafkaStreams.status``)."""
    reported = asdict(view.status) if view.status else {}
    reported.pop("kafka_metrics", None)  # /metrics' kafka_streams_* series, not /status
    failure = view.last_failure
    error = reported.get("error") or (failure.error if failure else None)
    return {
        "thread": view.thread,
        "alive": view.alive,
        "restarts": view.restarts,
        "exit_code": view.exit_code,
        **reported,
        "error": bounded_text(error) if error else None,
        "last_failure": failure.to_dict() if failure else None,
    }


def _failure(kind: str, message: str, at: float | None = None) -> Failure:
    """A failure without a task or record: ``"<kind>: <message>"`` (bounded) at ``at`` (default now)."""
    return Failure(bounded_text(f"{kind}: {message}"), time.time() if at is None else at)


def _exit_text(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            pass
    return f"exited with code {code}"


def _write_termination_message(failure: Failure) -> None:
    """Kubernetes shows this file's content as the container's last termination message (at most 4 KiB)."""
    path = Path(os.environ.get("STREAMAPP_TERMINATION_MESSAGE_PATH") or TERMINATION_MESSAGE_PATH)
    if not path.is_file():
        return
    try:
        path.write_text(json.dumps(failure.to_dict()))
    except OSError as exc:
        log.warning("Cannot write the termination message to %s: %s", path, exc)
