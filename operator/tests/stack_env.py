"""The local stack's environment for the operator's integration tests (``hack/stack/up.sh`` writes it)."""

from __future__ import annotations

import os
from pathlib import Path


def stack_env() -> dict[str, str]:
    """The variables ``hack/stack/up.sh`` wrote (``.cache/run/env``), for a run outside ``source``."""
    path = Path(__file__).resolve().parents[2] / ".cache" / "run" / "env"
    lines = path.read_text().splitlines() if path.exists() else []
    pairs = (line.removeprefix("export ").partition("=") for line in lines if "=" in line)
    return {key.strip(): value.strip().strip('"') for key, _, value in pairs}


def stack_variable(name: str) -> str:
    """``name`` from the environment, else from the stack's env file; fails when neither has it."""
    value = os.environ.get(name) or stack_env().get(name)
    assert value, f"{name} is needed: the local stack's (hack/stack/up.sh)"
    return value
