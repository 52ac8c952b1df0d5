"""A worker process caps glibc's malloc arenas before it creates any client (pure: no broker, no process)."""

from __future__ import annotations

import ctypes
import logging
import sys
from typing import Any

import pytest
from streamapp.processing import worker
from streamapp.processing.worker import MALLOC_ARENA_MAX_DEFAULT, WorkerSpec, limit_malloc_arenas


def _glibc() -> bool:
    try:
        ctypes.CDLL(None).gnu_get_libc_version  # noqa: B018
    except (OSError, AttributeError):
        return False
    return True


@pytest.mark.skipif(not sys.platform.startswith("linux") or not _glibc(), reason="glibc only")
def test_arenas_are_capped_at_two_without_an_environment_setting() -> None:
    assert MALLOC_ARENA_MAX_DEFAULT == 2
    assert limit_malloc_arenas({}) == 2


def test_an_environment_setting_wins() -> None:
    assert limit_malloc_arenas({"MALLOC_ARENA_MAX": "8"}) is None


def test_run_worker_caps_arenas_before_building_its_clients(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(worker, "limit_malloc_arenas", lambda environ: calls.append("arenas") or 2)

    def build(spec: Any, report: Any) -> Any:
        calls.append("build")
        raise RuntimeError("stop here")

    monkeypatch.setattr(worker, "_build", build)
    monkeypatch.setattr(worker.signal, "signal", lambda *args: None)
    spec = WorkerSpec(thread_index=0, topology={}, config={}, instance_id=None, log_level=logging.WARNING)
    with pytest.raises(SystemExit):
        worker.run_worker(spec, status_queue=None, stop_event=None)
    assert calls == ["arenas", "build"]
