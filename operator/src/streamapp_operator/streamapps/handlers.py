"""kopf registration of the StreamApp Kind (imported by ``streamapp_operator.main``).

One level-based :func:`streamapp_operator.streamapps.reconcile.reconcile` is registered for create, update,
resume and a timer (every ``RECONCILE_INTERVAL`` s, and every ``rollout.ROLLOUT_INTERVAL`` s while a rollout
is in progress, so the next pod goes soon after the previous one is back), and its result is written back
through kopf (status patch, events); :func:`streamapp_operator.streamapps.reconcile.cleanup` runs on deletion
behind kopf's finalizer (``kopf.zalando.org/KopfFinalizerMarker``, added to every StreamApp; see
docs/operator.md "Deletion"). An index of every StreamApp's ``application.id`` feeds the identity check.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections.abc import Collection, Mapping
from typing import Any

import kopf

from streamapp_operator import metrics
from streamapp_operator.identity import Peer, replay_peer
from streamapp_operator.instances import HttpInstanceReader
from streamapp_operator.k8s import KubernetesCluster, KubernetesUnavailable
from streamapp_operator.kafka import AdminPool, KafkaUnavailable
from streamapp_operator.kinds import GROUP, PLURALS, VERSION
from streamapp_operator.outcomes import Event
from streamapp_operator.streamapps import reconcile, rollout
from streamapp_operator.streamapps.resources import PLURAL
from streamapp_operator.wiring import Locks, now, plain, post, snapshot

#: Seconds between two level-based reconciles of an unchanged StreamApp (status, lag, recovery).
RECONCILE_INTERVAL = 10.0
#: Seconds before retrying after the API server failed.
RETRY_DELAY = 10.0
#: Seconds between two cleanup attempts of a deleted StreamApp, and how many attempts before giving up
#: (a Warning event says what is left; the finalizer goes, so deletion never hangs for ever).
CLEANUP_DELAY = 5.0
CLEANUP_ATTEMPTS = 60

logger = logging.getLogger(__name__)

_world: reconcile.World | None = None
_admins = AdminPool()
_locks = Locks()


@kopf.on.startup()
def configure_streamapps(**_: Any) -> None:
    """Connect the StreamApp Kind's seams: the API server, Kafka admin clients, the pods' ``/status``."""
    global _world
    _world = reconcile.World(cluster=KubernetesCluster(), kafka_for=_admins.admin_for, instances=HttpInstanceReader())


@kopf.index(GROUP, VERSION, PLURAL)
def application_ids(meta: kopf.Meta, spec: kopf.Spec, status: kopf.Status, **_: Any) -> dict[str, Peer]:
    """Every StreamApp the operator watches, by uid, with each ``application.id`` it claims: the spec's (or the
    name) and, when an upgrade runs it under another one (``upgradePolicy: newApplicationId``:
    ``<id>-g<generation>``), the one in ``status.applicationId`` its pods use."""
    name, uid = str(meta["name"]), str(meta["uid"])
    claimed = [str(spec.get("applicationId") or name), str(status.get("applicationId") or "")]
    return {
        f"{uid}/{application_id}": Peer(
            namespace=str(meta["namespace"]),
            name=name,
            uid=uid,
            created=str(meta.get("creationTimestamp", "")),
            application_id=application_id,
        )
        for application_id in dict.fromkeys(claimed)
        if application_id
    }


@kopf.index(GROUP, VERSION, PLURALS["StreamReplay"])
def replay_application_ids(meta: kopf.Meta, status: kopf.Status, **_: Any) -> dict[str, Peer]:
    """Every StreamReplay in flight, by uid, with the ``application.id`` it runs under (``identity.replay_peer``):
    claimed like a StreamApp's, so that a StreamApp created after it cannot take it."""
    peer = replay_peer(meta, status)
    return {peer.uid: peer} if peer is not None else {}


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL)
@kopf.timer(GROUP, VERSION, PLURAL, interval=RECONCILE_INTERVAL, initial_delay=RECONCILE_INTERVAL)
def reconcile_streamapp(
    body: kopf.Body,
    meta: kopf.Meta,
    spec: kopf.Spec,
    status: kopf.Status,
    patch: kopf.Patch,
    **kwargs: Any,
) -> None:
    """Reconcile one StreamApp and record the outcome; never raises for an invalid StreamApp."""
    if _world is None:
        raise kopf.TemporaryError("the operator is still starting", delay=1)
    app = _app(meta)
    world = dataclasses.replace(
        _world,
        kafka_for=functools.partial(_admins.admin_for, user=app.uid),
        peers=functools.partial(_peers, kwargs["application_ids"], kwargs["replay_application_ids"]),
    )
    started = time.monotonic()
    with _locks.of(app.uid):
        try:
            result = reconcile.reconcile(app, plain(spec), plain(status), world, now())
        except KubernetesUnavailable as exc:
            metrics.ERRORS.inc()
            raise kopf.TemporaryError(str(exc), delay=RETRY_DELAY) from exc
        finally:
            metrics.RECONCILE_SECONDS.observe(time.monotonic() - started)
    patch.status.update(result.status)
    metrics.record(app.namespace, app.name, result.status)
    post(body, _what(app), result.events)


def rolling_out(status: kopf.Status, **_: Any) -> bool:
    """kopf's filter of :func:`advance_rollout`: the StreamApp's status records a rollout in progress. kopf
    re-evaluates it at every change of the StreamApp (its status included), starting and stopping the timer."""
    return rollout.in_progress(status)


@kopf.timer(GROUP, VERSION, PLURAL, interval=rollout.ROLLOUT_INTERVAL, when=rolling_out)
def advance_rollout(**kwargs: Any) -> None:
    """The same reconcile, every ``rollout.ROLLOUT_INTERVAL`` seconds while a rollout is in progress (the
    10 s timer would hold each pod up to 10 s after the previous one is back); the per-app lock keeps it from
    running beside another reconcile of the same app."""
    reconcile_streamapp(**kwargs)


@kopf.on.delete(GROUP, VERSION, PLURAL)
def delete_streamapp(
    body: kopf.Body, meta: kopf.Meta, spec: kopf.Spec, status: kopf.Status, retry: int, **_: Any
) -> None:
    """Clean up after a deleted StreamApp (``spec.cleanupPolicy``); retried every few seconds while its pods
    stop, at most ``CLEANUP_ATTEMPTS`` times, then given up with a Warning event: never a hung deletion."""
    app = _app(meta)
    if _world is None:
        raise kopf.TemporaryError("the operator is still starting", delay=1)
    if app.paused:
        post(body, _what(app), [Event("Warning", "CleanupSkipped", "paused: nothing was cleaned up")])
        _forget(app)
        return
    world = dataclasses.replace(_world, kafka_for=functools.partial(_admins.admin_for, user=app.uid))
    with _locks.of(app.uid):
        try:
            done = reconcile.cleanup(app, plain(spec), plain(status), world)
        except (KubernetesUnavailable, KafkaUnavailable) as exc:
            done = reconcile.Cleanup(done=False, waiting=str(exc))
    post(body, _what(app), done.events)
    if not done.done:
        if retry + 1 < CLEANUP_ATTEMPTS:
            raise kopf.TemporaryError(f"cleanup waits: {done.waiting}", delay=CLEANUP_DELAY)
        message = f"gave up cleaning up after {CLEANUP_ATTEMPTS} attempts: {done.waiting}"
        post(body, _what(app), [Event("Warning", "CleanupIncomplete", message)])
    _forget(app)


def _forget(app: reconcile.App) -> None:
    _admins.release(app.uid)
    metrics.forget(app.namespace, app.name)
    _locks.forget(app.uid)


def _peers(apps: Mapping[str, Collection[Peer]], replays: Mapping[str, Collection[Peer]]) -> list[Peer]:
    """Who claims which ``application.id``: the StreamApps and the StreamReplays in flight."""
    return [*snapshot(apps), *snapshot(replays)]


def _app(meta: Mapping[str, Any]) -> reconcile.App:
    return reconcile.App(
        name=str(meta["name"]),
        namespace=str(meta["namespace"]),
        uid=str(meta["uid"]),
        generation=int(meta.get("generation", 0)),
        created=str(meta.get("creationTimestamp", "")),
        annotations={str(k): str(v) for k, v in (meta.get("annotations") or {}).items()},
    )


def _what(app: reconcile.App) -> str:
    return f"StreamApp {app.namespace}/{app.name}"
