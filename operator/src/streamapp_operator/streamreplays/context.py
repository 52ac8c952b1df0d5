"""What a StreamReplay's reconcile reads and acts through: the replay's identity, the seams (API server, Kafka) and
the context its steps share, with small readings of it (the names and topics a step needs).

The context is frozen: a step returns what it recorded (``StepOutcome.status``) and ``steps.run_steps`` hands the
next step the context with it (:meth:`ReplayContext.recorded`); no step writes into another's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

from streamapp.topology import TopologyDescription

from streamapp_operator.connection import KafkaConnection
from streamapp_operator.identity import Peer
from streamapp_operator.k8s import Cluster
from streamapp_operator.kafka import KafkaAdmin
from streamapp_operator.steps import StepOutcome
from streamapp_operator.streamapps.resources import StreamAppSpec
from streamapp_operator.streamreplays import (
    claims,
    takeover,
)
from streamapp_operator.streamreplays.resources import (
    Replay,
    StepState,
    StreamReplaySpec,
)
from streamapp_operator.times import seconds_between

DEFAULT_IMAGE = "localhost/streamapp-replay:dev"


#: Lines of the Job pod's log read for its last progress report (Spark's own warnings share the log).
PROGRESS_LOG_LINES = 200


#: The replay's reason when the StreamApp it replays is gone before the replay could finish.
APP_MISSING = "AppMissing"


class ReplayCluster(Cluster, Protocol):
    """What the replay controller needs of the API beyond the StreamApp controller's seam."""

    def patch_replay_status(self, namespace: str, name: str, status: dict[str, Any]) -> None: ...

    def read_pod_log(self, namespace: str, name: str, tail_lines: int = 50) -> str: ...

    def scale_streamapp(self, namespace: str, name: str, replicas: int) -> None: ...


class ReplayKafka(KafkaAdmin, Protocol):
    """Offsets: what the replay controller needs of Kafka beyond topics."""

    def list_offsets(self, partitions: Mapping[str, int], at: str | int) -> dict[str, dict[int, int]]: ...

    def set_group_offsets(self, group_id: str, offsets: Mapping[str, Mapping[int, int]]) -> None: ...

    def committed_offsets(self, group_id: str, partitions: Mapping[str, int]) -> dict[str, dict[int, int]]: ...

    def read_committed_values(self, topic: str, timeout: float = 20.0) -> list[bytes]: ...


@dataclass(frozen=True)
class ReplayWorld:
    """The seams: the API, a Kafka admin per connection, and the cluster's StreamApps with the
    ``application.id`` each claims (``peers``: kopf's ``application_ids`` index, ``main.py``)."""

    cluster: ReplayCluster
    kafka_for: Callable[[KafkaConnection], ReplayKafka]
    image: str = DEFAULT_IMAGE
    peers: Callable[[], Iterable[Peer]] = lambda: ()
    replays: Callable[[], Iterable[claims.ReplayClaim]] = lambda: ()
    """The cluster's unfinished StreamReplays (kopf's ``replay_claims`` index, ``handlers.py``)."""


@dataclass(frozen=True)
class ReplayContext:
    """Everything the steps read: the replay and its typed spec, the StreamApp it replays and that app's typed spec
    (None: gone; a handover's later steps go on without it), the seams, the Kafka admin of the app's connection
    (None: no app), the topology the replay runs, ``status`` as recorded so far (the previous status with what the
    decisions and the steps before recorded) and the reconcile's instant ``now`` (RFC 3339)."""

    replay: Replay
    spec: StreamReplaySpec
    app: dict[str, Any] | None
    app_spec: StreamAppSpec | None
    world: ReplayWorld
    kafka: ReplayKafka | None
    description: TopologyDescription
    status: Mapping[str, Any]
    now: str

    def recorded(self, outcome: StepOutcome) -> ReplayContext:
        """The context the next step reads: ``status`` with what ``outcome`` recorded (``run_steps``' ``advance``)."""
        return replace(self, status={**self.status, **outcome.status})


def empty_range(ctx: ReplayContext) -> bool:
    """The resolved range holds no record (``recordsRead`` 0, e.g. ``from.timestamp`` after the last record) and no
    Job was launched for it: a Spark run would read nothing and write nothing (the audit's R5f ran 51 s for it)."""
    return not ctx.status.get("job") and ctx.status.get("recordsRead") == 0


def output_topics(ctx: ReplayContext) -> list[str]:
    """The topics the replay writes besides its internal ones: the topology's sinks and its dead-letter topic."""
    dlq, taken = ctx.status.get("deadLetterTopic"), (ctx.status.get("takeOver") or {}).get("outputs") or []
    return [*(t for t in ctx.description.sink_topics() if t not in taken), *([dlq] if dlq else [])]


def plan_topology(ctx: ReplayContext) -> dict[str, Any]:
    """The topology the Job runs: the new version's, without the sinks into taken-over topics (TakeOver: the old
    version's records up to the switch are there already)."""
    document = topology_document(ctx)
    taken = (ctx.status.get("takeOver") or {}).get("outputs") or []
    return takeover.without_sinks(document, taken) if taken else document


def topology_document(ctx: ReplayContext) -> dict[str, Any]:
    """The new version's topology as a description document: the replay's ``spec.topology``, else the app's."""
    if ctx.spec.topology is not None:
        return ctx.spec.topology.to_description_dict()
    return dict((ctx.app or {}).get("spec", {}).get("topology") or {})


def new_version_created(status: Mapping[str, Any]) -> bool:
    """Whether a handover got as far as creating the new version (which runs on the replay's internal topics)."""
    steps = {step.get("name"): step.get("state") for step in status.get("handover") or []}
    return steps.get("createNewVersion") in (StepState.STARTED.value, StepState.DONE.value) or bool(
        status.get("newVersionUid")
    )


def markers_topic(ctx: ReplayContext) -> str:
    """The replay's done-markers topic (what its Spark writers committed, keyed by the replay's id)."""
    return f"streamapp-replay-{ctx.status['replayId']}-markers"


def seconds_since(start: str | None, now: str) -> int | None:
    """Whole seconds from ``start`` to ``now`` (RFC 3339; never negative); None without a start."""
    if not start:
        return None
    return max(0, int(seconds_between(start, now)))
