"""kopf registration of the StreamReplay controller (imported by ``streamapp_operator.main``).

One level-based :func:`streamapp_operator.streamreplays.reconcile.reconcile_replay` for create, resume and a timer
(a StreamReplay's spec is immutable, so there is no update); its status goes back through kopf's patch.
The replay image comes from the operator's environment (``STREAMAPP_REPLAY_IMAGE``, set by the chart).
"""

from __future__ import annotations

import functools
import logging
import os
from typing import Any

import kopf

from streamapp_operator.k8s import KubernetesCluster, KubernetesUnavailable
from streamapp_operator.kafka import AdminPool
from streamapp_operator.kinds import GROUP, VERSION
from streamapp_operator.streamreplays.claims import ReplayClaim, sink_topics_of
from streamapp_operator.streamreplays.context import DEFAULT_IMAGE, Replay, ReplayWorld
from streamapp_operator.streamreplays.handover import deletion_event
from streamapp_operator.streamreplays.reconcile import reconcile_replay
from streamapp_operator.streamreplays.resources import PLURAL, Phase
from streamapp_operator.streamreplays.takeover import replicas_to_restore
from streamapp_operator.wiring import Locks, now, plain, post, snapshot

#: kopf's index of every StreamApp's ``application.id`` (``streamapp_operator.streamapps.handlers.application_ids``).
PEERS_INDEX = "application_ids"
#: kopf's index of the StreamReplays that have not finished (:func:`replay_claims`).
REPLAYS_INDEX = "replay_claims"
#: Seconds between two reconciles of a StreamReplay that is not finished (Job progress, handover steps).
REPLAY_INTERVAL = 5.0
#: Phases after which nothing changes: no timer runs for them.
FINISHED = frozenset({Phase.SUCCEEDED.value, Phase.FAILED.value})

logger = logging.getLogger(__name__)
_world: ReplayWorld | None = None
_admins = AdminPool()
_locks = Locks()


@kopf.on.startup()
def configure_replays(**_: Any) -> None:
    global _world
    _world = ReplayWorld(
        cluster=KubernetesCluster(),
        kafka_for=_admins.admin_for,
        image=os.environ.get("STREAMAPP_REPLAY_IMAGE") or DEFAULT_IMAGE,
    )


def unfinished(status: kopf.Status, **_: Any) -> bool:
    """kopf's filter of :func:`advance_streamreplay`: the replay is neither Succeeded nor Failed. kopf evaluates
    it at every change of the StreamReplay (its status included), so a finished replay's timer stops."""
    return status.get("phase") not in FINISHED


@kopf.timer(GROUP, VERSION, PLURAL, interval=REPLAY_INTERVAL, initial_delay=REPLAY_INTERVAL, when=unfinished)
def advance_streamreplay(**kwargs: Any) -> None:
    """The same reconcile every ``REPLAY_INTERVAL`` seconds while the replay is not finished (Job progress,
    handover steps); the per-replay lock keeps it from running beside another reconcile of the same replay."""
    reconcile_streamreplay(**kwargs)


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
def reconcile_streamreplay(body: kopf.Body, patch: kopf.Patch, **kwargs: Any) -> None:
    """Reconcile one StreamReplay (``body``: its metadata, spec and status) and record the outcome in ``patch``;
    never raises for an invalid one.

    kopf hands every handler the operator's indices: ``application_ids`` (``main.py``, every StreamApp's
    ``application.id``) is the identity check's ``peers``."""
    if _world is None:
        raise kopf.TemporaryError("the operator is still starting", delay=1)
    meta, spec, status = body.meta, body.spec, body.status
    replay = Replay(
        str(meta["name"]),
        str(meta["namespace"]),
        str(meta["uid"]),
        int(meta.get("generation", 0)),
        str(meta.get("creationTimestamp", "")),
    )
    peers = snapshot(kwargs[PEERS_INDEX])
    replays = snapshot(kwargs[REPLAYS_INDEX])
    world = ReplayWorld(
        cluster=_world.cluster,
        kafka_for=functools.partial(_admins.admin_for, user=replay.uid),
        image=_world.image,
        peers=lambda: peers,
        replays=lambda: replays,
    )
    with _locks.of(replay.uid):
        try:
            result = reconcile_replay(replay, dict(spec), plain(status), world, now())
        except KubernetesUnavailable as exc:
            raise kopf.TemporaryError(str(exc), delay=REPLAY_INTERVAL) from exc
    patch.status.update(result.status)
    post(body, f"StreamReplay {replay.namespace}/{replay.name}", result.events)


@kopf.on.delete(GROUP, VERSION, PLURAL, optional=True)
def forget_streamreplay(body: kopf.Body, meta: kopf.Meta, spec: kopf.Spec, status: kopf.Status, **_: Any) -> None:
    """The Job and its ConfigMap go with the StreamReplay (owner references); no StreamApp is touched, and an
    event says what still runs (``handover.deletion_event``); forget its admin client. A reconcile in flight
    finishes first (the same lock)."""
    uid = str(meta["uid"])
    with _locks.of(uid):
        app = str((spec.get("appRef") or {}).get("name", ""))
        kind, reason, message = deletion_event(app, status)
        replicas = replicas_to_restore(status)
        if replicas is not None and _world is not None:  # a TakeOver cut short: the old version goes on
            try:
                _world.cluster.scale_streamapp(str(meta["namespace"]), app, replicas)
            except KubernetesUnavailable as exc:  # retried: the finalizer holds the deletion until it is done
                raise kopf.TemporaryError(f"scaling StreamApp {app} back to {replicas}: {exc}", delay=5) from exc
            message += f"; StreamApp {app} (stopped for outputs: TakeOver) scaled back to {replicas}"
    (kopf.warn if kind == "Warning" else kopf.info)(body, reason=reason, message=message)
    logger.info("StreamReplay %s/%s deleted: %s %s", meta["namespace"], meta["name"], reason, message)
    _admins.release(uid)
    _locks.forget(uid)


@kopf.index(GROUP, VERSION, PLURAL)
def replay_claims(meta: kopf.Meta, spec: kopf.Spec, status: kopf.Status, **_: Any) -> dict[str, ReplayClaim]:
    """Every StreamReplay that has not finished, by uid: the app it replays and the topics it writes
    (``claims.replay_conflicts`` keeps two of them from writing the same history)."""
    phase = str(status.get("phase") or "")
    if phase in FINISHED:
        return {}
    namespace = str(meta["namespace"])
    app = str((spec.get("appRef") or {}).get("name") or "")
    claim = ReplayClaim(
        namespace=namespace,
        name=str(meta["name"]),
        uid=str(meta["uid"]),
        created=str(meta.get("creationTimestamp", "")),
        app=f"{namespace}/{app}",
        sinks=sink_topics_of(spec.get("topology")),
        phase=phase,
    )
    return {claim.uid: claim}
