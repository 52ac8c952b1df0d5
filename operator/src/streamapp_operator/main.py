"""kopf registration of the StreamApp operator; run with ``kopf run --standalone -m streamapp_operator.main``.

Only wiring lives here: one level-based :func:`streamapp_operator.reconcile.reconcile` is registered for
create, update, resume and a timer, and its result is written back through kopf (status patch, events).
Children are owned through ownerReferences, so deletion is left to the garbage collector: no finalizer.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import kopf

from streamapp_operator import kafka, reconcile
from streamapp_operator.instances import HttpInstanceReader
from streamapp_operator.k8s import KubernetesCluster, KubernetesUnavailable
from streamapp_operator.resources import GROUP, PLURAL, VERSION

#: Seconds between two level-based reconciles of an unchanged StreamApp (status, lag, recovery).
RECONCILE_INTERVAL = 10.0
#: Seconds before retrying after the API server failed.
RETRY_DELAY = 10.0

logger = logging.getLogger(__name__)

_world: reconcile.World | None = None
_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    """Keep kopf's bookkeeping in annotations (the status schema is ours) and connect the seams."""
    global _world
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=GROUP, key="last-handled-configuration"
    )
    settings.posting.level = logging.INFO
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)  # one line per liveness probe otherwise
    _world = reconcile.World(cluster=KubernetesCluster(), kafka_for=kafka.admin_for, instances=HttpInstanceReader())


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL)
@kopf.timer(GROUP, VERSION, PLURAL, interval=RECONCILE_INTERVAL, initial_delay=RECONCILE_INTERVAL)
def reconcile_streamapp(
    body: kopf.Body, meta: kopf.Meta, spec: kopf.Spec, status: kopf.Status, patch: kopf.Patch, **_: Any
) -> None:
    """Reconcile one StreamApp and record the outcome; never raises for an invalid StreamApp."""
    if _world is None:
        raise kopf.TemporaryError("the operator is still starting", delay=1)
    app = reconcile.App(
        name=str(meta["name"]),
        namespace=str(meta["namespace"]),
        uid=str(meta["uid"]),
        generation=int(meta.get("generation", 0)),
    )
    with _lock(app.uid):
        try:
            result = reconcile.reconcile(app, _plain(spec), _plain(status), _world, _now())
        except KubernetesUnavailable as exc:
            raise kopf.TemporaryError(str(exc), delay=RETRY_DELAY) from exc
    patch.status.update(result.status)
    for event in result.events:
        if event.type == "Warning":
            kopf.warn(body, reason=event.reason, message=event.message)
        else:
            kopf.info(body, reason=event.reason, message=event.message)
        logger.info("StreamApp %s/%s: %s %s", app.namespace, app.name, event.reason, event.message)


def _lock(uid: str) -> threading.Lock:
    """One reconcile at a time per StreamApp: the timer and change handlers run in parallel threads."""
    with _locks_guard:
        return _locks.setdefault(uid, threading.Lock())


def _plain(view: Mapping[str, Any]) -> dict[str, Any]:
    return {key: view[key] for key in view}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
