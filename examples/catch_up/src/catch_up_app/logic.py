"""User functions of the catch-up example (the runtime imports them as ``catch_up_app.logic:<name>``)."""

from __future__ import annotations

from typing import Any


def country(key: str | None, view: dict[str, Any]) -> str:
    """The new key of a page view: its country."""
    return str(view["country"])
