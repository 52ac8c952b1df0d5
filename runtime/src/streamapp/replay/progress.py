"""Progress of a running replay, reported while Spark computes (plain Python: the operator and the CLI read it).

``run_replay(..., on_progress=callback)`` calls ``callback(ReplayProgress)`` every ``progress_interval_s`` from a
thread of the driver, and once more at the end. The numbers come from Spark: an accumulator that the stage
functions add each Arrow batch's rows to (Spark sends a task's accumulator updates when the task ends, so
``records_processed`` grows task by task) and the status tracker's task counts of the running stages.
``ReplayProgress.to_json`` is the line ``log_progress`` (the default callback) writes to the
``streamapp.replay.progress`` logger, prefixed by ``PROGRESS_PREFIX``, for whoever reads the job's log.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass

__all__ = ["PROGRESS_PREFIX", "ReplayProgress", "log_progress", "parse_progress"]

PROGRESS_PREFIX = "replay-progress "
log = logging.getLogger("streamapp.replay.progress")


@dataclass(frozen=True)
class ReplayProgress:
    """Where a replay is.

    ``phase``: ``stages`` (reading and processing the input), ``write`` (the transactional output) or ``done``.
    ``records_total``: input records of the plan's offset ranges; ``records_processed``: input records whose
    Spark task ended (all of them once ``phase`` is ``write``); ``stages_done`` / ``stages_total``: the
    sub-topologies finished; ``tasks_done`` / ``tasks_total``: Spark tasks of the stages running now;
    ``seconds``: since ``run_replay`` started.
    """

    phase: str
    records_processed: int
    records_total: int
    stages_done: int
    stages_total: int
    tasks_done: int
    tasks_total: int
    seconds: float

    @property
    def fraction(self) -> float:
        """Input records processed / input records, in [0, 1] (1 for an empty range)."""
        return 1.0 if self.records_total == 0 else min(1.0, self.records_processed / self.records_total)

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "seconds": round(self.seconds, 1)}, sort_keys=True)


def log_progress(progress: ReplayProgress) -> None:
    """The default progress callback: one INFO line ``replay-progress {json}``."""
    log.info("%s%s", PROGRESS_PREFIX, progress.to_json())


def parse_progress(line: str) -> ReplayProgress | None:
    """The progress in a log line ``log_progress`` wrote (anything before the prefix is ignored), else ``None``."""
    _, found, payload = line.partition(PROGRESS_PREFIX)
    if not found:
        return None
    try:
        return ReplayProgress(**json.loads(payload))
    except (ValueError, TypeError):
        return None
