"""The declarative application reset (pure): ``spec.reset: {nonce, to}`` as a state machine over status.

A reset is Kafka's ``kafka-streams-application-reset`` run by the operator (``streamapp.kafka.reset_plan`` is
the plan, ``docs/reset.md``), with the application stopped around it. Its steps, in order
(``RESET_STEPS``; the one in progress is ``status.reset.step``):

===================== ========================================================== ==============================
step                  the operator ...                                           the step is over when
===================== ========================================================== ==============================
scaleToZero           sets ``/scale`` replicas to 0                               the StatefulSet asks 0 replicas
awaitStopped          waits                                                       no pod, and the group is empty
resetOffsets          commits the target offsets of the input topics (group)      the action succeeded
deleteInternalTopics  deletes ``<applicationId>-*-repartition/-changelog``       the action succeeded
deleteLocalState      deletes the pods' state PVCs (``KafkaStreams.cleanUp()``)  no state PVC is left
scaleBack             sets replicas back to ``replicasBefore``                    the StatefulSet asks that many
done                  nothing: the nonce is finished and never runs again         -
===================== ========================================================== ==============================

``next_step(spec, status, observed)`` returns a ``Step``: write ``Step.status`` to ``status.reset`` *before*
doing ``Step.action``, and ``Step.after`` (when given) once the action succeeded. So an operator killed at any
point finds the step in status and runs it again: every action is idempotent (offsets committed twice are
the same offsets; a deleted topic or PVC is deleted again as a no-op).

The reset's target is copied into status when it starts: a reset in progress finishes with the target it
started with, and a new ``nonce`` given meanwhile starts after it (``done``). If the application comes back
(pods or group members) during resetOffsets, deleteInternalTopics or deleteLocalState, the reset goes back to
scaleToZero: nothing is reset under a live group.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel
from streamapp.kafka.reset_plan import ResetError, ResetTarget, ToEarliest, ToOffsets, parse_datetime
from streamapp.kafka.types import TopicPartition

__all__ = ["RESET_STEPS", "ResetAction", "ResetObserved", "ResetSpec", "ResetStatus", "ResetStep", "Step", "next_step"]

ResetStep = Literal[
    "scaleToZero", "awaitStopped", "resetOffsets", "deleteInternalTopics", "deleteLocalState", "scaleBack", "done"
]
RESET_STEPS: tuple[ResetStep, ...] = (
    "scaleToZero",
    "awaitStopped",
    "resetOffsets",
    "deleteInternalTopics",
    "deleteLocalState",
    "scaleBack",
    "done",
)
ResetAction = Literal[
    "none", "scaleToZero", "wait", "resetOffsets", "deleteInternalTopics", "deleteLocalState", "scaleBack"
]


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


class ResetSpec(_Model):
    """``spec.reset``: change ``nonce`` to ask for one reset to ``to``: ``earliest``, an RFC 3339 time (the first
    offset at or after it), or ``offsets`` with ``offsets: {topic: {partition: offset}}`` (other partitions:
    earliest)."""

    nonce: str = Field(min_length=1, max_length=63, description="Any new value asks for one more reset.")
    to: str = Field(default="earliest", description="earliest, an RFC 3339 time, or offsets.")
    offsets: dict[str, dict[int, int]] | None = Field(
        default=None, description="With to: offsets, the offset of each topic partition."
    )

    @model_validator(mode="after")
    def _check_target(self) -> ResetSpec:
        if self.to == "offsets":
            if not self.offsets or not any(self.offsets.values()):
                raise ValueError("to: offsets needs offsets: {topic: {partition: offset}}")
            negative = [f"{t}:{p}" for t, parts in self.offsets.items() for p, o in parts.items() if p < 0 or o < 0]
            if negative:
                raise ValueError(f"offsets and partitions must be >= 0: {', '.join(negative)}")
        elif self.offsets is not None:
            raise ValueError("offsets apply only with to: offsets")
        elif self.to != "earliest":
            try:
                parse_datetime(self.to)  # the reset tool's own rule: RFC 3339 with a zone
            except ResetError as error:
                raise ValueError(
                    f"to: '{self.to}' is neither earliest, offsets nor an RFC 3339 time: {error}"
                ) from None
        return self

    def target(self) -> ResetTarget:
        """The target for ``streamapp.kafka.reset_plan`` (``plan_reset``, ``offsets_to_commit``)."""
        if self.to == "earliest":
            return ToEarliest()
        if self.to == "offsets":
            assert self.offsets is not None
            return ToOffsets({TopicPartition(t, p): o for t, parts in self.offsets.items() for p, o in parts.items()})
        return parse_datetime(self.to)


class ResetStatus(_Model):
    """``status.reset``: the reset's nonce and target (copied from spec when it started), the step in
    progress (or ``done``), and the replicas to scale back to."""

    nonce: str
    to: str = "earliest"
    offsets: dict[str, dict[int, int]] | None = None
    step: ResetStep
    replicas_before: int = Field(ge=0)
    message: str = ""

    def spec(self) -> ResetSpec:
        """The target this reset runs with."""
        return ResetSpec(nonce=self.nonce, to=self.to, offsets=self.offsets)


@dataclass(frozen=True)
class ResetObserved:
    """What the operator sees: the replicas the StatefulSet asks for, pods that exist (any phase), members of
    the consumer group ``applicationId``, and the state PVCs of the StreamApp."""

    replicas: int
    pods: int
    group_members: int
    state_volumes: int


@dataclass(frozen=True)
class Step:
    """What to do now: record ``status`` first, then do ``action`` (scale actions to ``replicas``), then record
    ``after`` if given. ``status`` is ``None`` only when there is no reset at all."""

    action: ResetAction
    status: ResetStatus | None
    message: str
    replicas: int | None = None
    after: ResetStatus | None = None


def next_step(spec: ResetSpec | None, status: ResetStatus | None, observed: ResetObserved) -> Step:
    """The reset's next step (see the module docstring)."""
    if status is None or status.step == "done":
        if spec is None or (status is not None and status.nonce == spec.nonce):
            return Step("none", status, "no reset asked" if status is None else f"reset {status.nonce} done")
        status = ResetStatus(
            nonce=spec.nonce, to=spec.to, offsets=spec.offsets, step="scaleToZero", replicas_before=observed.replicas
        )
    return _resume(status, observed)


def _resume(status: ResetStatus, o: ResetObserved) -> Step:
    step = status.step
    live = o.replicas > 0 or o.pods > 0 or o.group_members > 0
    if step in ("resetOffsets", "deleteInternalTopics", "deleteLocalState") and live:
        step = "scaleToZero"
    while True:
        current = _at(status, step)
        if step == "scaleToZero":
            if o.replicas > 0:
                return Step("scaleToZero", current, "scaling to 0 replicas", replicas=0)
        elif step == "awaitStopped":
            if o.pods > 0 or o.group_members > 0:
                waiting = f"waiting for {o.pods} pod(s) to stop and {o.group_members} group member(s) to leave"
                return Step("wait", _at(status, step, waiting), waiting)
        elif step == "resetOffsets":
            return Step("resetOffsets", current, f"resetting offsets to {status.to}", after=_at(status, _next(step)))
        elif step == "deleteInternalTopics":
            return Step("deleteInternalTopics", current, "deleting internal topics", after=_at(status, _next(step)))
        elif step == "deleteLocalState":
            if o.state_volumes > 0:
                return Step("deleteLocalState", current, f"deleting {o.state_volumes} state volume(s)")
        elif step == "scaleBack":
            if o.replicas != status.replicas_before:
                target = status.replicas_before
                return Step("scaleBack", current, f"scaling back to {target} replicas", replicas=target)
        else:
            return Step("none", _at(status, "done", f"reset {status.nonce} done"), f"reset {status.nonce} done")
        step = _next(step)


def _next(step: ResetStep) -> ResetStep:
    return RESET_STEPS[min(RESET_STEPS.index(step) + 1, len(RESET_STEPS) - 1)]


def _at(status: ResetStatus, step: ResetStep, message: str = "") -> ResetStatus:
    return status.model_copy(update={"step": step, "message": message})
