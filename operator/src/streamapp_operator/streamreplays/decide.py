"""What a StreamReplay reconcile decides from its spec and what it observed, before any step (pure): the typed
spec, the topology it runs (one the replay cannot run is named here, not in a failed Spark run), its outputs and
new version's name free to use, and the identities it runs under (recorded once, in ``status``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from streamapp.replay.plan import check_topology
from streamapp.replay.translate import UnsupportedTopologyError
from streamapp.topology import TopologyDescription, TopologyError

from streamapp_operator.outcomes import Failed, StepOutcome, Waiting
from streamapp_operator.streamapps.resources import StreamAppSpec
from streamapp_operator.streamreplays import claims, handover, replay_plan
from streamapp_operator.streamreplays.resources import Phase, Replay, ReplayMode, StreamReplaySpec


@dataclass(frozen=True)
class Decided:
    """What was decided before the steps: the app's typed spec (None: no app), the topology the replay runs (None:
    none valid) and ``outcome``: the identity fields it records (``applicationId``, ``replayId``, ``appUid``), or
    the halt that stops the replay before its steps (waiting for its app, or failed)."""

    app_spec: StreamAppSpec | None
    description: TopologyDescription | None
    outcome: StepOutcome


def parse_spec(spec: Mapping[str, Any]) -> StreamReplaySpec | Failed:
    """The typed spec, or ``InvalidSpec`` naming what pydantic refused."""
    try:
        return StreamReplaySpec.parse(dict(spec))
    except ValidationError as exc:
        return Failed("InvalidSpec", str(exc))


def decide(
    replay: Replay,
    spec: StreamReplaySpec,
    app: Mapping[str, Any] | None,
    name_holder: Mapping[str, Any] | None,
    status: Mapping[str, Any],
) -> Decided:
    """Decide from the replayed StreamApp ``app`` (None: gone; a handover's later steps go on without it) and the
    StreamApp under the new version's name (``name_holder``, read before the Job only), in this order: the app
    exists, the topology is valid and runs in a replay, its outputs are not the app's (unless taken over), the new
    version's name is free or this replay's; then the identity fields once."""
    if app is None and status.get("phase") != Phase.HANDING_OVER.value:
        return Decided(None, None, StepOutcome(halt=Waiting(f"StreamApp {spec.app_ref.name} does not exist")))
    app_spec = StreamAppSpec.parse(app["spec"]) if app is not None else None
    description = _topology(spec, app)
    if isinstance(description, Failed):
        return Decided(app_spec, None, StepOutcome(halt=description))
    before_job = spec.mode == ReplayMode.HANDOVER and not status.get("job")
    refused = _outputs_in_use(spec, app, description) if before_job else None
    refused = refused or (_name_in_use(replay, spec, name_holder) if before_job else None)
    if refused is not None:
        return Decided(app_spec, description, StepOutcome(halt=refused))
    if app_spec is None or status.get("applicationId"):
        return Decided(app_spec, description, StepOutcome())
    app_id = replay_plan.application_id(spec, replay.name, app_spec.effective_application_id(spec.app_ref.name))
    ids = {"applicationId": app_id, "replayId": replay_plan.replay_id(replay.name, replay.uid)}
    ids["appUid"] = (app or {}).get("metadata", {}).get("uid")
    return Decided(app_spec, description, StepOutcome(status=ids))


def _topology(spec: StreamReplaySpec, app: Mapping[str, Any] | None) -> TopologyDescription | Failed:
    """The topology the replay runs (``spec.topology``, else the app's), checked before any Job: ``InvalidTopology``,
    or ``UnsupportedTopology`` naming a node type or sink the replay cannot run."""
    topology = spec.topology.to_description_dict() if spec.topology else (app or {}).get("spec", {}).get("topology")
    try:
        description = TopologyDescription.from_dict(topology or {})
        description.check_exportable()
    except (TopologyError, ValueError, KeyError) as exc:
        return Failed("InvalidTopology", f"topology: {exc}")
    try:
        check_topology(description)
    except UnsupportedTopologyError as exc:
        return Failed("UnsupportedTopology", f"topology: {exc}")
    return description


def _outputs_in_use(
    spec: StreamReplaySpec, app: Mapping[str, Any] | None, description: TopologyDescription
) -> Failed | None:
    """A handover's topology writing a topic the app writes too (``OutputInUse``) unless it takes them over."""
    if app is None:
        return None
    shared = claims.shared_outputs(description.sink_topics(), (app.get("spec") or {}).get("topology") or {})
    if not shared or handover.taking_over(spec):
        return None
    return Failed(
        "OutputInUse",
        f"the replay's topology writes {', '.join(shared)}, which StreamApp {spec.app_ref.name} writes too: "
        "the replayed history would duplicate what it wrote there; write the replay's output to a new topic, "
        "or take the app's over (handover.outputs: TakeOver)",
    )


def _name_in_use(replay: Replay, spec: StreamReplaySpec, name_holder: Mapping[str, Any] | None) -> Failed | None:
    """Before the Job: the new version's name is free or this replay's (``handover.new_version_conflict``)."""
    name = handover.new_version_name(spec, replay.name)
    claimant = handover.Claimant(replay.name, replay.uid)
    conflict = handover.new_version_conflict(name, spec.app_ref.name, name_holder, claimant)
    return Failed(*conflict) if conflict is not None else None
