"""A handover's pure decisions: :data:`HANDOVER_STEPS` and :func:`next_step` (where a handover is, from
``status.handover``), the new version's StreamApp (:func:`new_version`), the names it must not take
(:func:`new_version_conflict`: the app it replaces, a StreamApp this replay did not create; ownership by uid),
whether it caught up, and what a deleted replay leaves behind (:func:`deletion_event`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from streamapp_operator.kinds import API_VERSION, REPLAY_UID_ANNOTATION
from streamapp_operator.streamreplays.resources import (
    REPLAY_LABEL,
    HandoverStep,
    OutputsPolicy,
    ReplayMode,
    StepState,
    StreamReplaySpec,
)

#: The handover's steps, in order (each recorded Started, then Done, in ``status.handover``).
HANDOVER_STEPS = ("setGroupOffsets", "createNewVersion", "awaitCaughtUp", "removeOldVersion")


def taking_over(spec: StreamReplaySpec) -> bool:
    """Whether the replay takes the app's output topics over (``mode: handover``, ``handover.outputs: TakeOver``)."""
    return spec.mode == ReplayMode.HANDOVER and spec.handover.outputs == OutputsPolicy.TAKE_OVER


def new_version_name(spec: StreamReplaySpec, replay_name: str) -> str:
    """The new version's StreamApp name: ``handover.name``, else the StreamReplay's."""
    return spec.handover.name or replay_name


@dataclass(frozen=True)
class NewVersion:
    """The new version of a handover: its StreamApp's name, ``application.id`` and topology, and the image and
    replicas it runs with (None: the app's)."""

    name: str
    application_id: str
    topology: Mapping[str, Any]
    image: str | None = None
    replicas: int | None = None


def new_version(app: Mapping[str, Any], version: NewVersion, replay: str, replay_uid: str) -> dict[str, Any]:
    """The new version's StreamApp: the app's spec with the replay's topology and ``application.id``, and
    ``image`` and ``replicas`` when given (``handover.image``, else the StreamReplay's ``spec.image``;
    ``handover.replicas``; else the app's). Not owned by the StreamReplay (it outlives it: no owner reference);
    labelled with the replay's name and annotated with its uid (``streamapp.io/replay-uid``), which
    :func:`made_by` requires."""
    name, application_id, topology = version.name, version.application_id, version.topology
    image, replicas = version.image, version.replicas
    spec = {key: value for key, value in (app.get("spec") or {}).items()}
    spec["topology"] = dict(topology)
    spec["applicationId"] = application_id
    if image is not None:
        spec["image"] = image
    if replicas is not None:
        spec["replicas"] = replicas
    metadata = app.get("metadata") or {}
    return {
        "apiVersion": API_VERSION,
        "kind": "StreamApp",
        "metadata": {
            "name": name,
            "namespace": metadata.get("namespace"),
            "labels": {**(metadata.get("labels") or {}), REPLAY_LABEL: replay},
            "annotations": {REPLAY_UID_ANNOTATION: replay_uid},
        },
        "spec": spec,
    }


NEW_VERSION_IS_THE_APP = "NewVersionIsTheApp"
NEW_VERSION_NAME_IN_USE = "NewVersionNameInUse"


def not_made_by(
    app: Mapping[str, Any] | None,
    replay: str,
    replay_uid: str,
    recorded_uid: str | None = None,
    created_unannotated: bool = False,
) -> str | None:
    """Why StreamApp ``app`` is not the new version this StreamReplay (name ``replay``, uid ``replay_uid``)
    created, or None when it is. The label ``streamapp.io/replay=<replay>`` is not enough (a later StreamReplay
    may reuse the name, and anyone who can edit a StreamApp can label it): the annotation
    ``streamapp.io/replay-uid`` must be this replay's uid, and once the replay recorded the uid of the StreamApp it
    created (``status.newVersionUid``) it must be that StreamApp, not one made again under its name.
    ``created_unannotated``: this very StreamReplay's status says it created the new version (``createNewVersion``
    Done) but recorded no uid, as an operator before the annotation did; its label is then enough (an upgrade in
    the middle of a handover resumes). A StreamReplay of a reused name has no such status."""
    if app is None:
        return "it does not exist"
    metadata = app.get("metadata") or {}
    labelled = (metadata.get("labels") or {}).get(REPLAY_LABEL)
    if labelled != replay:
        return f"it was not created by this replay (no label {REPLAY_LABEL}={replay})"
    made_by_uid = (metadata.get("annotations") or {}).get(REPLAY_UID_ANNOTATION)
    if made_by_uid is None and created_unannotated and not recorded_uid:
        return None
    if made_by_uid != replay_uid:
        earlier = f"uid {made_by_uid}" if made_by_uid else f"no annotation {REPLAY_UID_ANNOTATION}"
        return (
            f"it was made by an earlier StreamReplay named {replay} ({earlier}), not by this one (uid {replay_uid}); "
            "a reused replay name never adopts, rewinds or deletes it"
        )
    if recorded_uid and metadata.get("uid") != recorded_uid:
        return (
            f"it is not the StreamApp this replay created (uid {metadata.get('uid')}, created uid {recorded_uid}): "
            "deleted and made again since"
        )
    return None


def made_by(app: Mapping[str, Any] | None, replay: str, replay_uid: str, recorded_uid: str | None = None) -> bool:
    """Whether StreamApp ``app`` is the new version this StreamReplay created (:func:`not_made_by`)."""
    return not_made_by(app, replay, replay_uid, recorded_uid) is None


@dataclass(frozen=True)
class Claimant:
    """The replay that would take a StreamApp as its new version: its name and uid, the uid recorded in status
    when it created one (None: not yet), and whether it created one before the uid annotation existed."""

    replay: str
    replay_uid: str
    recorded_uid: str | None = None
    created_unannotated: bool = False


def new_version_conflict(
    new_name: str, app_name: str, existing: Mapping[str, Any] | None, claimant: Claimant
) -> tuple[str, str] | None:
    """Why the new version's name cannot be used (``(reason, message)``), or None.

    The new version must not be the app it replaces (``handover.name``, by default the StreamReplay's own
    name, equal to ``appRef.name``: the handover would wait on the old app itself, then delete the only
    app), and a StreamApp already named like it is taken as the new version only when this replay created
    it (:func:`not_made_by`: its name label, its uid annotation, the uid recorded at creation): anyone else's,
    including an earlier StreamReplay's of the same name, is never adopted, rewound or deleted."""
    if new_name == app_name:
        return NEW_VERSION_IS_THE_APP, (
            f"the new version's name {new_name!r} (handover.name, by default the StreamReplay's name) is "
            f"appRef.name: the handover would replace StreamApp {app_name} by itself and delete it; set "
            "handover.name to another name"
        )
    if existing is not None:
        why = not_made_by(
            existing, claimant.replay, claimant.replay_uid, claimant.recorded_uid, claimant.created_unannotated
        )
        if why is not None:
            return NEW_VERSION_NAME_IN_USE, (
                f"StreamApp {new_name} exists and {why}; it is left untouched: set handover.name to an unused name"
            )
    return None


def caught_up(app: Mapping[str, Any] | None, max_lag: int) -> tuple[bool, str]:
    """Whether the new version is Ready, with at least one ready pod, and at most ``max_lag`` records of lag; and
    what it waits for. A version of 0 pods is Ready with lag 0 and would run nothing once the old one is gone."""
    if app is None:
        return False, "the new version does not exist yet"
    status = app.get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    lag = status.get("lag")
    if not ready:
        return False, f"the new version is not Ready yet ({status.get('ready') or '0/?'} pods)"
    if int(status.get("readyReplicas") or 0) < 1:
        return False, f"the new version has no ready pod ({status.get('ready') or '0/0'} pods)"
    if lag is None or lag > max_lag:
        return False, f"the new version's lag is {lag if lag is not None else 'unknown'} (at most {max_lag})"
    return True, f"the new version is Ready with lag {lag}"


def deletion_event(app: str, status: Mapping[str, Any]) -> tuple[str, str, str]:
    """``(type, reason, message)`` of the event a deleted StreamReplay leaves: what still runs and what is
    left. The deletion touches no StreamApp: the Job and its ConfigMap go with the StreamReplay (owner
    references: a running Spark job stops), the new
    version is not owned by it, the old one is deleted only by the handover's last step, after the new version
    caught up. So a handover cut short leaves the old version, or both versions, running, never neither."""
    phase = status.get("phase")
    steps = {str(s.get("name")): s.get("state") for s in status.get("handover") or []}
    new, group = status.get("newVersion") or "", status.get("applicationId") or ""
    if phase != "HandingOver":
        if phase in ("Succeeded", "Failed"):
            return "Normal", "ReplayDeleted", f"the replay had finished ({phase}); nothing else changes"
        return (
            "Normal",
            "ReplayDeleted",
            (
                f"a Spark job still running stops with its Job (its output keeps what it committed); StreamApp {app} "
                "is untouched"
            ),
        )
    if steps.get("removeOldVersion") is not None:
        return "Normal", "HandoverDeleted", f"the new version {new} runs; StreamApp {app} is being removed by policy"
    if steps.get("createNewVersion") is not None:
        return (
            "Warning",
            "HandoverAbandoned",
            (
                f"deleted in the middle of the handover: StreamApp {app} (old version) and {new or 'the new version'} "
                "both keep running and writing their outputs; delete the one you do not want"
            ),
        )
    return (
        "Warning",
        "HandoverAbandoned",
        (
            f"deleted before the new version was created: StreamApp {app} keeps running; the replay's consumer group "
            f"{group} and its changelog topics ({group}-*-changelog) are left for a new StreamReplay or for cleanup"
        ),
    )


def next_step(recorded: Sequence[Mapping[str, Any]] | None) -> str | None:
    """The first handover step not Done (None: the handover is complete)."""
    done = {step.get("name") for step in recorded or [] if step.get("state") == StepState.DONE}
    return next((step for step in HANDOVER_STEPS if step not in done), None)


def record_step(
    recorded: Sequence[Mapping[str, Any]] | None, name: str, state: StepState, now: str, message: str = ""
) -> list[dict[str, Any]]:
    """``status.handover`` with step ``name`` set to ``state``, steps in HANDOVER_STEPS order."""
    steps = {str(step["name"]): dict(step) for step in recorded or []}
    entry = HandoverStep(name=name, state=state, time=now, message=message or None)
    steps[name] = entry.model_dump(mode="json", by_alias=True, exclude_none=True)
    return [steps[s] for s in HANDOVER_STEPS if s in steps]
