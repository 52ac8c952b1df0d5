"""Virtual environments of the peer engines, under ``.cache/bench-venvs/<name>-<version>/`` (idempotent).

Each is made with ``hack/bin/uv venv`` (Python 3.11) and filled with ``hack/bin/uv pip install`` from PyPI (the
project's pinned uv, never one on PATH); a ``.installed`` file holding the requirement list marks a finished
install, so a second call returns at once.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

__all__ = ["PEERS", "ensure_venv"]

REPO = Path(__file__).resolve().parents[2]
VENVS = REPO / ".cache" / "bench-venvs"

PEERS: dict[str, tuple[str, list[str]]] = {
    # name: (version, requirements)
    "quixstreams": ("3.28.1", ["quixstreams==3.28.1"]),
    # rocksdict: Faust's RocksDB table store; cramjam: aiokafka's lz4 codec (the input topic is lz4)
    "faust-streaming": ("0.15.3", ["faust-streaming==0.15.3", "rocksdict==0.3.29", "cramjam==2.14.0"]),
}


def _uv() -> str:
    """The project's pinned uv (``hack/bin/uv`` installs it on first use; never one found on PATH)."""
    return str(REPO / "hack" / "bin" / "uv")


def ensure_venv(name: str) -> tuple[Path, str]:
    """The python of peer ``name``'s venv and the peer's version, creating the venv when needed."""
    version, requirements = PEERS[name]
    folder = VENVS / f"{name}-{version}"
    python = folder / "bin" / "python"
    marker = folder / ".installed"
    wanted = "\n".join(requirements)
    if marker.exists() and marker.read_text() == wanted and python.exists():
        return python, version
    uv = _uv()
    subprocess.run([uv, "venv", "--quiet", "--allow-existing", "--python", "3.11", str(folder)], check=True)
    subprocess.run([uv, "pip", "install", "--quiet", "--python", str(python), *requirements], check=True)
    marker.write_text(wanted)
    return python, version
