"""Prometheus metrics of an instance, built at scrape time from the workers' latest reports.

Each worker process counts for itself and reports its counters about once a second
(``streamapp.processing.status``); the supervisor exposes them with a ``thread`` label. A restarted worker
starts its counters from zero, which Prometheus' ``rate`` treats as a counter reset.

Metric names (all prefixed ``streamapp_``): ``records_processed_total``, ``dropped_records_total``,
``commit_latency_seconds`` (histogram), ``restore_records_total``, ``restore_remaining_records`` (per task),
``store_restore_remaining_records``, ``store_restored_records`` and ``store_restore_rate_records_per_second``
(per task and store, while the task restores: Kafka Streams' ``restore-remaining-records-total``,
``restore-total`` and ``restore-rate``), ``tasks`` (per state), ``consumer_lag_records`` (per topic partition),
``worker_up``, ``worker_restarts_total``, ``ready``, ``standby_records_total``, ``dead_letter_records_total``,
``transactions_aborted_total``, ``offset_reset_skipped_records_total`` (per topic partition: records deleted
before the application read them, skipped by an offset reset).

Per task (``streamapp.processors.drops``; a task's series go when the thread no longer owns it, as Kafka removes
a closed task's metrics): ``task_dropped_records_total`` (by ``reason``, ``streamapp.drop_reasons``: Kafka's
task-level ``dropped-records-total``, its ``-rate`` is ``rate()``), ``record_lateness_avg_ms`` and
``record_lateness_max_ms`` (per time-aware ``processor``, since the task started: Kafka's ``record-lateness-avg``
/ ``-max``), ``join_misses_total`` (per stream-table or stream-global-table join ``processor``).

Kafka Streams' own metrics, in Kafka's names and tags as ``metrics.recording.level`` records them, are the
``kafka_streams_*`` families (``streamapp.monitoring.kafka_metrics``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from streamapp.monitoring.health import WorkerView
from streamapp.monitoring.kafka_metrics import families
from streamapp.processing.status import COMMIT_LATENCY_BUCKETS

__all__ = ["WorkerMetricsCollector"]

_TASK_STATES = ("created", "restoring", "running")


class WorkerMetricsCollector(Collector):
    """Collects metric families from ``workers()`` and ``ready()`` on every scrape."""

    def __init__(self, workers: Callable[[], list[WorkerView]], ready: Callable[[], bool]) -> None:
        self._workers = workers
        self._ready = ready

    def collect(self) -> Iterator[Metric]:
        workers = self._workers()
        up = GaugeMetricFamily("streamapp_worker_up", "1 when the stream thread's process is alive", labels=["thread"])
        restarts = CounterMetricFamily(
            "streamapp_worker_restarts", "Restarts of the stream thread's process", labels=["thread"]
        )
        processed = CounterMetricFamily("streamapp_records_processed", "Records processed", labels=["thread"])
        dropped = CounterMetricFamily(
            "streamapp_dropped_records",
            "Records skipped by rule (null key or value into an aggregation, late records) or by an exception handler",
            labels=["thread"],
        )
        restored = CounterMetricFamily(
            "streamapp_restore_records", "Changelog records applied by restore", labels=["thread"]
        )
        remaining = GaugeMetricFamily(
            "streamapp_restore_remaining_records", "Changelog offsets left to restore", labels=["thread", "task"]
        )
        store_remaining = GaugeMetricFamily(
            "streamapp_store_restore_remaining_records",
            "Changelog offsets left to restore, per store of a restoring task",
            labels=["thread", "task", "store"],
        )
        store_restored = GaugeMetricFamily(
            "streamapp_store_restored_records",
            "Changelog records applied by the current restore, per store of a restoring task",
            labels=["thread", "task", "store"],
        )
        store_rate = GaugeMetricFamily(
            "streamapp_store_restore_rate_records_per_second",
            "Changelog records restored per second over the last 10 s, per store of a restoring task",
            labels=["thread", "task", "store"],
        )
        tasks = GaugeMetricFamily("streamapp_tasks", "Tasks assigned, by state", labels=["thread", "state"])
        lag = GaugeMetricFamily(
            "streamapp_consumer_lag_records",
            "Records between the position and the end of an input partition",
            labels=["thread", "topic", "partition"],
        )
        commit = HistogramMetricFamily("streamapp_commit_latency_seconds", "Commit duration", labels=["thread"])
        standby = CounterMetricFamily(
            "streamapp_standby_records", "Changelog records applied to standby tasks", labels=["thread"]
        )
        dead_letters = CounterMetricFamily(
            "streamapp_dead_letter_records", "Failed records written to the dead-letter topic", labels=["thread"]
        )
        aborted = CounterMetricFamily(
            "streamapp_transactions_aborted", "Transactions aborted (exactly_once_v2)", labels=["thread"]
        )
        reset_skipped = CounterMetricFamily(
            "streamapp_offset_reset_skipped_records",
            "Records an offset reset skipped: deleted (retention, delete_records) before the application read them",
            labels=["thread", "topic", "partition"],
        )
        task_dropped = CounterMetricFamily(
            "streamapp_task_dropped_records",
            "Records a task dropped, by reason (late, null_key_or_value, invalid_timestamp, deserialization_error, "
            "processing_error)",
            labels=["thread", "task", "reason"],
        )
        lateness_avg = GaugeMetricFamily(
            "streamapp_record_lateness_avg_ms",
            "Average lateness (ms behind the processor's observed stream time) of a task's records at a time-aware "
            "processor, since the task started",
            labels=["thread", "task", "processor"],
        )
        lateness_max = GaugeMetricFamily(
            "streamapp_record_lateness_max_ms",
            "Largest lateness (ms behind the processor's observed stream time) of a task's records at a time-aware "
            "processor, since the task started",
            labels=["thread", "task", "processor"],
        )
        join_misses = CounterMetricFamily(
            "streamapp_join_misses",
            "Stream records of a stream-table or stream-global-table join that found no table value",
            labels=["thread", "task", "processor"],
        )
        for worker in workers:
            thread = str(worker.thread)
            up.add_metric([thread], 1.0 if worker.alive else 0.0)
            restarts.add_metric([thread], worker.restarts)
            status = worker.status
            if status is None:
                continue
            m = status.metrics
            processed.add_metric([thread], m.records_processed_total)
            dropped.add_metric([thread], m.dropped_records_total)
            restored.add_metric([thread], m.restore_records_total)
            standby.add_metric([thread], m.standby_records_total)
            dead_letters.add_metric([thread], m.dead_letter_records_total)
            aborted.add_metric([thread], m.transactions_aborted_total)
            for task in status.tasks:
                for reason, count in task.dropped_records.items():
                    task_dropped.add_metric([thread, task.task_id, reason], count)
                for processor, lateness in task.record_lateness.items():
                    lateness_avg.add_metric([thread, task.task_id, processor], lateness.avg_ms)
                    lateness_max.add_metric([thread, task.task_id, processor], lateness.max_ms)
                for processor, misses in task.join_misses.items():
                    join_misses.add_metric([thread, task.task_id, processor], misses)
                if task.state != "running":
                    remaining.add_metric([thread, task.task_id], task.restore_remaining)
                    for store in task.stores:
                        labels = [thread, task.task_id, store.store]
                        store_remaining.add_metric(labels, store.restore_remaining)
                        store_restored.add_metric(labels, store.restored_records)
                        if store.records_per_second is not None:
                            store_rate.add_metric(labels, store.records_per_second)
            for state in _TASK_STATES:
                tasks.add_metric([thread, state], sum(1 for t in status.tasks if t.state == state))
            for tp, records in status.consumer_lag.items():
                topic, _, partition = tp.rpartition("-")
                lag.add_metric([thread, topic, partition], records)
            for tp, records in m.offset_reset_skipped_records.items():
                topic, _, partition = tp.rpartition("-")
                reset_skipped.add_metric([thread, topic, partition], records)
            buckets: list[tuple[str, float]] = []
            cumulative = 0
            for bound, count in zip(COMMIT_LATENCY_BUCKETS, m.commit_seconds_buckets, strict=True):
                cumulative += count
                buckets.append((repr(bound), cumulative))
            buckets.append(("+Inf", m.commits_total))
            commit.add_metric([thread], buckets, m.commit_seconds_sum)
        ready = GaugeMetricFamily("streamapp_ready", "1 when the instance is ready (all tasks running)")
        ready.add_metric([], 1.0 if self._ready() else 0.0)
        yield from (up, restarts, processed, dropped, restored, remaining, tasks, lag, commit, ready)
        yield from (standby, dead_letters, aborted, reset_skipped, store_remaining, store_restored, store_rate)
        yield from (task_dropped, lateness_avg, lateness_max, join_misses)
        yield from families((str(w.thread), w.status.kafka_metrics) for w in workers if w.status is not None)
