"""The worker process of one stream thread: builds its clients and stores, runs the StreamThread.

Started by the supervisor (``streamapp.app.KafkaStreams``) with the ``spawn`` method, so a worker shares
nothing with its parent but the arguments: the topology and config as plain data, a status queue and a
stop event. SIGTERM (also sent to a whole pod's process group) asks for a clean stop; SIGINT is ignored
so that Ctrl-C reaches the supervisor, which stops the workers in order. A worker whose supervisor
died stops by itself.

Memory: before anything else a worker caps glibc's malloc arenas at ``MALLOC_ARENA_MAX_DEFAULT`` (2) with
``mallopt``, unless the environment sets ``MALLOC_ARENA_MAX`` (glibc then applied that value at startup). glibc
otherwise gives each of librdkafka's ~15 threads its own arena (up to 8 x cores); records allocated in a broker
thread and freed by the stream thread leave those arenas fragmented, which cost ~50 MiB of RSS when building a
1M-key store (docs/execution.md).

Reports: ``WorkerStatus`` about once a second; when the stream thread fails, a last ``ThreadFailed`` with the
``Failure`` (task, record and error text, ``streamapp.processing.errors.failure_of``) before the process exits, so
that the supervisor can show it in ``/status`` and count it against its restart limit.

Exit codes: 0 after a clean stop, ``EXIT_WAITING`` when the broker still holds this thread's
``group.instance.id`` (restart later), 1 on any other failure.
"""

from __future__ import annotations

import contextlib
import copy
import ctypes
import gc
import logging
import os
import queue
import signal
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from streamapp.config import StreamsConfig
from streamapp.kafka.admin import TopicAdmin
from streamapp.kafka.clients import (
    KafkaConsumer,
    KafkaProducer,
    KafkaRestoreConsumer,
    admin_config,
    consumer_config,
    producer_config,
    restore_consumer_config,
)
from streamapp.kafka.global_consumer import KafkaGlobalConsumer, global_consumer_config
from streamapp.kafka.schema_registry import configure_registry_serdes
from streamapp.kafka.types import UnreleasedInstanceIdError
from streamapp.processing.errors import failure_of
from streamapp.processing.global_thread import global_store_specs
from streamapp.processing.queries import LocalQuery, answer
from streamapp.processing.status import ThreadFailed, ThreadMetrics, WorkerStatus
from streamapp.processing.stream_thread import StreamThread
from streamapp.query.channel import serve_queries
from streamapp.query.requests import QueryResult
from streamapp.state.directory import StateDirectory
from streamapp.state.rocksdb import RocksDBMemory, RocksDBStore
from streamapp.topology import TopologyDescription

__all__ = [
    "EXIT_WAITING",
    "MALLOC_ARENA_MAX_DEFAULT",
    "WorkerSpec",
    "answer_query",
    "limit_malloc_arenas",
    "run_worker",
]

log = logging.getLogger(__name__)

EXIT_WAITING = 75
"""Exit code (EX_TEMPFAIL) of a worker that could not join the group yet; the supervisor retries later."""

MALLOC_ARENA_MAX_DEFAULT = 2
"""glibc malloc arenas of a worker process unless ``MALLOC_ARENA_MAX`` is set (see the module docstring)."""
_M_ARENA_MAX = -8  # glibc's mallopt parameter number (malloc.h)


@dataclass(frozen=True)
class WorkerSpec:
    """Everything a worker process needs, as picklable plain data."""

    thread_index: int
    topology: dict[str, Any]
    config: dict[str, Any]
    instance_id: str | None
    log_level: int = logging.INFO


def run_worker(spec: WorkerSpec, status_queue: Any, stop_event: Any, queries: Any = None) -> None:
    """Process entry point: run one stream thread until ``stop_event`` is set; exits with a code. ``queries``: the
    worker's end of its query pipe (``streamapp.query.channel``), answered between loop iterations."""
    arenas = limit_malloc_arenas(os.environ)
    logging.basicConfig(
        level=spec.log_level,
        format=f"%(asctime)s %(levelname)s [StreamThread-{spec.thread_index}] %(name)s: %(message)s",
    )
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: stop_event.set())

    def report(status: WorkerStatus | ThreadFailed) -> None:
        with contextlib.suppress(queue.Full):
            status_queue.put_nowait(copy.deepcopy(status))

    parent = os.getppid()

    def stopping() -> bool:
        # a supervisor that died without stopping us (SIGKILL) leaves us re-parented: stop as well
        return bool(stop_event.is_set()) or os.getppid() != parent

    log.debug("malloc arenas limited to %s", arenas or os.environ.get("MALLOC_ARENA_MAX", "glibc's default"))
    try:
        thread = _build(spec, report)
        # the interpreter's, the libraries' and the topology's objects live as long as the process: out of the
        # collector's sight, a full collection no longer walks them (half the worker's GC time on the windowed count)
        gc.freeze()
        thread.run(stopping, None if queries is None else lambda: serve_queries(queries, partial(answer_query, thread)))
    except UnreleasedInstanceIdError as exc:
        log.warning("Stream thread %d cannot join yet: %s", spec.thread_index, exc)
        sys.exit(EXIT_WAITING)
    except Exception as exc:
        log.exception("Stream thread %d failed", spec.thread_index)
        with contextlib.suppress(Exception):  # best effort: the exit code alone still counts as a failure
            report(ThreadFailed(spec.thread_index, os.getpid(), failure_of(exc, time.time())))
        sys.exit(1)  # the queue's feeder thread flushes the report before the process ends
    log.info("Stream thread %d stopped", spec.thread_index)


def answer_query(thread: StreamThread, request: LocalQuery) -> list[QueryResult]:
    """``thread``'s answers to an interactive query from the tasks and standbys it holds
    (``streamapp.processing.queries``)."""
    standbys = thread.standbys.tasks if thread.standbys is not None else {}
    return answer(request, thread.description, thread.tasks.tasks, standbys)


def limit_malloc_arenas(environ: Mapping[str, str]) -> int | None:
    """Cap glibc's malloc arenas of this process at ``MALLOC_ARENA_MAX_DEFAULT`` while few threads exist.

    Returns the cap set, or ``None`` when ``environ`` has ``MALLOC_ARENA_MAX`` (glibc already applied it) or the
    C library is not glibc (no ``mallopt``, or it refused). Never raises.
    """
    if "MALLOC_ARENA_MAX" in environ:
        return None
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 - glibc only: musl's mallopt ignores M_ARENA_MAX
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return None
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return MALLOC_ARENA_MAX_DEFAULT if mallopt(_M_ARENA_MAX, MALLOC_ARENA_MAX_DEFAULT) == 1 else None


def _build(spec: WorkerSpec, report: Any) -> StreamThread:
    config = StreamsConfig.from_mapping(spec.config)
    description = TopologyDescription.from_dict(spec.topology)
    functions = description.resolve_functions()
    configure_registry_serdes(config, description)  # avro/protobuf serdes of this process (docs/serdes.md)
    memory = RocksDBMemory(config.rocksdb_block_cache_bytes, config.rocksdb_write_buffer_bytes)
    index, instance = spec.thread_index, spec.instance_id
    log.info("Stream thread %d starting in process %d", index, os.getpid())
    process_id = instance or StateDirectory(config.application_state_dir).process_id()
    settings = producer_config(config, index, instance, process_id)
    thread: StreamThread | None = None
    admin = TopicAdmin(admin_config(config), timeout_s=5.0)

    def delivery_failed(topic: str, key: bytes | None, value: bytes | None, error: str) -> bool:
        return thread is not None and thread.handlers.delivery_failed(topic, key, value, error)

    def new_producer() -> KafkaProducer:
        return KafkaProducer(settings, on_delivery_error=delivery_failed)

    metrics = ThreadMetrics()
    consumer = KafkaConsumer(
        consumer_config(config, index, instance, process_id), on_offset_reset=metrics.observe_offset_reset
    )
    thread = StreamThread(
        index=index,
        config=config,
        description=description,
        functions=functions,
        consumer=consumer,
        metrics=metrics,
        producer=new_producer(),
        restore_consumer=KafkaRestoreConsumer(restore_consumer_config(config, index, instance)),
        store_factory=lambda name, path: RocksDBStore(name, path, memory),
        report=report,
        producer_factory=new_producer,
        global_consumer=(
            KafkaGlobalConsumer(global_consumer_config(config, index, instance))
            if global_store_specs(description)
            else None
        ),
        instance=instance or process_id,
        describe_group=lambda: admin.describe_group(config.application_id),
        records_deleter=admin,  # repartition.purge.interval.ms (streamapp.processing.purge)
    )
    return thread
