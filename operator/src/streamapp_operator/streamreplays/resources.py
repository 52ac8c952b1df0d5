"""Typed model of the StreamReplay custom resource (``streamapp.io/v1alpha1``), the CRD's single source.

A StreamReplay reprocesses the history of a StreamApp's input topics as a Spark batch job
(``streamapp replay run``, docs/replay.md) over offset ranges the operator resolves first, and either writes
the replay's output (``mode: backfill``) or hands over to a new version of the app (``mode: handover``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pydantic import ConfigDict, Field
from streamapp.replay.plan import EMIT_EVERY_UPDATE, EMIT_FINAL

from streamapp_operator.kinds import GROUP, PLURALS, Owner, SpecModel
from streamapp_operator.streamapps.resources import (
    KAFKA_NAME_PATTERN,
    MAX_REPLICAS,
    Condition,
    DroppedRecords,
    TopologySpec,
)

KIND = "StreamReplay"
PLURAL = PLURALS[KIND]
#: The label naming the StreamReplay on what it makes (its Spark executors, the new version's StreamApp).
REPLAY_LABEL = f"{GROUP}/replay"
SINGULAR = "streamreplay"
SHORT_NAMES = ("sr", "replay")

#: Spark's memory strings for the driver and executors (``512m``, ``2g``).
SPARK_MEMORY_PATTERN = r"^[0-9]+[mg]$"
#: An RFC 3339 instant (``2013-01-01T00:00:00Z``).
INSTANT_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})$"
_ONE_POSITION = "set exactly one of {}"

PerPartition = dict[str, dict[str, int]]
"""``{topic: {partition: offset}}`` (partition numbers as strings: JSON object keys)."""


@dataclass(frozen=True)
class Replay:
    """Identity of the StreamReplay (from its metadata)."""

    name: str
    namespace: str
    uid: str
    generation: int
    created: str = ""
    """``metadata.creationTimestamp`` (RFC 3339): of two replays in each other's way, the older goes on."""

    @property
    def owner(self) -> Owner:
        return Owner(KIND, self.name, self.namespace, self.uid)


def _one_of(*fields: str) -> dict[str, Any]:
    rule = " + ".join(f"(has(self.{name}) ? 1 : 0)" for name in fields) + " == 1"
    return {"x-kubernetes-validations": [{"rule": rule, "message": _ONE_POSITION.format(", ".join(fields))}]}


class ReplayFrom(SpecModel):
    """Where the replay starts, in every partition of the app's input topics: exactly one of ``earliest``,
    ``offsets`` (every partition of every input topic) or ``timestamp`` (the first record at or after it)."""

    model_config = ConfigDict(json_schema_extra=_one_of("earliest", "offsets", "timestamp"))

    earliest: bool | None = Field(default=None, description="From the earliest retained offset (true).")
    offsets: PerPartition | None = Field(
        default=None, description='Per topic and partition, the first offset read: {flights: {"0": 0, "1": 12}}.'
    )
    timestamp: str | None = Field(
        default=None, pattern=INSTANT_PATTERN, description="RFC 3339 instant: the first record at or after it."
    )


class ReplayTo(SpecModel):
    """Where the replay ends (exclusive): exactly one of ``now`` (the end offsets when the replay is resolved),
    ``offsets`` or ``timestamp`` (the first record at or after it is not read)."""

    model_config = ConfigDict(json_schema_extra=_one_of("now", "offsets", "timestamp"))

    now: bool | None = Field(default=None, description="Up to the partitions' end when the range is resolved (true).")
    offsets: PerPartition | None = Field(
        default=None, description="Per topic and partition, the offset after the last record read."
    )
    timestamp: str | None = Field(
        default=None, pattern=INSTANT_PATTERN, description="RFC 3339 instant: records before it are read."
    )


class ReplayMode(StrEnum):
    """What the replay's result is for."""

    BACKFILL = "backfill"
    HANDOVER = "handover"


class EmitMode(StrEnum):
    """Which updates of an aggregation reach its sink (the replay plan's ``emit``, ``streamapp.replay.plan``)."""

    EVERY_UPDATE = EMIT_EVERY_UPDATE
    FINAL = EMIT_FINAL


class SparkMode(StrEnum):
    """Where Spark runs: ``local`` (driver and executors in the Job's one pod) or ``kubernetes``."""

    LOCAL = "local"
    KUBERNETES = "kubernetes"


class SparkDriver(SpecModel):
    """The Spark driver: the Job's pod. In local mode its cores are Spark's task slots (``local[cores]``)."""

    cores: int = Field(default=1, ge=1, le=16, description="CPU cores (local mode: parallel Spark tasks).")
    memory: str = Field(default="1g", pattern=SPARK_MEMORY_PATTERN, description="JVM heap (spark.driver.memory).")


class SparkExecutor(SpecModel):
    """Spark executors (``spark.mode: kubernetes`` only)."""

    instances: int = Field(default=2, ge=1, le=64, description="Executor pods.")
    cores: int = Field(default=1, ge=1, le=16, description="CPU cores per executor.")
    memory: str = Field(default="1g", pattern=SPARK_MEMORY_PATTERN, description="JVM heap per executor.")


class SparkSpec(SpecModel):
    """How the replay's Spark job runs."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "!has(self.mode) || self.mode != 'kubernetes' || has(self.serviceAccountName)",
                    "message": "spark.mode kubernetes needs spark.serviceAccountName (the driver makes executor pods)",
                }
            ]
        }
    )

    mode: SparkMode = Field(default=SparkMode.LOCAL, description="local (the default) or kubernetes.")
    image: str | None = Field(
        default=None,
        min_length=1,
        description="Image with the runtime's replay extra and a Java runtime; "
        "default: the operator's replay image (STREAMAPP_REPLAY_IMAGE).",
    )
    driver: SparkDriver = Field(default_factory=SparkDriver, json_schema_extra={"default": {}})
    executor: SparkExecutor = Field(default_factory=SparkExecutor, json_schema_extra={"default": {}})
    retries: int = Field(default=1, ge=0, le=5, description="Job retries (backoffLimit); a rerun writes no duplicate.")
    start_timeout_seconds: int = Field(
        default=300,
        ge=30,
        le=86400,
        description="Seconds the Job's pod has to start a container after the Job is created: a pod that cannot be "
        "created, scheduled or pull its image fails the replay then, with Kubernetes' reason (Degraded names it "
        "meanwhile).",
    )
    service_account_name: str | None = Field(
        default=None,
        min_length=1,
        description="kubernetes mode (required there): the Spark driver's ServiceAccount, allowed to create, watch "
        "and delete pods and configmaps in the namespace (the chart's replayDriver value makes one; "
        "docs/replay.md). local mode needs none.",
    )


class OldVersionPolicy(StrEnum):
    """What happens to the app's running version once the new one is active."""

    DELETE = "Delete"
    KEEP = "Keep"


class OutputsPolicy(StrEnum):
    """Where the new version of a handover writes: ``New`` output topics (a topic the app writes is refused,
    OutputInUse), or ``TakeOver`` the old version's, from where it stopped
    (``streamapp_operator.streamreplays.takeover``)."""

    NEW = "New"
    TAKE_OVER = "TakeOver"


class HandoverSpec(SpecModel):
    """The new version of the app (``mode: handover``)."""

    name: str | None = Field(
        default=None,
        max_length=52,
        pattern=r"^[a-z]([-a-z0-9]*[a-z0-9])?$",
        description="Name of the new version's StreamApp; default: the StreamReplay's name. Never appRef.name "
        "(refused); a StreamApp of that name that this replay did not create (label streamapp.io/replay) fails the "
        "replay (NewVersionNameInUse) and is left alone.",
    )
    old_version: OldVersionPolicy = Field(
        default=OldVersionPolicy.DELETE,
        description="Once the new version is active: Delete the old StreamApp (its cleanupPolicy applies) or Keep it.",
    )
    max_lag: int = Field(
        default=0, ge=0, description="The new version is caught up when Ready with at most this consumer lag."
    )
    # no schema default: the API server would add it to every StreamReplay it serves, and an operator of the version
    # before (its models forbid unknown fields) would refuse them all (InvalidSpec) while CRDs and operator upgrade
    outputs: OutputsPolicy | None = Field(
        default=None,
        description="New (the default, when unset): the new version writes new output topics (one the app writes "
        "fails the replay, OutputInUse). TakeOver: it writes the old version's output topics from where the old "
        "version stopped: the old version is scaled to 0 replicas before the range is resolved, the range ends at its "
        "committed offsets (to must be now), the replay does not write the taken-over topics, and the new version "
        "starts there; no record is lost or written twice per key. The old version is scaled back if the replay "
        "fails before the new version exists. Outputs wait while the replay runs.",
    )
    image: str | None = Field(
        default=None,
        min_length=1,
        description="The new version's image (its spec.image), whose user code the replay runs too; default: "
        "spec.image, else the app's spec.image. Must equal spec.image when both are set.",
    )
    replicas: int | None = Field(
        default=None,
        ge=0,
        le=MAX_REPLICAS,
        description="The new version's spec.replicas; default: the app's.",
    )


class AppRef(SpecModel):
    """The StreamApp whose input the replay reads (same namespace)."""

    name: str = Field(min_length=1, description="Name of the StreamApp.")


class StreamReplaySpec(SpecModel):
    """A replay of a StreamApp's input history as a Spark batch job."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {"rule": "self.mode != 'handover' || has(self.topology)", "message": "handover needs a topology"},
                {
                    "rule": "self.mode != 'handover' || !has(self.handover) || !has(self.handover.name) "
                    "|| self.handover.name != self.appRef.name",
                    "message": "handover.name must differ from appRef.name: the new version would take the name of "
                    "the app it replaces",
                },
                {
                    "rule": "!has(self.image) || !has(self.handover) || !has(self.handover.image) "
                    "|| self.image == self.handover.image",
                    "message": "spec.image and handover.image differ: the replay runs the new version's code, so set "
                    "one of them (or both the same)",
                },
                {
                    "rule": "!has(self.handover) || !has(self.handover.outputs) || self.handover.outputs != 'TakeOver' "
                    "|| (self.mode == 'handover' && has(self.to.now))",
                    "message": "handover.outputs TakeOver needs mode handover and to: {now: true} (the range ends "
                    "where the old version stopped)",
                },
                {"rule": "self == oldSelf", "message": "a StreamReplay's spec is immutable: create another one"},
            ]
        }
    )

    app_ref: AppRef
    image: str | None = Field(
        default=None,
        min_length=1,
        description="The app image whose user code the replay runs (built FROM the project's image; copied into the "
        "replay's pods by an init container); default: the app's spec.image. Its streamapp-runtime must be the "
        "replay image's (RuntimeVersionMismatch otherwise).",
    )
    from_: ReplayFrom = Field(
        default_factory=lambda: ReplayFrom(earliest=True),
        alias="from",
        description="Start of the range (default: earliest).",
        json_schema_extra={"default": {"earliest": True}},
    )
    to: ReplayTo = Field(
        default_factory=lambda: ReplayTo(now=True),
        description="End of the range, exclusive (default: now).",
        json_schema_extra={"default": {"now": True}},
    )
    mode: ReplayMode = Field(default=ReplayMode.BACKFILL, description="backfill or handover.")
    topology: TopologySpec | None = Field(
        default=None, description="The topology the replay runs (handover: the new version's); default: the app's."
    )
    application_id: str | None = Field(
        default=None,
        pattern=KAFKA_NAME_PATTERN,
        max_length=200,
        description="application.id of the replay's state (and of the new version); default: "
        "<the app's application.id>-<replay name>.",
    )
    emit: EmitMode = Field(
        default=EmitMode.EVERY_UPDATE,
        description="every_update (the default): every update of every aggregation reaches its sink, as a streaming "
        "run with the record cache off writes; final: only the last value per key (and window) of each input "
        "partition, as a record cache flushed once at the end writes (any topology: the Spark-native counts fold "
        "it, the runtime's task runs its own record cache; docs/replay.md).",
    )
    allow_overlap: bool | None = Field(
        default=None,
        description="backfill: run even when the range overlaps input the app's consumer group has committed and "
        "the backfill writes a topic the app writes (that output would be written twice; a Warning event "
        "OverlapAllowed says so). Unset or false: such a backfill fails with RangeOverlapsApp before any Job.",
    )
    handover: HandoverSpec = Field(default_factory=HandoverSpec, json_schema_extra={"default": {}})
    spark: SparkSpec = Field(default_factory=SparkSpec, json_schema_extra={"default": {}})

    @classmethod
    def parse(cls, spec: dict[str, Any]) -> StreamReplaySpec:
        return cls.model_validate(spec)


class Phase(StrEnum):
    """Where a StreamReplay is."""

    PENDING = "Pending"
    RUNNING = "Running"
    HANDING_OVER = "HandingOver"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


class StepState(StrEnum):
    STARTED = "Started"
    DONE = "Done"


class HandoverStep(SpecModel):
    """One handover step, recorded ``Started`` before it acts and ``Done`` after: a restarted operator
    resumes at the first step not done, and every step is idempotent."""

    name: str
    state: StepState
    time: str | None = None
    message: str | None = None


class ResolvedOffsets(SpecModel):
    """The replay's range: per input topic and partition, first offset read and offset after the last."""

    from_: PerPartition = Field(alias="from")
    to: PerPartition


class TakeOverStatus(SpecModel):
    """The old version's stop of a ``handover.outputs: TakeOver``."""

    replicas: int = Field(
        description="The old version's spec.replicas before it was scaled to 0 (restored on failure)."
    )
    application_id: str = Field(description="The old version's application.id (its consumer group).")
    outputs: list[str] = Field(default_factory=list, description="The output topics taken over.")
    state: str = Field(description="Stopping, Stopped (its range resolved from its committed offsets) or Restored.")


class StreamReplayStatus(SpecModel):
    """Observed state of a StreamReplay, written only by the operator."""

    phase: Phase | None = None
    progress: str | None = Field(default=None, description="What the replay is doing, e.g. 'spark job running 40s'.")
    observed_generation: int | None = None
    conditions: list[Condition] = Field(
        default_factory=list,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    application_id: str | None = Field(default=None, description="application.id of the replay's state.")
    app_uid: str | None = Field(
        default=None, description="uid of the replayed StreamApp: the only one a handover removes (oldVersion Delete)."
    )
    replay_id: str | None = Field(default=None, description="Keys the replay's transactional writes.")
    topics_deleted: list[str] | None = Field(
        default=None,
        description="Topics the replay deleted when it ended: its markers and, for a backfill (or a handover that "
        "failed before its new version existed), its changelog and repartition topics.",
    )
    dead_letter_topic: str | None = Field(
        default=None,
        description="The replay's own dead-letter topic (<applicationId>-dlq), when the app names one "
        "(errors.dead.letter.queue.topic.name): the replay never writes into the live app's.",
    )
    dead_letters: int | None = Field(
        default=None,
        description="Dead letters the replay wrote to deadLetterTopic, set when it ended: that topic is then kept "
        "(an empty one is deleted and listed in topicsDeleted).",
    )
    resolved_offsets: ResolvedOffsets | None = None
    records_read: int | None = None
    records_processed: int | None = Field(
        default=None, description="Input records the Spark job has processed so far (its last progress report)."
    )
    percent_processed: int | None = Field(
        default=None, ge=0, le=100, description="recordsProcessed as a percent of the job's input records."
    )
    job_phase: str | None = Field(
        default=None,
        description="The Spark job's phase from its last progress report: stages (reading and processing the input; "
        "recordsProcessed of recordsRead), write (the transactional output) or done.",
    )
    records_written: int | None = None
    dropped_records: DroppedRecords | None = Field(
        default=None,
        description="Records the replay dropped, by reason, from its result (the same reasons and rules as the "
        "streaming run's status.droppedRecords, so that the two engines compare).",
    )
    job: str | None = Field(default=None, description="Name of the Job running the replay.")
    start_time: str | None = None
    completion_time: str | None = None
    duration_seconds: int | None = None
    new_version: str | None = Field(default=None, description="StreamApp of the new version (handover).")
    new_version_uid: str | None = Field(
        default=None,
        description="uid of the new version's StreamApp as this replay created it: the only one the handover "
        "waits on and hands over to (one made again under its name is never adopted).",
    )
    handover: list[HandoverStep] | None = None
    take_over: TakeOverStatus | None = Field(
        default=None, description="handover.outputs TakeOver: the old version's stop (written before it is stopped)."
    )


__all__ = [
    "GROUP",
    "KIND",
    "PLURAL",
    "REPLAY_LABEL",
    "SHORT_NAMES",
    "SINGULAR",
    "EmitMode",
    "HandoverStep",
    "OutputsPolicy",
    "Phase",
    "Replay",
    "ReplayMode",
    "SparkMode",
    "StepState",
    "StreamReplaySpec",
    "StreamReplayStatus",
]
