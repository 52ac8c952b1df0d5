"""``streamapp replay run``: progress reports reach stderr while the result stays stdout's last line.

Spark is replaced at one seam (``streamapp.replay.build_session`` / ``run_replay``): the replay engine itself is
tested in ``tests/replay``; here only what the command does with the engine's reports and result.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import streamapp.replay
import yaml
from click.testing import CliRunner
from streamapp.cli import main
from streamapp.replay.progress import ReplayProgress, parse_progress

PLAN = {
    "replayId": "flights-v2-1",
    "bootstrapServers": "127.0.0.1:9092",
    "topology": {
        "nodes": [
            {"name": "in", "type": "source", "topics": ["flights"], "keySerde": "string", "valueSerde": "json"},
            {"name": "out", "type": "sink", "input": "in", "topic": "copy", "keySerde": "string", "valueSerde": "json"},
        ]
    },
    "config": {"application.id": "flights-v2"},
    "from": {"flights": {0: 0}},
    "to": {"flights": {0: 10}},
    "partitions": {"copy": 1},
}


@dataclass
class _Result:
    records_read: dict[str, int] = field(default_factory=lambda: {"flights": 10})
    records_written: dict[str, int] = field(default_factory=lambda: {"copy": 10})


def _progress(phase: str, processed: int) -> ReplayProgress:
    return ReplayProgress(phase, processed, 10, 0, 1, 0, 2, 1.5)


def test_replay_run_prints_each_progress_report_on_stderr_and_the_result_last_on_stdout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: dict[str, Any] = {}

    def run_replay(session: object, plan: Any, **options: Any) -> _Result:
        calls.update(options, session=session, plan=plan)
        for phase, processed in (("stages", 4), ("write", 10), ("done", 10)):
            options["on_progress"](_progress(phase, processed))
        return _Result()

    monkeypatch.setattr(streamapp.replay, "build_session", lambda master, **_: f"session {master}", raising=False)
    monkeypatch.setattr(streamapp.replay, "run_replay", run_replay, raising=False)
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump(PLAN))

    result = CliRunner().invoke(main, ["replay", "run", "--plan", str(plan), "--master", "local[1]"])

    assert result.exit_code == 0, result.output
    assert calls["session"] == "session local[1]" and calls["plan"].replay_id == "flights-v2-1"
    reports = [parse_progress(line) for line in result.stderr.splitlines()]
    assert reports == [_progress("stages", 4), _progress("write", 10), _progress("done", 10)]
    assert [r.fraction for r in reports if r is not None] == [0.4, 1.0, 1.0]
    last = result.stdout.strip().splitlines()[-1]
    assert json.loads(last) == {"records_read": {"flights": 10}, "records_written": {"copy": 10}}
    assert "replay-progress" not in result.stdout
