"""Level-based reconcile of one StreamApp: observe, validate, then act in named steps; idempotent.

The same :func:`reconcile` runs for create, update, resume and every timer tick; it never branches on
what triggered it. It reads the world (``observe``), decides what is wrong (``validate``), and only when
nothing is wrong brings Kafka and the cluster to the desired state, in this order:

1. ``create_internal_topics``: repartition and changelog topics with the partition counts the topology
   implies (the pods must find them when they start);
2. ``apply_config_map``: topology and runtime configuration;
3. ``apply_service``: the headless Service;
4. ``apply_stateful_set``: the pods, rolled when their template (or the ConfigMap's hash) changes; the
   intent (``Progressing=True``) is written to status before a change that replaces running pods;
5. ``apply_disruption_budget``: the PodDisruptionBudget, applied, or deleted when there must be none
   (disabled, no replicas, or a budget that would block every eviction: ``desired.disruption_budget``).

An invalid StreamApp leaves its running workload untouched and is reported (``Degraded``), never raised:
the result is a status and events, which ``main.py`` writes through kopf. Only an unreachable API server
propagates (``k8s.KubernetesUnavailable``) so that kopf retries.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from streamapp.topology import TopologyDescription

from streamapp_operator import desired
from streamapp_operator.conditions import (
    Event,
    announce_rollout,
    condition_events,
    conditions,
    failing_pods,
    ready_text,
    rollout,
)
from streamapp_operator.instances import InstanceReader
from streamapp_operator.k8s import ApplyRejected, Cluster
from streamapp_operator.kafka import KafkaAdmin, KafkaUnavailable, TopicSpec
from streamapp_operator.observe import Observation, observe
from streamapp_operator.resources import StreamAppSpec
from streamapp_operator.validate import Problem, TopicPlan, parse_spec, parse_topology, plan_topics

KAFKA_UNAVAILABLE = "KafkaUnavailable"
APPLY_REJECTED = "ApplyRejected"


@dataclass(frozen=True)
class App:
    """Identity of the StreamApp being reconciled (from its metadata)."""

    name: str
    namespace: str
    uid: str
    generation: int

    @property
    def owner(self) -> desired.Owner:
        return desired.Owner(name=self.name, namespace=self.namespace, uid=self.uid)


@dataclass(frozen=True)
class World:
    """The seams reconcile acts through: the Kubernetes API, a Kafka admin per bootstrap servers and the
    pods' ``/status`` (None: not read, ``Restoring`` stays Unknown)."""

    cluster: Cluster
    kafka_for: Callable[[str], KafkaAdmin]
    instances: InstanceReader | None = None


@dataclass
class Result:
    """What to write back: the new ``status`` (None values delete a field) and events to post."""

    status: dict[str, Any]
    events: list[Event] = field(default_factory=list)


def reconcile(app: App, raw_spec: dict[str, Any], previous_status: dict[str, Any], world: World, now: str) -> Result:
    """Bring StreamApp ``app`` towards ``raw_spec``; ``now`` (RFC 3339) stamps condition transitions."""
    spec, problems = parse_spec(raw_spec)
    if spec is None:
        observation = observe(app.namespace, app.name, world.cluster, instances=world.instances)
        return _result(app, None, None, problems, None, observation.stateful_set, observation, previous_status, now)
    application_id = spec.effective_application_id(app.name)
    topology, topology_problems = parse_topology(spec)
    problems += topology_problems
    kafka = world.kafka_for(spec.kafka.bootstrap_servers)
    observation = observe(app.namespace, app.name, world.cluster, topology, application_id, kafka, world.instances)
    plan, plan_problems = _plan(topology, application_id, observation)
    problems += plan_problems
    events: list[Event] = []
    stateful_set = observation.stateful_set
    budget: desired.DisruptionBudget | None = None
    if topology is not None and plan is not None and not problems:
        try:
            events += create_internal_topics(kafka, plan, spec)
            config_map = desired.config_map(app.owner, topology.to_yaml(), desired.streams_config(spec, application_id))
            events += apply(world.cluster, config_map, observation.config_map)
            events += apply(world.cluster, desired.service(app.owner), observation.service)
            manifest = desired.stateful_set(app.owner, spec, desired.config_hash(config_map))
            previous = previous_status.get("conditions") or []
            stateful_set, step_events = apply_stateful_set(world.cluster, app, manifest, observation, previous, now)
            events += step_events
            pod_labels = [pod.get("metadata", {}).get("labels") or {} for pod in observation.pods]
            decision = desired.disruption_budget(app.owner, spec, observation.disruption_budgets, pod_labels)
            events += apply_disruption_budget(world.cluster, app, decision, observation, previous_status)
            budget = decision  # reported in status only once it is in force
        except KafkaUnavailable as exc:
            problems.append(Problem(KAFKA_UNAVAILABLE, f"Kafka at {spec.kafka.bootstrap_servers}: {exc}"))
        except ApplyRejected as exc:
            problems.append(Problem(APPLY_REJECTED, str(exc)))
    result = _result(app, spec, plan, problems, application_id, stateful_set, observation, previous_status, now)
    if budget is not None:
        result.status["disruptionBudget"] = budget.summary
    result.events[:0] = events
    return result


def _plan(
    topology: TopologyDescription | None, application_id: str, observation: Observation
) -> tuple[TopicPlan | None, list[Problem]]:
    if topology is None:
        return None, []
    if observation.kafka_error is not None:
        return None, [Problem(KAFKA_UNAVAILABLE, f"cannot check the topology's topics: {observation.kafka_error}")]
    return plan_topics(topology, application_id, observation.partitions)


def create_internal_topics(kafka: KafkaAdmin, plan: TopicPlan, spec: StreamAppSpec) -> list[Event]:
    """Create the missing repartition and changelog topics (``replication.factor`` from spec.config)."""
    topics = [TopicSpec(t.name, t.partitions, t.config) for t in plan.internal_topics]
    created = kafka.create_topics(topics, int(spec.config.get("replication.factor", "-1")))
    if not created:
        return []
    counts = {t.name: t.partitions for t in plan.internal_topics}
    listed = ", ".join(f"{name} ({counts[name]} partitions)" for name in created)
    return [Event("Normal", "TopicsCreated", f"Created internal topics {listed}")]


def apply(cluster: Cluster, manifest: dict[str, Any], before: dict[str, Any] | None) -> list[Event]:
    """Server-side apply one child; an event when it was created or changed."""
    _, events = _apply(cluster, manifest, before)
    return events


def apply_stateful_set(
    cluster: Cluster,
    app: App,
    manifest: dict[str, Any],
    observation: Observation,
    previous_conditions: list[dict[str, Any]],
    now: str,
) -> tuple[dict[str, Any], list[Event]]:
    """Apply the StatefulSet; returns it as stored (its status feeds the StreamApp's status).

    When the change replaces running pods, ``Progressing=True`` is written to the StreamApp's status first.
    """
    if desired.rolls_pods(observation.stateful_set, manifest) and observation.pods:
        message = f"replacing {len(observation.pods)} pods with the pod template of generation {app.generation}"
        conditions_now = announce_rollout(previous_conditions, app.generation, message, now)
        cluster.patch_streamapp_status(app.namespace, app.name, {"conditions": conditions_now})
    return _apply(cluster, manifest, observation.stateful_set)


def apply_disruption_budget(
    cluster: Cluster,
    app: App,
    budget: desired.DisruptionBudget,
    observation: Observation,
    previous_status: dict[str, Any],
) -> list[Event]:
    """Apply the PodDisruptionBudget, or delete ours when there must be none.

    Only a budget owned by this StreamApp (its uid in the ownerReferences) is deleted: a PodDisruptionBudget
    of the same name made by someone else is left alone (never applied over: ``desired.disruption_budget``
    decides none). A budget left out because it would block every eviction, or because someone else's is in
    the way, is a Warning event, once per change of ``status.disruptionBudget``.
    """
    events: list[Event] = []
    if (budget.blocking or budget.foreign) and previous_status.get("disruptionBudget") != budget.summary:
        why = budget.summary.removeprefix("none: ")
        events.append(Event("Warning", "DisruptionBudgetSkipped", f"No PodDisruptionBudget: {why}"))
    if budget.manifest is not None:
        return events + apply(cluster, budget.manifest, observation.disruption_budget)
    current = observation.disruption_budget
    if current is not None and _owned_by(current, app.uid):
        cluster.delete("PodDisruptionBudget", app.namespace, app.name, current["metadata"]["uid"])
        events.append(Event("Normal", "Deleted", f"Deleted PodDisruptionBudget {app.name} ({budget.summary})"))
    return events


def _owned_by(obj: dict[str, Any], uid: str) -> bool:
    return any(ref.get("uid") == uid for ref in obj.get("metadata", {}).get("ownerReferences") or [])


def _apply(
    cluster: Cluster, manifest: dict[str, Any], before: dict[str, Any] | None
) -> tuple[dict[str, Any], list[Event]]:
    after = cluster.apply(manifest)
    kind, name = manifest["kind"], manifest["metadata"]["name"]
    if before is None:
        return after, [Event("Normal", "Created", f"Created {kind} {name}")]
    if _version(before) != _version(after):
        return after, [Event("Normal", "Updated", f"Updated {kind} {name}")]
    return after, []


def _version(obj: dict[str, Any]) -> Any:
    """What changes when an object's spec changes: its generation if it has one, else its resourceVersion."""
    metadata = obj.get("metadata", {})
    return metadata.get("generation") or metadata.get("resourceVersion")


def _result(
    app: App,
    spec: StreamAppSpec | None,
    plan: TopicPlan | None,
    problems: list[Problem],
    application_id: str | None,
    stateful_set: dict[str, Any] | None,
    observation: Observation,
    previous_status: dict[str, Any],
    now: str,
) -> Result:
    desired_replicas = spec.replicas if spec is not None else _spec_replicas(stateful_set)
    progress = rollout(stateful_set, desired_replicas)
    previous = previous_status.get("conditions") or []
    new_conditions = conditions(
        generation=app.generation,
        problems=problems,
        progress=progress,
        topology_checked=plan is not None,
        previous=previous,
        now=now,
        failing=failing_pods(observation.pods),
        restore=observation.restore,
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
    }
    return Result(status=status, events=condition_events(previous, new_conditions))


def _spec_replicas(stateful_set: dict[str, Any] | None) -> int:
    if stateful_set is None:
        return 0
    replicas: int = stateful_set.get("spec", {}).get("replicas", 0)
    return replicas
