"""Identity and ownership rules both Kinds apply before they touch anything: one ``application.id`` per
consumer group (Kafka Streams: the id is the group, the ``group.instance.id`` prefix and the internal-topic
prefix), and only children that carry the object's owner reference are applied over or deleted
(Kubernetes garbage collection follows ``ownerReferences``). Pure: plain data in, :class:`Problem` out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from streamapp_operator.kinds import REPLAY_UID_ANNOTATION, owned_by
from streamapp_operator.outcomes import Problem

APPLICATION_ID_IN_USE = "ApplicationIdInUse"

FOREIGN_OBJECT = "ForeignObject"

CONSUMER_GROUP_IN_USE = "ConsumerGroupInUse"


@dataclass(frozen=True)
class Peer:
    """A StreamApp of the cluster as the operator's index knows it: who claims which ``application.id``."""

    namespace: str
    name: str
    uid: str
    created: str
    """``metadata.creationTimestamp`` (RFC 3339): the older app keeps a contested id."""
    application_id: str
    kind: str = "StreamApp"
    """``StreamReplay`` for a replay in flight (:func:`replay_peer`): its ``status.applicationId``."""


#: A StreamReplay's phases after which it claims no ``application.id`` any more (``streamreplays.resources.Phase``).
REPLAY_FINISHED = frozenset({"Succeeded", "Failed"})


def replay_peer(metadata: Mapping[str, Any], status: Mapping[str, Any]) -> Peer | None:
    """A StreamReplay that has not finished, as the claimant of the ``application.id`` it runs under
    (``status.applicationId``: its changelog and repartition topics' prefix, a handover's new version's consumer
    group); None once it is Succeeded or Failed, or before it chose one. A StreamApp created after it cannot take
    that id while it runs (:func:`identity_conflicts`); the new version its handover creates is its own
    (:func:`claims_of_others`)."""
    application_id = str(status.get("applicationId") or "")
    if not application_id or str(status.get("phase") or "") in REPLAY_FINISHED:
        return None
    return Peer(
        namespace=str(metadata.get("namespace", "")),
        name=str(metadata.get("name", "")),
        uid=str(metadata.get("uid", "")),
        created=str(metadata.get("creationTimestamp", "")),
        application_id=application_id,
        kind="StreamReplay",
    )


def claims_of_others(peers: Iterable[Peer], annotations: Mapping[str, str]) -> list[Peer]:
    """``peers`` without the StreamReplay that created this StreamApp as its handover's new version (its uid in the
    annotation ``streamapp.io/replay-uid``): the new version runs under the replay's ``application.id`` by design."""
    made_by = annotations.get(REPLAY_UID_ANNOTATION)
    return [p for p in peers if not (p.kind == "StreamReplay" and made_by and p.uid == made_by)]


def identity_conflicts(me: Peer, peers: Iterable[Peer]) -> list[Problem]:
    """An ``application.id`` is a consumer group, a ``group.instance.id`` prefix and an internal-topic
    prefix in one Kafka cluster, so two StreamApps must never share one: they would split the input
    partitions, or fence each other's static members for ever, and both look healthy.

    The app created first keeps the id (ties: namespace/name); ``me`` is refused naming the other one. A
    StreamReplay in flight (:func:`replay_peer`) claims its id the same way: a StreamApp created after it is
    refused until it has finished.
    """
    rivals = [p for p in peers if p.application_id == me.application_id and p.uid != me.uid]
    older = sorted((p for p in rivals if (p.created, p.namespace, p.name) < (me.created, me.namespace, me.name)),
                   key=lambda p: (p.created, p.namespace, p.name))  # fmt: skip
    if not older:
        return []
    first = older[0]
    return [
        Problem(
            APPLICATION_ID_IN_USE,
            f"application.id {me.application_id!r} is already used by {first.kind} {first.namespace}/{first.name}"
            + (" (a replay in flight: it runs under that id until it finishes)" if first.kind == "StreamReplay" else "")
            + "; set a unique spec.applicationId (the default is metadata.name, unique only within a namespace)",
        )
    ]


def foreign_children(
    owner_uid: str, children: Mapping[str, Mapping[str, Any] | None], owner_kind: str = "StreamApp"
) -> list[Problem]:
    """Children that exist without ``owner_uid`` (an ``owner_kind``) among their ownerReferences (``kind ->
    object``): made by someone else, so never applied over (server-side apply would take over their fields) nor
    deleted (our owner reference would hand them to the garbage collector)."""
    problems = []
    for kind, obj in children.items():
        if obj is None:
            continue
        metadata = obj.get("metadata") or {}
        if owned_by(obj, owner_uid):
            continue
        problems.append(
            Problem(
                FOREIGN_OBJECT,
                f"{kind} {metadata.get('name')} exists and is not owned by this {owner_kind}; "
                f"it is left untouched: rename or delete it, or give the {owner_kind} another name",
            )
        )
    return problems


def foreign_claims(
    claims: Mapping[str, Mapping[str, Any] | None],
    labels: Mapping[str, str],
    stateful_set_uid: str | None,
    owner_kind: str = "StreamApp",
) -> list[Problem]:
    """State claims (``name -> claim``, None: absent) that the app's StatefulSet would mount but that are
    someone else's: without the app's selector ``labels`` (what its volumeClaimTemplate gives every claim it
    makes), or owned by anything but the app's StatefulSet (uid ``stateful_set_uid``). Never mounted (the pod
    would read and write another team's volume) nor deleted (``cleanupPolicy: Delete`` hands the claims the
    StatefulSet uses to the garbage collector)."""
    problems = []
    for name, claim in sorted(claims.items()):
        if claim is None:
            continue
        metadata = claim.get("metadata") or {}
        missing = sorted(key for key, value in labels.items() if (metadata.get("labels") or {}).get(key) != value)
        owners = [ref for ref in metadata.get("ownerReferences") or [] if ref.get("uid") != stateful_set_uid]
        if not missing and not owners:
            continue
        why = (
            f"lacks the labels {', '.join(f'{k}={labels[k]}' for k in missing)}"
            if missing
            else f"is owned by {owners[0].get('kind')} {owners[0].get('name')}"
        )
        problems.append(
            Problem(
                FOREIGN_OBJECT,
                f"PersistentVolumeClaim {name} exists and is not this {owner_kind}'s state volume (it {why}); it is "
                f"neither mounted nor deleted: rename or delete it, or give the {owner_kind} another name",
            )
        )
    return problems


def foreign_members(application_id: str, client_ids: Sequence[str], stateful_set: str) -> list[Problem]:
    """Members of the app's consumer group that are not stream threads of its own pods (client id
    ``<application.id>-<stateful_set>-<ordinal>-StreamThread-<n>-consumer``, with the pod's advertised
    ``@<application.server>`` for interactive queries or without; any ordinal, so that a member of a pod just
    scaled away, which the broker keeps until its session times out, is still ours): joining would split the
    partitions with them."""
    pattern = re.compile(
        rf"{re.escape(application_id)}-{re.escape(stateful_set)}-\d+-StreamThread-\d+-consumer(?:@[^@\s]+)?"
    )
    strangers = sorted({c for c in client_ids if not pattern.fullmatch(c)})
    if not strangers:
        return []
    shown = ", ".join(strangers[:5]) + (f" and {len(strangers) - 5} more" if len(strangers) > 5 else "")
    return [
        Problem(
            CONSUMER_GROUP_IN_USE,
            f"consumer group {application_id!r} has members that are not this StreamApp's pods ({shown}); "
            "set a unique spec.applicationId or stop the other consumers",
        )
    ]
