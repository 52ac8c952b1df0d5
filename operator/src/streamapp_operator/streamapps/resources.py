"""Typed model of the StreamApp custom resource (``streamapp.io/v1alpha1``).

These pydantic models are the single source of the CRD schema: ``streamapp_operator.crdgen`` renders
``crds/streamapp.io_streamapps.yaml`` from them, and the operator parses every ``spec`` it receives with
:meth:`StreamAppSpec.parse` once, at the edge (``main.py``). Field names are Python snake_case; the
wire names are camelCase (``applicationId``, ``processingGuarantee``), as in every Kubernetes API.

Validation that needs more than one field or outside data (the topology's node graph, Kafka topic
partition counts) lives in ``validate.py``; the schema here carries what an API server can check on
admission: types, enums, minimums, patterns, required fields and defaults.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated, Any, Literal

from annotated_types import Le
from pydantic import AfterValidator, BeforeValidator, ConfigDict, Field, WithJsonSchema, model_validator
from streamapp.config import StreamsConfig

from streamapp_operator.connection import KafkaSpec
from streamapp_operator.kinds import PLURALS, Owner, SpecModel
from streamapp_operator.streamapps.autoscale import AutoscalingSpec
from streamapp_operator.streamapps.reset import ResetSpec, ResetStatus
from streamapp_operator.streamapps.upgrade import UpgradePolicy

KIND = "StreamApp"
PLURAL = PLURALS[KIND]
SINGULAR = "streamapp"
#: `sa` is the contract's name but kubectl resolves it to ServiceAccounts first; `sapp` is unambiguous.
SHORT_NAMES = ("sa", "sapp")
#: Characters Kafka allows in a topic name. Node, store and application names become parts of
#: internal topic names (``<applicationId>-<store>-changelog``), so they share the rule.
KAFKA_NAME_PATTERN = r"^[a-zA-Z0-9._-]+$"

#: What Kubernetes accepts as a resource quantity (``resource.Quantity``): ``500m``, ``1Gi``, ``2``, ``1e3``.
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)


def _quantity(value: int | str) -> int | str:
    if isinstance(value, str) and re.fullmatch(QUANTITY_PATTERN, value) is None:
        raise ValueError(f"{value!r} is not a Kubernetes quantity (e.g. 500m, 1Gi, 2)")
    return value


#: A Kubernetes resource quantity (``500m``, ``1Gi``, ``2``): YAML may give it as an int or a string. The CRD
#: checks the string form on admission (an unparsable quantity would otherwise make the API server answer
#: the StatefulSet with HTTP 500).
Quantity = Annotated[
    int | str,
    AfterValidator(_quantity),
    WithJsonSchema(
        {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "x-kubernetes-int-or-string": True,
            "pattern": QUANTITY_PATTERN,
        }
    ),
]


def config_text(value: object) -> object:
    """A ``spec.config`` value as the string the runtime's ``streams.yaml`` and librdkafka read: a YAML boolean as
    ``true``/``false`` (librdkafka's and Kafka's spelling, not Python's ``True``), an integer in decimal, a float
    as Python's shortest round-trip form (``0.5``, ``1e-05``: C's ``strtod``, librdkafka's parser, reads it); a
    string as it is. Raises ValueError for anything else (a list, an object, a null)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if not isinstance(value, str):
        kind = "a null" if value is None else f"a {type(value).__name__}"
        raise ValueError(f"must be a string, a number or a boolean, got {kind}")
    return value


#: One value of ``spec.config``: a string, or an unquoted YAML number or boolean (``commit.interval.ms: 1000``,
#: ``enable.idempotence: true``), kept as its string (:func:`config_text`), so that every reader of the config (the
#: runtime's streams.yaml, the librdkafka settings check, ``replication.factor``) sees the one form. The CRD keeps
#: any scalar (``x-kubernetes-preserve-unknown-fields``: a structural schema cannot say "string or number or
#: boolean") and its CEL rule on ``config`` refuses a list, an object or a null.
ConfigValue = Annotated[
    str, BeforeValidator(config_text), WithJsonSchema({"x-kubernetes-preserve-unknown-fields": True})
]
CONFIG_SCALARS_RULE = "self.all(k, type(self[k]) in [string, int, uint, double, bool])"

#: Most stream threads per pod: the runtime's own bound (``StreamsConfig``'s ``num.stream.threads``).
MAX_THREADS = next(m.le for m in StreamsConfig.model_fields["num_stream_threads"].metadata if isinstance(m, Le))
#: Most pods of one StreamApp. Each pod is a static group member with its own state volume; more pods than
#: tasks idle, and a typo (``100000``) must not ask the scheduler for that many pods.
MAX_REPLICAS = 256
#: The most entries ``status.restore`` lists (many pods x tasks x stores would make the object large); the
#: last one then sums up the rest (``streamapp_operator.streamapps.restore_progress``).
MAX_RESTORE_ENTRIES = 20


class ProcessingGuarantee(StrEnum):
    """Kafka Streams ``processing.guarantee``."""

    AT_LEAST_ONCE = "at_least_once"
    EXACTLY_ONCE_V2 = "exactly_once_v2"


class ImagePullPolicy(StrEnum):
    """The pod container's ``imagePullPolicy``."""

    ALWAYS = "Always"
    IF_NOT_PRESENT = "IfNotPresent"
    NEVER = "Never"


class TopologyNode(SpecModel):
    """One node of the topology description; per-type fields (``input``, ``topics``...) pass through."""

    model_config = ConfigDict(extra="allow")

    name: str = Field(pattern=KAFKA_NAME_PATTERN, description="Node name, unique in the topology.")
    type: str = Field(min_length=1, description="Core node type (source, filter, map_values, ...).")


class TopologyStore(SpecModel):
    """One state store of the topology description; per-type fields pass through."""

    model_config = ConfigDict(extra="allow")

    name: str = Field(pattern=KAFKA_NAME_PATTERN, description="Store name; names its changelog topic.")
    type: str = Field(min_length=1, description="Store type (key_value, ...).")


class TopologySpec(SpecModel):
    """The topology description: nodes and stores, validated in depth by ``streamapp.topology``."""

    nodes: list[TopologyNode] = Field(min_length=1, description="Source, processor and sink nodes.")
    stores: list[TopologyStore] = Field(default_factory=list, description="State stores.")

    def to_description_dict(self) -> dict[str, Any]:
        """The document in the runtime's camelCase form, ready for ``TopologyDescription.from_dict``."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class StateSpec(SpecModel):
    """The per-pod persistent volume that holds the state stores (``state.dir``)."""

    size: Quantity = Field(default="1Gi", description="Requested size of each pod's state volume.")
    storage_class_name: str | None = Field(
        default=None, description="StorageClass of the state volume; the cluster default when unset."
    )
    retain_after_scale_down: str = Field(
        default="1h",
        pattern=r"^([0-9]+(h|m|s))+$",
        max_length=32,
        description=(
            "How long the state volume of a pod removed by a scale-down is kept (e.g. 1h, 30m, 1h30m, 45s), so that "
            "a scale-up within that time restores only the changelog tail; then it is deleted."
        ),
    )


class ResourceRequirements(SpecModel):
    """Compute resources of the application container (Kubernetes ResourceRequirements)."""

    limits: dict[str, Quantity] | None = Field(default=None, description="Maximum resources, e.g. cpu, memory.")
    requests: dict[str, Quantity] | None = Field(default=None, description="Requested resources.")


class CleanupPolicy(StrEnum):
    """What deleting a StreamApp does to its data beyond the Kubernetes objects it owns."""

    RETAIN = "Retain"
    DELETE = "Delete"


#: The budget the operator applies when ``spec.disruptionBudget`` sets neither bound (Strimzi's default).
DEFAULT_MAX_UNAVAILABLE = 1
_ONE_BOUND = "set either maxUnavailable or minAvailable, not both"


class DisruptionBudgetSpec(SpecModel):
    """The PodDisruptionBudget ``<name>`` of the app's pods: how many a voluntary disruption (node drain,
    cluster-autoscaler scale-down) may evict at once. Each evicted pod's tasks move and restore their
    state on other pods, so the default lets one pod go at a time (``maxUnavailable: 1``).

    Counts only (no percentages), as Strimzi's ``template.podDisruptionBudget``; a bound of 0 would forbid
    every voluntary eviction (drains hang), so it is rejected: use ``enabled: false`` for no budget.
    """

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {"rule": "!(has(self.maxUnavailable) && has(self.minAvailable))", "message": _ONE_BOUND}
            ]
        }
    )

    enabled: bool = Field(default=True, description="Create the PodDisruptionBudget (deleted when false).")
    max_unavailable: int | None = Field(
        default=None,
        ge=1,
        description=(
            "Pods a voluntary disruption may evict at once, >= 1 (0 would block every eviction: for no "
            "budget set enabled: false). Default 1 when minAvailable is not set."
        ),
    )
    min_available: int | None = Field(
        default=None,
        ge=1,
        description=(
            "Pods that must stay available instead of maxUnavailable, >= 1 (for no budget set enabled: "
            "false). When it is not below spec.replicas the "
            "budget would block every eviction, so the operator creates none (a Warning event says so)."
        ),
    )

    @model_validator(mode="after")
    def _one_bound(self) -> DisruptionBudgetSpec:
        if self.max_unavailable is not None and self.min_available is not None:
            raise ValueError(_ONE_BOUND)
        return self


class StreamAppSpec(SpecModel):
    """Desired state of a StreamApp: one Kafka Streams application run as a StatefulSet."""

    image: str = Field(min_length=1, description="Container image with the runtime and the user functions.")
    image_pull_policy: ImagePullPolicy = Field(
        default=ImagePullPolicy.IF_NOT_PRESENT, description="Pull policy of the application container."
    )
    application_id: str | None = Field(
        default=None,
        pattern=KAFKA_NAME_PATTERN,
        max_length=200,
        description="Kafka Streams application.id: consumer group and internal topic prefix. Default: metadata.name.",
    )
    replicas: int = Field(default=1, ge=0, le=MAX_REPLICAS, description="Number of pods (the /scale subresource).")
    threads: int = Field(default=1, ge=1, le=MAX_THREADS, description="Stream threads per pod (num.stream.threads).")
    processing_guarantee: ProcessingGuarantee = Field(
        default=ProcessingGuarantee.AT_LEAST_ONCE, description="Kafka Streams processing.guarantee."
    )
    kafka: KafkaSpec
    topology: TopologySpec
    state: StateSpec = Field(
        default_factory=StateSpec,
        description="Per-pod state volume.",
        # An object default lets the API server fill in the nested defaults (size) when state is omitted.
        json_schema_extra={"default": {}},
    )
    config: dict[str, ConfigValue] = Field(
        default_factory=dict,
        description="Extra Kafka Streams configuration passed to the runtime: strings, numbers or booleans "
        "(commit.interval.ms: 1000, enable.idempotence: true), each passed on as its string (true/false, decimal); "
        "a list, an object or a null is refused by the operator (condition SpecInvalid).",
    )
    resources: ResourceRequirements | None = Field(default=None, description="Container compute resources.")
    disruption_budget: DisruptionBudgetSpec = Field(
        default_factory=DisruptionBudgetSpec,
        description="PodDisruptionBudget of the pods; default: one pod evicted at a time.",
        json_schema_extra={"default": {}},
    )

    cleanup_policy: CleanupPolicy = Field(
        default=CleanupPolicy.RETAIN,
        description=(
            "On deletion: Retain keeps the internal topics, the consumer group's offsets and the state volumes "
            "(a re-created app resumes where it was); Delete removes the internal topics the operator created, "
            "the consumer group and the state volumes."
        ),
    )

    upgrade_policy: UpgradePolicy = Field(
        default=UpgradePolicy.REFUSE,
        description=(
            "A topology change that breaks state: refuse keeps the running topology (condition UpgradeCompatible); "
            "newApplicationId runs it as <applicationId>-g<generation>; reset resets the application first."
        ),
    )
    reset: ResetSpec | None = Field(
        default=None, description="A declarative application reset: a new nonce runs one (docs/operator-operations.md)."
    )
    autoscaling: AutoscalingSpec | None = Field(
        default=None,
        description="Replicas from consumer lag or processing rate; spec.replicas is then only the first size.",
    )

    @classmethod
    def parse(cls, spec: dict[str, Any]) -> StreamAppSpec:
        """Parse the ``spec`` of a StreamApp body; raises ``pydantic.ValidationError`` when invalid."""
        return cls.model_validate(spec)

    def effective_application_id(self, name: str) -> str:
        """``application.id``: ``spec.applicationId``, else the resource name."""
        return self.application_id or name


class Condition(SpecModel):
    """A status condition, after the Kubernetes API conventions (``metav1.Condition``)."""

    type: str = Field(description="Ready, Progressing, Degraded, TopologyValid, Restoring or ScalingLimited.")
    status: Literal["True", "False", "Unknown"]
    reason: str = Field(default="", description="CamelCase machine-readable reason.")
    message: str = Field(default="", description="Human-readable detail.")
    last_transition_time: str | None = Field(
        default=None,
        description="When status last changed (RFC 3339).",
        json_schema_extra={"format": "date-time"},
    )
    observed_generation: int | None = Field(default=None, description="metadata.generation it was set for.")


class RolloutStatus(SpecModel):
    """A rollout of a new pod template, one pod at a time (``rollout.plan_rollout``); absent when none runs."""

    target_revision: str | None = Field(default=None, description="Digest of the pod template rolled out.")
    partition: int | None = Field(
        default=None, description="The StatefulSet's rolling-update partition: pods at or above it are replaced."
    )
    updated: int | None = Field(default=None, description="Pods running the StatefulSet's update revision.")
    total: int | None = Field(default=None, description="Pods to update (spec.replicas).")
    replacing: str | None = Field(default=None, description="The pod handed to the StatefulSet controller last.")
    since: str | None = Field(default=None, description="When that pod was handed over (RFC 3339).")
    waiting_for: str | None = Field(default=None, description="Why the next pod is not replaced yet.")


class RetainedVolume(SpecModel):
    """A state volume kept after its pod was scaled away."""

    name: str = Field(description="The PersistentVolumeClaim.")
    since: str = Field(description="When its pod was scaled away (RFC 3339).")


class AutoscalingStatus(SpecModel):
    """``status.autoscaling``: the replicas the autoscaler set on the StatefulSet, why, and what it keeps
    between reconciles (``autoscale.ScalingHistory``, the processed-records sample for the rate)."""

    replicas: int | None = Field(default=None, description="Pods the autoscaler asks for.")
    reason: str | None = Field(default=None, description="Why, with the metric and its target.")
    recommendation: int | None = Field(default=None, description="This reconcile's recommendation (pods).")
    recommendations: list[dict[str, float]] | None = Field(
        default=None, description="Recommendations of the scale-down stabilization window ({at, replicas})."
    )
    last_scale_up_at: float | None = Field(default=None, description="Last scale-up (seconds since the epoch).")
    last_scale_down_at: float | None = Field(default=None, description="Last scale-down (seconds since the epoch).")
    records_per_second: float | None = Field(default=None, description="The pods' summed processing rate.")
    processed_total: int | None = Field(default=None, description="Records processed by the pods at sampledAt.")
    sampled_at: float | None = Field(default=None, description="When processedTotal was read (epoch seconds).")


class UpgradeStatus(SpecModel):
    """``status.upgrade``: what the operator did about the last topology change that broke state."""

    generation: int = Field(description="The metadata.generation of the change.")
    action: str = Field(description="refuse, newApplicationId or reset.")
    application_id: str = Field(description="The application.id the app runs with afterwards.")
    message: str = Field(default="", description="The changes found.")
    spec_reset_nonce: str | None = Field(
        default=None, description="spec.reset's nonce when the upgrade's reset began (that reset covers it)."
    )


class StoreRestore(SpecModel):
    """Restore progress of one store of a restoring task (or of the whole task, when its pod reports per task
    only), or, as the last entry of a capped list, the sums of the entries not listed (``omitted``)."""

    pod: str = Field(description='The pod restoring ("*" on the sums of the entries not listed).')
    task: str = Field(description='The task id, <sub-topology>_<partition> ("*" on the sums of those not listed).')
    store: str | None = Field(default=None, description="The store restoring.")
    changelog: str | None = Field(default=None, description="The store's changelog partition, <topic>-<partition>.")
    stores: list[str] | None = Field(
        default=None,
        description="The stores the entry covers: [store], or the stores of the task's sub-topology when its pod "
        "reports restore progress per task only.",
    )
    omitted: int | None = Field(
        default=None,
        description="Set on the last entry only when the list is capped: how many entries this one sums up.",
    )
    restored: int = Field(description="Changelog records restored so far.")
    remaining: int = Field(description="Changelog records (offsets) left to restore.")
    rate_per_second: float | None = Field(
        default=None, description="Records restored per second (the pod's recent rate, else since the last look)."
    )
    seconds_left: int | None = Field(default=None, description="Estimated seconds left (remaining / rate).")
    observed_at: str = Field(description="When this was read (RFC 3339).")


class DroppedRecords(SpecModel):
    """Records dropped, by reason (``streamapp.drop_reasons``; docs/metrics.md "Dropped records")."""

    late: int | None = Field(default=None, description="Records for a window or session that had closed.")
    null_key_or_value: int | None = Field(
        default=None, description="Records with a null key (or a null value where the operation needs one)."
    )
    invalid_timestamp: int | None = Field(
        default=None, description="Records with a negative timestamp or skipped by the timestamp extractor."
    )
    deserialization_error: int | None = Field(
        default=None, description="Records the deserialization exception handler skipped."
    )
    processing_error: int | None = Field(
        default=None, description="Records the processing or production exception handler skipped."
    )


class PodDroppedRecords(DroppedRecords):
    """Records one pod's stream threads dropped, by reason, as last read from its /status."""

    pod: str = Field(description="The pod.")


class StreamAppStatus(SpecModel):
    """Observed state of a StreamApp, written only by the operator."""

    observed_generation: int | None = Field(default=None, description="Last metadata.generation reconciled.")
    conditions: list[Condition] = Field(
        default_factory=list,
        description="Ready, Progressing, Degraded, TopologyValid, Restoring, ScalingLimited, RecordsDropped; one "
        "per type.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    replicas: int | None = Field(default=None, description="Pods of the StatefulSet (the /scale status).")
    ready_replicas: int | None = Field(default=None, description="Pods passing their readiness probe.")
    ready: str | None = Field(default=None, description='Ready pods over desired pods, e.g. "2/2".')
    selector: str | None = Field(default=None, description="Label selector of the pods (the /scale status).")
    tasks: int | None = Field(default=None, description="Number of Kafka Streams tasks of the topology.")
    lag: int | None = Field(default=None, description="Total consumer lag of the application, in records.")
    consumer_group_state: str | None = Field(default=None, description="State of the consumer group.")
    application_id: str | None = Field(default=None, description="Effective application.id.")
    disruption_budget: str | None = Field(
        default=None,
        description='The PodDisruptionBudget in force, e.g. "maxUnavailable=1", or why there is none.',
    )
    restore_remaining: int | None = Field(
        default=None, description="Changelog records left to restore over the pods that are not ready."
    )
    created_topics: list[str] | None = Field(
        default=None,
        description="Internal topics this operator created for the app: the only topics cleanupPolicy Delete deletes.",
    )
    consumer_groups: list[str] | None = Field(
        default=None,
        description="Consumer groups (application.ids) this app's pods were started with: the only groups "
        "cleanupPolicy Delete deletes.",
    )
    paused: bool | None = Field(
        default=None, description='True while the annotation streamapp.io/paused: "true" stops reconciling.'
    )
    restore: list[StoreRestore] | None = Field(
        default=None,
        max_length=MAX_RESTORE_ENTRIES,
        description=f"Restore progress per restoring store (absent when nothing restores); at most "
        f"{MAX_RESTORE_ENTRIES} entries, the last summing up the others when there are more.",
    )
    restore_progress: str | None = Field(
        default=None, description='The RESTORE column: records left and the longest time left, e.g. "12,000 left ~8s".'
    )
    dropped_records: DroppedRecords | None = Field(
        default=None,
        description="Records the app's stream threads dropped, by reason: the sum over its pods of each stream "
        "thread's count since it started (a pod not read this time counts with its last counts read).",
    )
    dropped_records_by_pod: list[PodDroppedRecords] | None = Field(
        default=None,
        description="droppedRecords per pod, as last read: what the next observation compares with "
        "(the RecordsDropped condition).",
    )
    retained_volumes: list[RetainedVolume] | None = Field(
        default=None,
        description="State volumes of scaled-away pods kept for spec.state.retainAfterScaleDown (then deleted).",
    )
    reset: ResetStatus | None = Field(default=None, description="The declarative reset: its nonce, target and step.")
    autoscaling: AutoscalingStatus | None = Field(default=None, description="The autoscaler's last decision.")
    upgrade: UpgradeStatus | None = Field(default=None, description="The last topology change that broke state.")
    rollout: RolloutStatus | None = Field(
        default=None, description="The rollout in progress: one pod at a time, why it waits (ADR 0009)."
    )


PAUSED_ANNOTATION = "streamapp.io/paused"


@dataclass(frozen=True)
class App:
    """Identity of the StreamApp being reconciled (from its metadata)."""

    name: str
    namespace: str
    uid: str
    generation: int
    created: str = ""
    annotations: dict[str, str] = field(default_factory=dict)

    @property
    def owner(self) -> Owner:
        return Owner(KIND, self.name, self.namespace, self.uid)

    @property
    def paused(self) -> bool:
        return self.annotations.get(PAUSED_ANNOTATION, "").strip().lower() == "true"
