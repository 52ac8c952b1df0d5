"""The replay's progress reports while Spark computes (``streamapp.replay.progress``)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from pyspark.sql import SparkSession

from streamapp.replay.plan import ReplayPlan
from streamapp.replay.progress import ReplayProgress
from streamapp.replay.stages import replay_stages

__all__ = ["ProgressTracker"]


class ProgressTracker:
    """Reports ``ReplayProgress`` from a daemon thread while the replay runs (``streamapp.replay.progress``)."""

    def __init__(
        self,
        spark: SparkSession,
        plan: ReplayPlan,
        on_progress: Callable[[ReplayProgress], None] | None,
        interval_s: float,
    ) -> None:
        self.records = spark.sparkContext.accumulator(0)
        self.phase = "stages"
        self.stages_done = 0
        self._spark = spark
        self._on_progress = on_progress
        self._interval_s = interval_s
        self._stages_total = len(replay_stages(plan.description, plan.application_id))
        self._total = sum(
            end - plan.start_offsets[topic][p] for topic, ends in plan.end_offsets.items() for p, end in ends.items()
        )
        self._started = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="replay-progress", daemon=True)

    def __enter__(self) -> ProgressTracker:
        if self._on_progress is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._on_progress is not None:
            self._thread.join(self._interval_s + 5)
            if exc[0] is None:
                self._on_progress(self.snapshot())

    def snapshot(self) -> ReplayProgress:
        tasks_done = tasks_total = 0
        tracker = self._spark.sparkContext.statusTracker()
        for stage_id in tracker.getActiveStageIds():
            info = tracker.getStageInfo(stage_id)
            if info is not None:
                tasks_done += info.numCompletedTasks
                tasks_total += info.numTasks
        processed = self._total if self.phase != "stages" else min(self._total, int(self.records.value))
        return ReplayProgress(
            self.phase,
            processed,
            self._total,
            self.stages_done,
            self._stages_total,
            tasks_done,
            tasks_total,
            time.monotonic() - self._started,
        )

    def _run(self) -> None:
        assert self._on_progress is not None
        while not self._stop.wait(self._interval_s):
            try:
                self._on_progress(self.snapshot())
            except Exception:  # a report must never fail the replay
                logging.getLogger(__name__).debug("progress report failed", exc_info=True)
