"""The StreamApp controller: a level-based, idempotent reconcile as observe, validate, then named steps.

The same :func:`reconcile` runs for create, update, resume and every timer tick; it never branches on what
triggered it. It reads the world (``observe``), decides what is wrong (``validate``: the spec and its
``streams.yaml`` by the runtime's own ``StreamsConfig``, the ``application.id`` against every other
StreamApp, children someone else owns, the topology against Kafka, strangers in the consumer group), builds
every desired child, and only when nothing is wrong runs :data:`STEPS` (``steps.run_steps``):

0. ``operate``: the declarative reset's action, its step written to status first, and the autoscaler's
   decision (``operations``; they set the replicas the StatefulSet is built with, never ``spec``); while a
   reset stops the app, its internal topics and ConfigMap are not applied;
1. ``dry_run_children``: the API server validates and admits every child without storing any, so a child
   it refuses never leaves a half-applied app (a new ConfigMap beside an old StatefulSet);
2. ``create_internal_topics``: repartition and changelog topics with the partition counts the topology
   implies; their names are recorded (``status.createdTopics``: only those are deleted on cleanup);
3. ``apply_config_map``: topology and runtime configuration;
4. ``apply_service``: the headless Service;
5. ``apply_stateful_set``: the pods; a change of their template (or of the ConfigMap's hash) is applied with
   the rolling update's partition at ``replicas``, so that it replaces no pod by itself; the intent
   (``Progressing=True``, ``status.rollout``) is written to status first;
6. ``apply_disruption_budget``: the PodDisruptionBudget, applied, or deleted when there must be none;
7. ``roll_pods``: a rollout hands the next pod to the StatefulSet controller (its partition lowered by one)
   when the previous one is back, Ready, restored and the consumer group Stable (``rollout.plan_rollout``);
   ``status.rollout`` is written before (ADR 0009);
8. ``retain_state_volumes``: the state volumes of scaled-away pods are marked with the time, reused by a
   scale-up, and deleted after ``spec.state.retainAfterScaleDown`` (``volumes.plan_claims``);
9. ``release_departed_members``: the static group members of pods a scale-down removed leave the consumer group
   now (``rollout.departed_members``), so their partitions move without waiting for the session timeout; a pod
   restarted by a rollout keeps its membership.

An invalid StreamApp leaves its running workload untouched and is reported (``Degraded``), never raised: the
result is a status and events, which ``main.py`` writes through kopf. Only a failed read of the API server
propagates (``k8s.KubernetesUnavailable``) so that kopf retries. The annotation ``streamapp.io/paused:
"true"`` stops all of it for one app (``status.paused``). :func:`cleanup` runs when a StreamApp is deleted
(``spec.cleanupPolicy``).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from streamapp.config import StreamsConfig
from streamapp.kafka.config_check import client_config_problems
from streamapp.topology import TopologyDescription

from streamapp_operator.connection import KafkaConnection, kafka_connection
from streamapp_operator.identity import (
    Peer,
    claims_of_others,
    foreign_children,
    foreign_claims,
    foreign_members,
    identity_conflicts,
)
from streamapp_operator.instances import InstanceReader
from streamapp_operator.k8s import Cluster
from streamapp_operator.kafka import KafkaAdmin, KafkaUnavailable, TopicSpec
from streamapp_operator.outcomes import Condition, Event, Problem, transition
from streamapp_operator.steps import (
    KAFKA_UNAVAILABLE,
    StepOutcome,
    StepsRun,
    apply_child,
    dry_run,
    run_steps,
)
from streamapp_operator.streamapps import desired
from streamapp_operator.streamapps.conditions import (
    PROGRESSING,
    Capacity,
    Health,
    announce_rollout,
    condition_events,
    condition_order,
    conditions,
    ready_text,
    rollout,
)
from streamapp_operator.streamapps.dropped_records import dropped_records
from streamapp_operator.streamapps.observe import Observation, Target, observe
from streamapp_operator.streamapps.operations import (
    Operations,
    Planning,
    check_upgrade,
    epoch,
    plan_operations,
    run_operations,
)
from streamapp_operator.streamapps.operations import with_upgrade_condition as _with_upgrade
from streamapp_operator.streamapps.pod_status import failing_pod_names, failing_pods
from streamapp_operator.streamapps.resources import PAUSED_ANNOTATION, App, CleanupPolicy, StreamAppSpec
from streamapp_operator.streamapps.restore_progress import restore_progress
from streamapp_operator.streamapps.restore_progress import summary as restore_summary
from streamapp_operator.streamapps.rollout import (
    RolloutInputs,
    RolloutPlan,
    departed_members,
    plan_rollout,
    pod_states,
    with_partition,
)
from streamapp_operator.streamapps.validate import CONFIG_INVALID, TopicPlan, parse_spec, parse_topology, plan_topics
from streamapp_operator.streamapps.volumes import (
    SCALED_DOWN_ANNOTATION,
    ClaimRules,
    claim_ordinals,
    parse_duration,
    plan_claims,
)


@dataclass(frozen=True)
class World:
    """The seams reconcile acts through: the Kubernetes API, a Kafka admin per connection, the pods'
    ``/status`` (None: not read, ``Restoring`` stays Unknown) and the StreamApps of the cluster (``peers``,
    kopf's index in ``main.py``)."""

    cluster: Cluster
    kafka_for: Callable[[KafkaConnection], KafkaAdmin]
    instances: InstanceReader | None = None
    peers: Callable[[], Iterable[Peer]] = lambda: ()


@dataclass
class Result:
    """What to write back: the new ``status`` (None values delete a field) and events to post."""

    status: dict[str, Any]
    events: list[Event] = field(default_factory=list)


@dataclass(frozen=True)
class StreamAppContext:
    """Everything decided before acting: the typed spec, what was observed, the topic plan and every
    desired child. Steps read it and act through ``world``."""

    app: App
    spec: StreamAppSpec
    world: World
    kafka: KafkaAdmin
    observation: Observation
    plan: TopicPlan
    config_map: dict[str, Any]
    service: dict[str, Any]
    stateful_set: dict[str, Any]
    budget: desired.DisruptionBudget
    rollout: RolloutPlan
    previous_status: dict[str, Any]
    now: str
    operations: Operations | None = None
    application_id: str = ""

    def children(self) -> list[dict[str, Any]]:
        budget = [self.budget.manifest] if self.budget.manifest is not None else []
        return [self.config_map, self.service, self.stateful_set, *budget]


@dataclass(frozen=True)
class Intent:
    """A disruptive action about to happen, written to the resource's status first (``Progressing=True``),
    so that a crash in between leaves a truthful status behind."""

    namespace: str
    name: str
    generation: int
    message: str


def announce(
    write_status: Callable[[str, str, dict[str, Any]], None],
    intent: Intent,
    previous_conditions: Sequence[Mapping[str, Any]],
    now: str,
    fields: Mapping[str, Any] | None = None,
) -> None:
    """Write ``intent`` to status now (through the Kind's status writer, e.g. ``patch_streamapp_status``),
    with the step's own status ``fields`` (e.g. ``rollout``) in the same write."""
    conditions = announce_rollout([dict(c) for c in previous_conditions], intent.generation, intent.message, now)
    write_status(intent.namespace, intent.name, {**(fields or {}), "conditions": conditions})


def dry_run_children(ctx: StreamAppContext) -> StepOutcome:
    """Every child through the API server's validation and admission, none stored."""
    return dry_run(ctx.world.cluster, ctx.children())


def operate(ctx: StreamAppContext) -> StepOutcome:
    """The reset's action, its step written to status first, and the autoscaler's status (``operations``)."""
    if ctx.operations is None:
        return StepOutcome()
    events, status = run_operations(ctx.operations, ctx.world.cluster, ctx.kafka, ctx.app.namespace, ctx.app.name)
    return StepOutcome(events=events, status=status)


def create_internal_topics(ctx: StreamAppContext) -> StepOutcome:
    """Create the missing repartition and changelog topics (``replication.factor`` from spec.config) and
    add the names created to ``status.createdTopics`` (not while a reset stops the app: it deletes them)."""
    if ctx.operations is not None and ctx.operations.resetting:
        return StepOutcome()
    topics = [TopicSpec(t.name, t.partitions, t.config) for t in ctx.plan.internal_topics]
    created = ctx.kafka.create_topics(topics, int(ctx.spec.config.get("replication.factor", "-1")))
    known = sorted(ctx.previous_status.get("createdTopics") or [])
    if not created:
        return StepOutcome(status={"createdTopics": known} if known else {})
    counts = {t.name: t.partitions for t in ctx.plan.internal_topics}
    listed = ", ".join(f"{name} ({counts[name]} partitions)" for name in created)
    return StepOutcome(
        events=[Event("Normal", "TopicsCreated", f"Created internal topics {listed}")],
        status={"createdTopics": sorted(set(known) | set(created))},
    )


def apply_config_map(ctx: StreamAppContext) -> StepOutcome:
    """Apply the ConfigMap; not while a reset stops the app (an upgrade's new topology waits for its reset)."""
    if ctx.operations is not None and ctx.operations.resetting:
        return StepOutcome()
    return apply_child(ctx.world.cluster, ctx.config_map, ctx.observation.config_map)


def apply_service(ctx: StreamAppContext) -> StepOutcome:
    return apply_child(ctx.world.cluster, ctx.service, ctx.observation.service)


def apply_stateful_set(ctx: StreamAppContext) -> StepOutcome:
    """Apply the StatefulSet; when the change replaces running pods, ``Progressing=True`` is written to the
    StreamApp's status first. The consumer group its pods join (``application.id``) is added to
    ``status.consumerGroups``: the groups this app made, the only ones ``cleanupPolicy: Delete`` deletes."""
    observation, app = ctx.observation, ctx.app
    if desired.rolls_pods(observation.stateful_set, ctx.stateful_set) and observation.pods:
        message = (
            f"replacing {len(observation.pods)} pods with the pod template of generation {app.generation}, "
            "one at a time"
        )
        intent = Intent(app.namespace, app.name, app.generation, message)
        previous = ctx.previous_status.get("conditions") or []
        fields = {"rollout": ctx.rollout.status}
        announce(ctx.world.cluster.patch_streamapp_status, intent, previous, ctx.now, fields)
    outcome = apply_child(ctx.world.cluster, ctx.stateful_set, observation.stateful_set)
    groups = set(ctx.previous_status.get("consumerGroups") or []) | {ctx.application_id}
    outcome.status["consumerGroups"] = sorted(groups)
    return outcome


def roll_pods(ctx: StreamAppContext) -> StepOutcome:
    """Hand the next pod of a rollout to the StatefulSet controller (``rollout.plan_rollout`` decides which and
    when): ``status.rollout`` naming the pod is written first, then the StatefulSet is applied with its
    partition lowered by one. Otherwise only ``status.rollout`` (why the rollout waits; None when none runs)."""
    plan, app = ctx.rollout, ctx.app
    status = {"rollout": plan.status}
    if plan.replacing is None:
        return StepOutcome(status=status)
    progress = plan.status or {}
    message = f"replacing pod {plan.replacing} ({progress.get('updated')}/{progress.get('total')} pods updated)"
    if plan.forced:
        message = f"{message}; {plan.forced}"
    intent = Intent(app.namespace, app.name, app.generation, message)
    previous = ctx.previous_status.get("conditions") or []
    announce(ctx.world.cluster.patch_streamapp_status, intent, previous, ctx.now, status)
    stored = ctx.world.cluster.apply(with_partition(ctx.stateful_set, plan.partition))
    event = Event("Normal", "ReplacingPod", message)
    return StepOutcome(events=[event], status=status, stored={"StatefulSet": stored})


def apply_disruption_budget(ctx: StreamAppContext) -> StepOutcome:
    """Apply the PodDisruptionBudget, or delete ours when there must be none.

    Only a budget owned by this StreamApp (its uid in the ownerReferences) is deleted: a PodDisruptionBudget
    of the same name made by someone else is left alone (never applied over: ``desired.disruption_budget``
    decides none). A budget left out because it would block every eviction, or because someone else's is in
    the way, is a Warning event, once per change of ``status.disruptionBudget``.
    """
    budget, cluster, app = ctx.budget, ctx.world.cluster, ctx.app
    events: list[Event] = []
    if (budget.blocking or budget.foreign) and ctx.previous_status.get("disruptionBudget") != budget.summary:
        why = budget.summary.removeprefix("none: ")
        events.append(Event("Warning", "DisruptionBudgetSkipped", f"No PodDisruptionBudget: {why}"))
    status = {"disruptionBudget": budget.summary}
    if budget.manifest is not None:
        applied = apply_child(cluster, budget.manifest, ctx.observation.disruption_budget)
        return StepOutcome(events=events + applied.events, status=status, stored=applied.stored)
    current = ctx.observation.disruption_budget
    if current is not None and desired.owned_by(current, app.uid):
        cluster.delete("PodDisruptionBudget", app.namespace, app.name, current["metadata"]["uid"])
        events.append(Event("Normal", "Deleted", f"Deleted PodDisruptionBudget {app.name} ({budget.summary})"))
    return StepOutcome(events=events, status=status)


def retain_state_volumes(ctx: StreamAppContext) -> StepOutcome:
    """Mark, unmark or delete the state volumes of pods a scale-down removed (``volumes.plan_claims``);
    ``status.retainedVolumes`` lists the claims kept for a scale-up, with when their pod went away."""
    app, cluster = ctx.app, ctx.world.cluster
    current = ctx.observation.stateful_set
    rules = ClaimRules(
        app=app.name,
        replicas=ctx.spec.replicas,
        stateful_set_uid=current["metadata"].get("uid") if current is not None else None,
        retain_seconds=parse_duration(ctx.spec.state.retain_after_scale_down),
    )
    plan = plan_claims(cluster.list_claims(app.namespace, desired.selector(app.name)), rules, ctx.now)
    events = []
    for action in plan.actions:
        if action.action == "delete":
            cluster.delete("PersistentVolumeClaim", app.namespace, action.name, action.uid)
            why = f"kept {ctx.spec.state.retain_after_scale_down} after its pod was scaled away"
            events.append(Event("Normal", "StateVolumeDeleted", f"Deleted PersistentVolumeClaim {action.name}: {why}"))
        else:
            mark = action.at if action.action == "mark" else None
            cluster.annotate_claim(app.namespace, action.name, action.uid, {SCALED_DOWN_ANNOTATION: mark})
    retained = [{"name": name, "since": since} for name, since in sorted(plan.retained.items())]
    return StepOutcome(events=events, status={"retainedVolumes": retained or None})


def release_departed_members(ctx: StreamAppContext) -> StepOutcome:
    """Remove from the consumer group the static members of pods a scale-down removed (once their pods are gone)."""
    group = ctx.observation.group
    if group is None:
        return StepOutcome()
    instance_ids = [member.instance_id for member in group.members]
    departed = departed_members(instance_ids, ctx.app.name, ctx.spec.replicas, pod_states(ctx.observation.pods))
    removed = ctx.kafka.remove_static_members(ctx.application_id, departed) if departed else []
    if not removed:
        return StepOutcome()
    message = f"Removed the static members {', '.join(removed)} of scaled-away pods: their partitions move now"
    return StepOutcome(events=[Event("Normal", "MembersRemoved", message)])


#: The StreamApp's reconcile, in order (``steps.run_steps``).
STEPS = (
    dry_run_children,
    operate,
    create_internal_topics,
    apply_config_map,
    apply_service,
    apply_stateful_set,
    apply_disruption_budget,
    roll_pods,
    retain_state_volumes,
    release_departed_members,
)


@dataclass(frozen=True)
class Given:
    """What one reconcile starts from: the app, its previous status and the instant (RFC 3339) that stamps
    condition transitions."""

    app: App
    previous_status: dict[str, Any]
    now: str


@dataclass(frozen=True)
class Decided:
    """What the decide phase settled from the spec and the observation (pure): the typed spec (None: invalid),
    the topology, the topic plan (None: not checked), the ``application.id`` the app runs with and the problems
    that keep the steps from running."""

    spec: StreamAppSpec | None
    topology: TopologyDescription | None = None
    plan: TopicPlan | None = None
    application_id: str | None = None
    problems: list[Problem] = field(default_factory=list)


def reconcile(app: App, raw_spec: dict[str, Any], previous_status: dict[str, Any], world: World, now: str) -> Result:
    """Bring StreamApp ``app`` towards ``raw_spec``; ``now`` (RFC 3339) stamps condition transitions.

    Reads as observe -> decide (pure) -> run :data:`STEPS` -> report. The upgrade check reads the running
    ConfigMap and the Kafka connection its Secrets before the observation, because the ``application.id`` to
    observe and the client to observe with depend on them."""
    given = Given(app, previous_status, now)
    if app.paused:
        return paused_result(app, previous_status, now)
    spec, problems = parse_spec(raw_spec, app.name)
    if spec is None:
        observation = observe(Target(app.namespace, app.name), world.cluster, instances=world.instances)
        return _result(given, Decided(None, problems=problems), observation)
    if not problems:
        problems += _client_setting_problems(spec, app.name)
    topology, topology_problems = parse_topology(spec)
    running = None  # the running topology's ConfigMap: compared with a valid topology only
    if topology is not None:
        running = world.cluster.get("ConfigMap", app.namespace, desired.config_map_name(app.name))
    upgrade = check_upgrade(app, spec, topology, running, previous_status)
    application_id = upgrade.application_id
    me = Peer(app.namespace, app.name, app.uid, app.created, application_id)
    problems += identity_conflicts(me, claims_of_others(world.peers(), app.annotations))
    problems += [upgrade.problem] if upgrade.problem is not None else []
    connection, secret_problems = kafka_connection(world.cluster, app.namespace, spec.kafka)
    # no client without its credentials: librdkafka refuses an empty password, and the report must come first
    kafka, client_problems = _kafka_client(world, connection) if not secret_problems else (None, [])
    # observe
    max_replicas = spec.autoscaling.max_replicas if spec.autoscaling is not None else None
    target = Target(
        app.namespace, app.name, topology, application_id, claim_ordinals(spec.replicas, max_replicas, None)
    )
    observation = observe(target, world.cluster, kafka, world.instances)
    # decide
    plan, plan_problems = _plan(topology, application_id, observation) if kafka is not None else (None, [])
    problems += topology_problems + secret_problems + client_problems + _strangers(app, application_id, observation)
    problems += plan_problems
    decided = Decided(spec, topology, plan, application_id, problems)
    # run the steps
    run = StepsRun()
    if topology is not None and plan is not None and kafka is not None and not problems:
        planning = Planning(app, spec, upgrade, topology, plan.tasks, observation, previous_status, epoch())
        operations = plan_operations(planning, world.cluster)
        decided = replace(decided, spec=spec.model_copy(update={"replicas": operations.replicas}))
        context = _context(given, world, kafka, observation, decided)
        run = run_steps(STEPS, replace(context, operations=operations))
        problems += [run.problem] if run.problem is not None else []
        problems += [run.halt.problem] if run.halt is not None else []  # no StreamApp step halts today
    # report
    result = _result(given, decided, observation, run.stored("StatefulSet") or observation.stateful_set)
    stores_of = {sub.id: sub.stores for sub in topology.subtopologies()} if topology is not None else {}
    progress = restore_progress(observation.restore, stores_of, previous_status.get("restore"), now)
    result.status.update({"restore": progress, "restoreProgress": restore_summary(progress)})
    result.status.update(run.status)
    result.status.update({"upgrade": upgrade.status} if upgrade.status is not None else {})
    conditions_before = previous_status.get("conditions") or []
    result.status["conditions"] = _with_upgrade(result.status["conditions"], conditions_before, upgrade.condition,
                                                app.generation, now)  # fmt: skip
    result.events[:0] = run.events + upgrade.events
    return result


def _kafka_client(world: World, connection: KafkaConnection) -> tuple[KafkaAdmin | None, list[Problem]]:
    """The admin client of ``connection``, or why librdkafka refused to build it (``KafkaUnavailable``)."""
    try:
        return world.kafka_for(connection), []
    except KafkaUnavailable as exc:
        return None, [Problem(KAFKA_UNAVAILABLE, str(exc))]


def _strangers(app: App, application_id: str, observation: Observation) -> list[Problem]:
    """Children and consumer-group members that are someone else's (pure, on what was observed)."""
    children = {"ConfigMap": observation.config_map, "Service": observation.service,
                "StatefulSet": observation.stateful_set}  # fmt: skip
    problems = foreign_children(app.uid, children)
    stateful_set = observation.stateful_set
    if stateful_set is None or desired.owned_by(stateful_set, app.uid):  # a foreign StatefulSet is named above
        uid = (stateful_set or {}).get("metadata", {}).get("uid")
        problems += foreign_claims(observation.claims, desired.selector_labels(app.name), uid)
    if observation.group is not None:
        problems += foreign_members(application_id, [m.client_id for m in observation.group.members], app.name)
    return problems


def _context(
    given: Given, world: World, kafka: KafkaAdmin, observation: Observation, decided: Decided
) -> StreamAppContext:
    """Build every desired child from the decided spec (pure)."""
    app, spec, topology, plan = given.app, decided.spec, decided.topology, decided.plan
    application_id = decided.application_id
    assert spec is not None and topology is not None and plan is not None and application_id is not None
    config_map = desired.config_map(app.owner, topology.to_yaml(), desired.streams_config(spec, application_id))
    pod_labels = [pod.get("metadata", {}).get("labels") or {} for pod in observation.pods]
    digest = desired.config_hash(config_map)
    rolling = _rollout(given, spec, observation, desired.stateful_set(app.owner, spec, digest))
    return StreamAppContext(
        app=app,
        spec=spec,
        world=world,
        kafka=kafka,
        observation=observation,
        plan=plan,
        config_map=config_map,
        service=desired.service(app.owner),
        stateful_set=desired.stateful_set(app.owner, spec, digest, rolling.hold),
        budget=desired.disruption_budget(app.owner, spec, observation.disruption_budgets, pod_labels),
        rollout=rolling,
        application_id=application_id,
        previous_status=given.previous_status,
        now=given.now,
    )


def _rollout(given: Given, spec: StreamAppSpec, observation: Observation, stateful_set: dict[str, Any]) -> RolloutPlan:
    """The rollout's next step from what was observed (pure; ``rollout.plan_rollout``)."""
    app, previous_status, now = given.app, given.previous_status, given.now
    restore = observation.restore
    restoring = sorted({task.pod for task in restore.tasks}) if restore is not None else []
    inputs = RolloutInputs(
        name=app.name,
        replicas=spec.replicas,
        target=stateful_set["metadata"]["annotations"][desired.TEMPLATE_HASH_ANNOTATION],
        template_changes=desired.rolls_pods(observation.stateful_set, stateful_set),
        stateful_set=observation.stateful_set,
        pods=pod_states(observation.pods),
        group_state=observation.group.state if observation.group is not None else None,
        restoring=restoring,
        failing=failing_pod_names([*failing_pods(observation.pods), *observation.unscheduled, *observation.threads]),
    )
    return plan_rollout(inputs, previous_status.get("rollout"), now)


def _client_setting_problems(spec: StreamAppSpec, application_id: str) -> list[Problem]:
    """librdkafka's own settings of ``spec.config`` (``consumer.*``, ``producer.*``) tried on throwaway clients that
    never connect (``streamapp.kafka.config_check``): a typo is ``ConfigInvalid`` naming the key before any pod or
    topic exists, not found by every pod's stream threads in a crash loop."""
    # the user's settings only: the security ones come from spec.kafka with credentials the pods read from Secrets
    plain = spec.model_copy(update={"kafka": spec.kafka.model_copy(update={"authentication": None, "tls": None})})
    refused = _refused_settings(json.dumps(desired.streams_config(plain, application_id), sort_keys=True))
    if not refused:
        return []
    shown = "; ".join(refused[:_REFUSED_SHOWN])
    more = f"; and {len(refused) - _REFUSED_SHOWN} more" if len(refused) > _REFUSED_SHOWN else ""
    return [Problem(CONFIG_INVALID, f"spec.config: Kafka client settings refused: {shown}{more}")]


#: refused settings named in the condition's message (the rest counted): a message stays readable and small
_REFUSED_SHOWN = 10


@functools.lru_cache(maxsize=256)
def _refused_settings(streams_config_json: str) -> tuple[str, ...]:
    """``client_config_problems`` once per distinct ``streams.yaml`` (JSON, sorted keys): the throwaway clients are
    built at the first reconcile of a spec, not at every 10 s timer tick of every app."""
    return tuple(client_config_problems(StreamsConfig.from_mapping(json.loads(streams_config_json))))


def _plan(
    topology: TopologyDescription | None, application_id: str, observation: Observation
) -> tuple[TopicPlan | None, list[Problem]]:
    if topology is None:
        return None, []
    if observation.kafka_error is not None:
        return None, [Problem(KAFKA_UNAVAILABLE, f"cannot check the topology's topics: {observation.kafka_error}")]
    return plan_topics(topology, application_id, observation.partitions)


def paused_result(app: App, previous_status: dict[str, Any], now: str) -> Result:
    """Nothing is observed nor changed; status says so (``paused``, ``Progressing=False``/``Paused``)."""
    previous = [dict(c) for c in previous_status.get("conditions") or []]
    old = next((c for c in previous if c.get("type") == PROGRESSING), {})
    already = old.get("reason") == "Paused"
    message = f"reconciling is paused by the annotation {PAUSED_ANNOTATION}"
    # paused since the last transition only while the reason stays Paused (not merely the status False)
    progressing = transition(
        old if already else None, Condition(PROGRESSING, "False", "Paused", message, app.generation), now
    )
    kept = [c for c in previous if c.get("type") != PROGRESSING]
    ordered = sorted([*kept, progressing], key=lambda c: condition_order(str(c.get("type"))))
    events = [] if already else [Event("Normal", "Paused", message)]
    return Result(status={"paused": True, "conditions": ordered}, events=events)


def _result(
    given: Given, decided: Decided, observation: Observation, stateful_set: dict[str, Any] | None = None
) -> Result:
    """The status and events of what was decided and observed (pure); ``stateful_set`` as stored by the steps
    (None: as observed)."""
    app, previous_status, now = given.app, given.previous_status, given.now
    spec, plan, problems, application_id = decided.spec, decided.plan, decided.problems, decided.application_id
    stateful_set = stateful_set if stateful_set is not None else observation.stateful_set
    desired_replicas = spec.replicas if spec is not None else _spec_replicas(stateful_set)
    progress = rollout(stateful_set, desired_replicas)
    previous = previous_status.get("conditions") or []
    pod_names = [str(pod.get("metadata", {}).get("name")) for pod in observation.pods]
    drops = dropped_records(observation.drops, pod_names, previous_status)
    new_conditions = conditions(
        Health(
            generation=app.generation,
            problems=problems,
            progress=progress,
            topology_checked=plan is not None,
            failing=[*failing_pods(observation.pods), *observation.unscheduled, *observation.creation],
            unscheduled=observation.unscheduled,
            restore=observation.restore,
            threads=observation.threads,
            capacity=Capacity(spec.replicas, spec.threads, plan.tasks) if spec is not None and plan else None,
            drops=drops.condition,
        ),
        previous=previous,
        now=now,
    )
    ready = progress.ready if progress else 0
    group = observation.group
    status = {
        "observedGeneration": app.generation,
        "conditions": new_conditions,
        "replicas": progress.replicas if progress else 0,
        "readyReplicas": ready,
        "ready": ready_text(ready, desired_replicas),
        "selector": desired.selector(app.name),
        "applicationId": application_id,
        "tasks": plan.tasks if plan else None,
        "lag": group.lag if group else None,
        "consumerGroupState": group.state if group else None,
        "restoreRemaining": observation.restore.known_remaining if observation.restore else None,
        "droppedRecords": drops.totals,
        "droppedRecordsByPod": drops.by_pod,
        "paused": None,
    }
    return Result(status=status, events=condition_events(previous, new_conditions))


def _spec_replicas(stateful_set: dict[str, Any] | None) -> int:
    if stateful_set is None:
        return 0
    replicas: int = stateful_set.get("spec", {}).get("replicas", 0)
    return replicas


@dataclass
class Cleanup:
    """The outcome of one cleanup attempt: ``done`` (the finalizer may go) or ``waiting`` for what."""

    done: bool
    events: list[Event] = field(default_factory=list)
    waiting: str = ""


def cleanup(app: App, raw_spec: dict[str, Any], status: dict[str, Any], world: World) -> Cleanup:
    """What deleting StreamApp ``app`` does beyond the garbage collector (which deletes its children).

    ``Retain`` (the default): nothing; the internal topics, the consumer group's committed offsets and the
    state volumes stay, so an app re-created with the same ``application.id`` resumes where it stopped.
    ``Delete``: the pods are stopped first (the StatefulSet is deleted: a group with members cannot be
    deleted, and the pods would re-create topics), then the consumer groups its pods joined
    (``status.consumerGroups``: never the group of an app whose id this one was refused for) and the internal
    topics this operator created (``status.createdTopics``, never a topic someone else made) are deleted; the
    state volumes go with the StatefulSet (``persistentVolumeClaimRetentionPolicy.whenDeleted: Delete``).
    """
    spec, _ = parse_spec(raw_spec, app.name)
    if spec is None or spec.cleanup_policy != CleanupPolicy.DELETE:
        return Cleanup(done=True)
    cluster = world.cluster
    stateful_set = cluster.get("StatefulSet", app.namespace, app.name)
    if stateful_set is not None and desired.owned_by(stateful_set, app.uid):
        cluster.delete("StatefulSet", app.namespace, app.name, stateful_set["metadata"]["uid"])
    pods = cluster.list_pods(app.namespace, desired.selector(app.name))
    if pods:
        return Cleanup(done=False, waiting=f"{len(pods)} pods to stop before the consumer group is deleted")
    connection, problems = kafka_connection(cluster, app.namespace, spec.kafka)
    if problems:
        return Cleanup(done=False, waiting="; ".join(p.message for p in problems))
    kafka = world.kafka_for(connection)
    events = []
    for group in status.get("consumerGroups") or []:
        if kafka.delete_group(group):
            events.append(Event("Normal", "ConsumerGroupDeleted", f"Deleted consumer group {group}"))
    deleted = kafka.delete_topics(list(status.get("createdTopics") or []))
    if deleted:
        events.append(Event("Normal", "TopicsDeleted", f"Deleted internal topics {', '.join(deleted)}"))
    return Cleanup(done=True, events=events)
