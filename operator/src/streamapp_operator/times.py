"""RFC 3339 instants as the API server writes them (``2026-11-24T20:00:00Z``) and the operator stamps them."""

from __future__ import annotations

from datetime import datetime


def seconds_between(earlier: str, later: str) -> float:
    """Seconds from ``earlier`` to ``later`` (RFC 3339, ``Z`` or an offset; negative when ``later`` is earlier).

    Raises ValueError for another shape."""
    return (datetime.fromisoformat(later) - datetime.fromisoformat(earlier)).total_seconds()
