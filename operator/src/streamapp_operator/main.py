"""kopf start-up of the operator; run with ``kopf run --standalone -m streamapp_operator.main``.

Only start-up lives here: kopf's settings, the metrics endpoint, and the imports that register both Kinds'
handlers (``streamapps.handlers``, ``streamreplays.handlers``). kopf's record of the last handled spec is a
digest (:class:`DigestDiffBaseStorage`), so a large spec never pushes an object's annotations over the API
server's 256 KiB limit (which would make even the finalizer's removal fail).
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

import kopf

from streamapp_operator import metrics
from streamapp_operator.kinds import GROUP
from streamapp_operator.streamapps import handlers as streamapp_handlers  # registers the StreamApp handlers
from streamapp_operator.streamreplays import handlers as replay_handlers  # registers the StreamReplay handlers

__all__ = ["DigestDiffBaseStorage", "configure", "replay_handlers", "streamapp_handlers"]

logger = logging.getLogger(__name__)


class DigestDiffBaseStorage(kopf.AnnotationsDiffBaseStorage):
    """kopf's last-handled-configuration annotation holding a SHA-256 of the essence instead of the essence.

    kopf compares the stored essence with the current one to tell an update from a no-op. The reconcile is
    level-based and never reads the diff, so a digest is enough: when it matches, the current essence is
    returned (no change); otherwise the stored digest is (a change). An annotation of an older operator
    (the whole essence as JSON) is still understood and replaced at the next store.
    """

    def fetch(self, *, body: kopf.Body) -> Any:
        stored: Any = super().fetch(body=body)
        if isinstance(stored, dict) and set(stored) == {"sha256"}:
            current = self.build(body=body)
            return current if stored["sha256"] == _digest(current) else stored
        return stored

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: Any) -> None:
        digest: Any = {"sha256": _digest(essence)}
        super().store(body=body, patch=patch, essence=digest)


def _digest(essence: Any) -> str:
    return hashlib.sha256(json.dumps(essence, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


DELETION_POLL_SECONDS = 2.0
"""How often kopf re-checks, for a deleted StreamApp or StreamReplay, whether its timers have stopped."""


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    """Keep kopf's bookkeeping in small annotations (the status schema is ours), connect the seams and
    serve the metrics."""
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = DigestDiffBaseStorage(prefix=GROUP, key="last-handled-configuration")
    settings.posting.level = logging.INFO
    # A deleted StreamApp keeps kopf's finalizer until its timers have stopped; a timer caught mid-reconcile (a
    # Kafka timeout is 10 s) is re-checked after this many seconds (kopf's default, 60, held `kubectl delete`).
    settings.background.cancellation_polling = DELETION_POLL_SECONDS
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)  # one line per liveness probe otherwise
    port = metrics.serve()
    logger.info("operator metrics on port %s", port or "(disabled)")
