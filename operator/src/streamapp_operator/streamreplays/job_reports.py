"""What the replay's Job says, read from plain data: its phase from the Job's conditions (Kubernetes' ``Complete``
and ``Failed``), the last ``replay-progress`` report and the result line of its pod's log, the records its done
markers count, and the ``progress`` texts of ``status``. Pure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from streamapp.drop_reasons import status_counts
from streamapp.replay.progress import ReplayProgress, parse_progress

from streamapp_operator.streamreplays.handover import HANDOVER_STEPS


@dataclass(frozen=True)
class JobState:
    """The Job's outcome: ``phase`` is Running, Succeeded or Failed; ``reason`` and ``message`` say why."""

    phase: str
    reason: str = ""
    message: str = ""


def job_state(job: Mapping[str, Any] | None) -> JobState:
    """The replay's phase from its Job's status conditions (``Complete`` / ``Failed``)."""
    if job is None:
        return JobState("Pending", "JobMissing", "the Job does not exist yet")
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("status") != "True":
            continue
        if condition.get("type") == "Complete":
            return JobState("Succeeded", "JobComplete", "the Spark job finished")
        if condition.get("type") == "Failed":
            return JobState("Failed", str(condition.get("reason") or "JobFailed"), str(condition.get("message") or ""))
    status = job.get("status") or {}
    if status.get("active"):
        return JobState("Running", "JobRunning", f"{status['active']} pod(s) running")
    return JobState("Running", "JobStarting", "waiting for the Job's pod")


def replay_result(log: str) -> dict[str, Any] | None:
    """The JSON line ``streamapp replay run`` prints last (records read and written, seconds), if any."""
    for line in reversed(log.strip().splitlines()):
        line = line.strip()
        if line.startswith("{") and '"records_written"' in line:
            try:
                found: dict[str, Any] = json.loads(line)
            except ValueError:
                return None
            return found
    return None


def dropped_records(result: Mapping[str, Any] | None) -> dict[str, int] | None:
    """``status.droppedRecords`` from a replay's result (``dropped_records``: ``{reason: records}``, the
    ``streamapp.drop_reasons`` names), every reason under its status key; None without a result or from a runtime
    that does not report drops."""
    reported = result.get("dropped_records") if result is not None else None
    if not isinstance(reported, dict):
        return None
    return status_counts({str(k): v for k, v in reported.items() if type(v) is int and v >= 0})


def records_in_markers(values: Sequence[bytes]) -> int:
    """Records a replay wrote, from its done markers (``{"topic", "partition", "chunk", "records"}`` each,
    ``streamapp.replay.output``; a compacted topic may still hold a chunk's marker twice: counted once)."""
    chunks: dict[tuple[str, int, int], int] = {}
    for value in values:
        marker = json.loads(value)
        chunks[(str(marker["topic"]), int(marker["partition"]), int(marker["chunk"]))] = int(marker["records"])
    return sum(chunks.values())


def failure_detail(log: str, limit: int = 600) -> str:
    """The end of the replay pod's log that says why it failed (a click error, a Python exception)."""
    lines = [line for line in log.strip().splitlines() if line.strip()]
    for line in reversed(lines):
        if line.startswith(("Error:", "ERROR")) or "Error" in line.split(":")[0]:
            return line[:limit]
    return " | ".join(lines[-3:])[-limit:]


def termination_message(pods: Sequence[Mapping[str, Any]], container: str = "replay") -> str:
    """The termination message of ``container`` in the last of ``pods`` (``state``, else ``lastState``,
    ``.terminated.message``: what the container wrote to ``/dev/termination-log``), or "": the cause when the API
    cannot serve the pod's log."""
    for pod in reversed(pods):
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            if status.get("name") != container:
                continue
            for state in (status.get("state") or {}, status.get("lastState") or {}):
                message = str((state.get("terminated") or {}).get("message") or "").strip()
                if message:
                    return message
    return ""


def latest_progress(log: str) -> ReplayProgress | None:
    """The last progress report in the replay pod's log (``streamapp replay run`` writes one line
    ``replay-progress {json}`` per report, ``streamapp.replay.progress``); None when there is none yet."""
    for line in reversed(log.splitlines()):
        report = parse_progress(line)
        if report is not None:
            return report
    return None


def progress_fields(report: ReplayProgress) -> dict[str, Any]:
    """Status fields of a progress report: input records processed, the percent of them (an integer: Kubernetes
    API conventions avoid floats in status) and the job's phase (``stages``: reading and processing the input,
    ``write``: the transactional output, ``done``; ``streamapp.replay.progress.ReplayProgress``)."""
    return {
        "recordsProcessed": report.records_processed,
        "percentProcessed": _percent(report),
        "jobPhase": report.phase,
    }


def _percent(report: ReplayProgress) -> int:
    return int(report.fraction * 100)


def progress_text(
    phase: str,
    *,
    seconds: int | None = None,
    step: str | None = None,
    written: int | None = None,
    report: ReplayProgress | None = None,
) -> str:
    """The printer column's progress, e.g. ``spark job running 40s, stages: 1200/5000 records processed (24%)``."""
    if phase == "Starting":  # the Job's pod has no started container yet (``step``: Kubernetes' reason, if any)
        waited = f"spark job not started after {seconds}s" if seconds is not None else "spark job starting"
        return f"{waited}: {step}" if step else waited
    if phase == "Running":
        running = f"spark job running {seconds}s" if seconds is not None else "spark job starting"
        if report is not None:
            done = f"{report.records_processed}/{report.records_total} records processed ({_percent(report)}%)"
            running += f", {report.phase}: {done}"
        return f"{running}, {written} records written" if written else running
    if phase == "HandingOver" and step is not None:
        return f"handover {HANDOVER_STEPS.index(step) + 1}/{len(HANDOVER_STEPS)}: {step}"
    if phase == "Succeeded":
        return f"done, {written} records written" if written is not None else "done"
    return phase.lower()
