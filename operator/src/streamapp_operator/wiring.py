"""kopf plumbing both Kinds' handlers share: the per-object lock table, event posting, reading kopf's
indices and the clock. Imported by ``streamapps.handlers`` and ``streamreplays.handlers`` only.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Collection, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

import kopf

from streamapp_operator.outcomes import Event

T = TypeVar("T")
logger = logging.getLogger(__name__)


class Locks:
    """One reconcile at a time per object (by uid): kopf runs the timer and change handlers of one object in
    parallel threads."""

    def __init__(self) -> None:
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def of(self, uid: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(uid, threading.Lock())

    def forget(self, uid: str) -> None:
        with self._guard:
            self._locks.pop(uid, None)


def post(body: kopf.Body, what: str, events: Iterable[Event]) -> None:
    """Post ``events`` on the object (``kopf.warn`` for Warning, ``kopf.info`` otherwise) and log each one,
    prefixed with ``what`` (e.g. ``StreamApp team-a/flights``)."""
    for event in events:
        (kopf.warn if event.type == "Warning" else kopf.info)(body, reason=event.reason, message=event.message)
        logger.info("%s: %s %s", what, event.reason, event.message)


def snapshot(index: Mapping[str, Collection[T]]) -> list[T]:
    """A copy of one of kopf's indices (its watcher changes it from another thread while it is read); an
    index that keeps changing is retried later rather than read as empty (that would pass every identity check)."""
    for _ in range(3):
        try:
            return [peer for store in list(index.values()) for peer in list(store)]
        except RuntimeError:
            time.sleep(0.01)
    raise kopf.TemporaryError("the index of StreamApps changed while it was read", delay=1)


def plain(view: Mapping[str, Any]) -> dict[str, Any]:
    """A kopf view (``spec``, ``status``) as a plain dict."""
    return {key: view[key] for key in view}


def now() -> str:
    """This instant as the API server writes one (RFC 3339, seconds, ``Z``)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
