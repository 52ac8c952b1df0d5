"""Operations on a running StreamApp, wired into reconcile: the upgrade-compatibility check
(``spec.upgradePolicy``), the declarative reset (``spec.reset``) and autoscaling (``spec.autoscaling``).

The decisions are the pure modules' (``upgrade.decide_upgrade``, ``reset.next_step``, ``autoscale.decide``);
this module feeds them what reconcile observed and acts on their answers at one step, :func:`run_operations`,
the first of ``reconcile.STEPS``:

- :func:`check_upgrade` (before anything is observed) compares the topology the app runs (the ConfigMap the
  operator wrote) with the spec's. A change that breaks state and ``refuse`` is a problem
  (``IncompatibleTopologyChange``): no step runs, the running workload stays untouched, and the condition
  ``UpgradeCompatible=False`` names each change. ``newApplicationId`` changes the ``application.id`` the
  children are built with; ``reset`` starts a reset (nonce ``upgrade-<generation>``) and the new topology
  rolls when it is done.
- :func:`plan_operations` (after observing, before the children are built) decides the reset's next step and
  the autoscaler's replicas. Both only change the replicas the StatefulSet is built with (``spec.replicas`` is
  never written: Git stays the truth); while a reset runs the autoscaler is paused.
- :func:`run_operations` writes ``status.reset`` *before* the reset's action (resetting offsets, deleting
  internal topics, deleting state volumes), so an operator killed in between repeats an idempotent step.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import yaml
from pydantic import ValidationError
from streamapp.kafka.reset_plan import is_internal_topic
from streamapp.topology import TopologyDescription, TopologyError
from streamapp.topology.compatibility import compare

from streamapp_operator.k8s import Cluster
from streamapp_operator.kafka import KafkaAdmin
from streamapp_operator.outcomes import Condition, Event, Problem, transition
from streamapp_operator.streamapps import desired
from streamapp_operator.streamapps.autoscale import Decision, Observed, ScalingHistory, decide
from streamapp_operator.streamapps.conditions import condition_order
from streamapp_operator.streamapps.observe import Observation, topology_topics
from streamapp_operator.streamapps.reset import ResetObserved, ResetSpec, ResetStatus, Step, next_step
from streamapp_operator.streamapps.resources import App, StreamAppSpec
from streamapp_operator.streamapps.upgrade import UPGRADE_COMPATIBLE, decide_upgrade

INCOMPATIBLE_TOPOLOGY_CHANGE = "IncompatibleTopologyChange"
STATE_CLAIM = "state"
"""The volumeClaimTemplate of the StatefulSet: its claims are ``state-<app>-<ordinal>``."""


@dataclass(frozen=True)
class Upgrade:
    """What :func:`check_upgrade` decided: the ``application.id`` to run with, the ``UpgradeCompatible``
    condition (None: no topology to compare, the previous one stays), a problem (``refuse``), a reset to run
    first (``reset``), the ``status.upgrade`` to write (None: unchanged) and an event."""

    application_id: str
    condition: tuple[str, str, str] | None = None
    problem: Problem | None = None
    reset: ResetSpec | None = None
    status: dict[str, Any] | None = None
    events: list[Event] = field(default_factory=list)


def running_application_id(spec_application_id: str, previous_status: Mapping[str, Any]) -> str:
    """The ``application.id`` the app runs with: ``status.applicationId`` when it is the spec's or one that
    ``upgradePolicy: newApplicationId`` derived from it (``<id>-g<generation>``), else the spec's (a
    changed ``spec.applicationId`` is a new application)."""
    running = previous_status.get("applicationId")
    if isinstance(running, str) and (running == spec_application_id or running.startswith(f"{spec_application_id}-g")):
        return running
    return spec_application_id


def running_topology(config_map: Mapping[str, Any] | None, uid: str) -> tuple[TopologyDescription | None, str]:
    """The topology and ``application.id`` in the ConfigMap the operator wrote for the StreamApp with ``uid``
    (None and "": none yet, someone else's, or unreadable)."""
    if config_map is None or not desired.owned_by(config_map, uid):
        return None, ""
    data = config_map.get("data") or {}
    try:
        streams = yaml.safe_load(data.get(desired.STREAMS_FILE) or "") or {}
        topology = TopologyDescription.from_yaml(data[desired.TOPOLOGY_FILE])
    except (KeyError, TopologyError, yaml.YAMLError):
        return None, ""
    return topology, str(streams.get("application.id", "")) if isinstance(streams, dict) else ""


def check_upgrade(
    app: App,
    spec: StreamAppSpec,
    topology: TopologyDescription | None,
    config_map: Mapping[str, Any] | None,
    previous_status: Mapping[str, Any],
) -> Upgrade:
    """Compare the running topology (in the app's ``config_map`` as read: None, absent) with ``topology`` (the
    spec's) and decide by ``spec.upgradePolicy`` (pure).

    ``UpgradeCompatible`` appears with the first topology change (none before: nothing was compared), and
    stays, updated, from then on. A running topology of another ``application.id`` (``spec.applicationId``
    changed) is not compared: a new application starts without state."""
    spec_id = spec.effective_application_id(app.name)
    running_id = running_application_id(spec_id, previous_status)
    generation = app.generation
    if topology is None:
        return Upgrade(running_id)
    running, running_as = running_topology(config_map, app.uid)
    if running is None or running_as != running_id:
        return Upgrade(running_id)
    report = compare(running, topology)
    decision = decide_upgrade(
        report,
        spec.upgrade_policy,
        spec_application_id=spec_id,
        running_application_id=running_id,
        generation=generation,
    )
    condition = (decision.status, decision.reason, decision.message)
    if decision.action == "roll":
        shown = any(c.get("type") == UPGRADE_COMPATIBLE for c in previous_status.get("conditions") or [])
        return Upgrade(decision.application_id, condition if report.findings or shown else None)
    status = {
        "generation": generation,
        "action": decision.action,
        "applicationId": decision.application_id,
        "message": decision.message,
        "specResetNonce": spec.reset.nonce if spec.reset is not None else None,
    }
    before = previous_status.get("upgrade") or {}
    changed = (before.get("generation"), before.get("action")) != (generation, decision.action)
    # a refusal is a problem: Degraded's transition already makes a Warning event with its reason
    events = [] if decision.action == "refuse" else [Event("Normal", decision.reason, decision.message)]
    problem = Problem(INCOMPATIBLE_TOPOLOGY_CHANGE, decision.message) if decision.action == "refuse" else None
    return Upgrade(
        application_id=decision.application_id,
        condition=condition,
        problem=problem,
        reset=decision.reset,
        status=status if changed else None,
        events=events if changed else [],
    )


def with_upgrade_condition(
    conditions: Sequence[Mapping[str, Any]],
    previous: Sequence[Mapping[str, Any]],
    condition: tuple[str, str, str] | None,
    generation: int,
    now: str,
) -> list[dict[str, Any]]:
    """``conditions`` with ``UpgradeCompatible`` set to ``condition`` (status, reason, message), its
    ``lastTransitionTime`` kept while the status stays; ``None`` carries the previous one over."""
    old = next((dict(c) for c in previous if c.get("type") == UPGRADE_COMPATIBLE), None)
    others = [dict(c) for c in conditions if c.get("type") != UPGRADE_COMPATIBLE]
    if condition is None:
        return others + ([old] if old is not None else [])
    status, reason, message = condition
    made = transition(old, Condition(UPGRADE_COMPATIBLE, status, reason, message, generation), now)
    return sorted([*others, made], key=lambda c: condition_order(str(c.get("type"))))


@dataclass(frozen=True)
class Operations:
    """What :func:`plan_operations` decided: the reset's step (None: no reset asked), the replicas the
    StatefulSet is built with, the autoscaler's decision (None: off or paused) and the status fields."""

    replicas: int
    reset: Step | None = None
    autoscaling: Decision | None = None
    status: dict[str, Any] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    application_id: str = ""
    input_topics: tuple[str, ...] = ()
    claims: tuple[tuple[str, str], ...] = ()
    owned_topics: frozenset[str] = frozenset()

    @property
    def resetting(self) -> bool:
        """A reset runs and the application must not run (nor its internal topics be created) yet."""
        step = self.reset.status.step if self.reset is not None and self.reset.status is not None else "done"
        return step not in ("scaleBack", "done")


@dataclass(frozen=True)
class Planning:
    """What :func:`plan_operations` decides from: the app, its spec, the upgrade decided, the topology and its
    task count, what was observed, the previous status and the autoscaler's clock (``now``, epoch seconds)."""

    app: App
    spec: StreamAppSpec
    upgrade: Upgrade
    topology: TopologyDescription
    tasks: int
    observation: Observation
    previous_status: Mapping[str, Any]
    now: float


def plan_operations(planning: Planning, cluster: Cluster) -> Operations:
    """The reset's next step and the autoscaler's replicas for one reconcile (reads the state claims while
    a reset runs; the pods' processed-records counters come from the observation; acts on nothing)."""
    spec, upgrade, observation = planning.spec, planning.upgrade, planning.observation
    previous_status = planning.previous_status
    stateful_set = observation.stateful_set
    current = int(stateful_set["spec"].get("replicas", 0)) if stateful_set is not None else spec.replicas
    application_id = upgrade.application_id
    every, consumed = topology_topics(planning.topology, application_id)
    inputs = tuple(t for t in consumed if not is_internal_topic(application_id, t))
    owned = frozenset([*every, *(previous_status.get("createdTopics") or [])]) - set(inputs)
    step, claims = _reset_step(planning, cluster, current)
    status: dict[str, Any] = {}
    events: list[Event] = []
    if step is not None and step.status is not None:
        status["reset"] = step.status.model_dump(mode="json", by_alias=True)
    if upgrade.status is not None:
        status["upgrade"] = upgrade.status
    operations = Operations(current, step, None, status, events, application_id, inputs, claims, owned)
    if operations.resetting or (step is not None and step.replicas is not None):
        replicas = step.replicas if step is not None and step.replicas is not None else 0
        return replace(operations, replicas=replicas)
    if spec.autoscaling is None:
        if previous_status.get("autoscaling") is not None:
            status["autoscaling"] = None  # turned off: spec.replicas applies again
        return replace(operations, replicas=spec.replicas)
    decision, autoscaling = _autoscale(planning, current)
    status["autoscaling"] = autoscaling
    if decision.replicas != current:
        kind = "ScaledUp" if decision.replicas > current else "ScaledDown"
        events.append(Event("Normal", kind, f"{current} -> {decision.replicas} replicas: {decision.reason}"))
    return replace(operations, replicas=decision.replicas, autoscaling=decision)


def _reset_step(planning: Planning, cluster: Cluster, replicas: int) -> tuple[Step | None, tuple[tuple[str, str], ...]]:
    """The reset's next step (``reset.next_step``), and the state claims (name, uid) when one runs."""
    spec, upgrade, previous_status = planning.spec, planning.upgrade, planning.previous_status
    name, namespace = planning.app.name, planning.app.namespace
    before = _reset_status(previous_status.get("reset"))
    asked = spec.reset
    covered = (previous_status.get("upgrade") or {}).get("specResetNonce")
    if asked is not None and before is not None and before.nonce.startswith("upgrade-") and asked.nonce == covered:
        asked = None  # the upgrade's reset began while this nonce was set: it is done by it
    asked = upgrade.reset or asked
    if asked is None and (before is None or before.step == "done"):
        return None, ()
    if before is None and asked is spec.reset and asked is not None and "observedGeneration" not in previous_status:
        # a new StreamApp (or one re-created from Git) that already carries spec.reset: its nonce is taken as
        # done, not run, so re-creating an app never resets its group by surprise
        message = f"reset {asked.nonce} was in spec.reset when the StreamApp was created: not run (change the nonce)"
        adopted = ResetStatus(nonce=asked.nonce, to=asked.to, offsets=asked.offsets, step="done",
                              replicas_before=replicas, message=message)  # fmt: skip
        return Step("none", adopted, message), ()
    observation = planning.observation
    group = observation.group
    claims = _state_claims(name, cluster.list_claims(namespace, desired.selector(name)))
    observed = ResetObserved(
        replicas=replicas,
        pods=len(observation.pods),
        group_members=len(group.members) if group is not None else 0,
        state_volumes=len(claims),
    )
    return next_step(asked, before, observed), claims


def _reset_status(raw: Any) -> ResetStatus | None:
    if not isinstance(raw, Mapping):
        return None
    try:
        return ResetStatus.model_validate(raw)
    except ValidationError:
        return None


def _state_claims(name: str, claims: Sequence[Mapping[str, Any]]) -> tuple[tuple[str, str], ...]:
    """(name, uid) of the claims of the StatefulSet's ``state`` volumeClaimTemplate: ``state-<name>-<n>``,
    labelled with the app's selector labels (listed by them). A claim being deleted (``deletionTimestamp``,
    held by a finalizer) gets uid ``""``: it still counts, so that no pod starts on it, but is not deleted again."""
    prefix = f"{STATE_CLAIM}-{name}-"
    found = []
    for claim in claims:
        metadata = claim.get("metadata") or {}
        claim_name = str(metadata.get("name", ""))
        if claim_name.startswith(prefix) and claim_name.removeprefix(prefix).isdigit():
            found.append((claim_name, "" if metadata.get("deletionTimestamp") else str(metadata.get("uid", ""))))
    return tuple(sorted(found))


def _autoscale(planning: Planning, current: int) -> tuple[Decision, dict[str, Any]]:
    """``autoscale.decide`` on the group's lag and the pods' processing rate (the observation's processed-records
    total: the pods' ``/status`` is read once per reconcile, by ``observe``); ``status.autoscaling``."""
    spec, tasks, observation, now = planning.spec, planning.tasks, planning.observation, planning.now
    previous_status = planning.previous_status
    assert spec.autoscaling is not None
    before = previous_status.get("autoscaling") or {}
    history = _history(before)
    target = spec.autoscaling.target
    sample: dict[str, Any] = {}
    rate: float | None = 0.0
    if target.lag_per_task is None:
        processed = observation.processed
        rate = processing_rate(before.get("processedTotal"), before.get("sampledAt"), processed, now)
        sample = {"processedTotal": processed, "sampledAt": now,
                  "recordsPerSecond": round(rate, 3) if rate is not None else None}  # fmt: skip
    group = observation.group
    observed = Observed(
        replicas=current,
        threads_per_pod=spec.threads,
        tasks=tasks,
        total_lag=group.lag if group is not None else 0,
        records_per_second=rate or 0.0,
    )
    if rate is None:  # a rate target without two samples: hold (within the bounds), as an HPA without metrics
        ceiling = spec.autoscaling.max_replicas
        if tasks > 0:
            ceiling = min(ceiling, math.ceil(tasks / max(1, spec.threads)))
        held = max(min(current, ceiling), min(spec.autoscaling.min_replicas, ceiling))
        reason = f"no processing rate yet (two samples of the pods' processed-records counters): {held} pod(s)"
        decision = Decision(held, reason, held, history)
    else:
        decision = decide(spec.autoscaling, observed, history, now)
    status = {
        "replicas": decision.replicas,
        "reason": decision.reason,
        "recommendation": decision.recommendation,
        **decision.history.model_dump(mode="json", by_alias=True),
        **sample,
    }
    return decision, status


def _history(raw: Mapping[str, Any]) -> ScalingHistory:
    """The ``autoscale.ScalingHistory`` kept in ``status.autoscaling`` (empty when absent or unreadable)."""
    kept = {k: raw[k] for k in ("recommendations", "lastScaleUpAt", "lastScaleDownAt") if raw.get(k) is not None}
    try:
        return ScalingHistory.model_validate(kept)
    except ValidationError:
        return ScalingHistory()


def processing_rate(before: Any, before_at: Any, total: int | None, now: float) -> float | None:
    """Records per second between two samples of the processed-records counter; None when unknown (first
    sample, no pod answered, or the counter went down: a pod restarted or was scaled away)."""
    if total is None or not isinstance(before, int) or not isinstance(before_at, int | float) or now <= before_at:
        return None
    if total < before:
        return None
    return (total - before) / (now - before_at)


def run_operations(
    operations: Operations,
    cluster: Cluster,
    kafka: KafkaAdmin,
    namespace: str,
    name: str,
) -> tuple[list[Event], dict[str, Any]]:
    """Write ``status.reset`` (the step about to run) first, then do the reset's action through the seams:
    commit the target offsets (``KafkaAdmin.reset_offsets``), delete the internal topics, or delete the state
    claims; then the step's ``after`` status. Scaling is the StatefulSet's replicas (applied by a later step).
    Returns the events and status fields to write."""
    status = dict(operations.status)
    events = list(operations.events)
    step = operations.reset
    if step is None or step.status is None or step.action in ("none", "wait"):
        return events, status
    cluster.patch_streamapp_status(namespace, name, {"reset": status["reset"]})
    app_id = operations.application_id
    if step.action == "resetOffsets":
        committed = kafka.reset_offsets(app_id, list(operations.input_topics), step.status.spec().target())
        message = f"Reset {committed} partition(s) of {app_id} to {step.status.to}"
        events.append(Event("Normal", "ResetOffsets", message))
    elif step.action == "deleteInternalTopics":
        # Kafka's rule (the name) and ours (the topology's, or created by this operator for this app): a prefix
        # alone would also match another application whose id starts with this one's
        deleted = kafka.delete_topics([t for t in kafka.internal_topics(app_id) if t in operations.owned_topics])
        events.append(Event("Normal", "ResetTopicsDeleted", f"Deleted internal topics: {', '.join(deleted) or 'none'}"))
    elif step.action == "deleteLocalState":
        deleting = [(claim, uid) for claim, uid in operations.claims if uid]
        for claim, uid in deleting:
            cluster.delete("PersistentVolumeClaim", namespace, claim, uid)
        if deleting:
            listed = ", ".join(claim for claim, _ in deleting)
            events.append(Event("Normal", "ResetStateDeleted", f"Deleted state volumes {listed}"))
    elif step.action in ("scaleToZero", "scaleBack"):
        events.append(Event("Normal", "Reset", f"reset {step.status.nonce}: {step.message}"))
    if step.after is not None:
        status["reset"] = step.after.model_dump(mode="json", by_alias=True)
    return events, status


def epoch() -> float:
    """Now, in seconds since the epoch (the autoscaler's clock)."""
    return time.time()
