"""What one StreamReplay reconcile reads before it decides: the StreamApp it replays, the StreamApp under its new
version's name (a handover, before its Job), and, once decided, the Kafka admin of the app's connection (its
Secrets read first: no client is built without its credentials).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from streamapp_operator.connection import kafka_connection
from streamapp_operator.kafka import KafkaUnavailable
from streamapp_operator.outcomes import Problem
from streamapp_operator.steps import KAFKA_UNAVAILABLE, Blocked
from streamapp_operator.streamapps.resources import StreamAppSpec
from streamapp_operator.streamreplays.context import ReplayKafka, ReplayWorld
from streamapp_operator.streamreplays.handover import new_version_name
from streamapp_operator.streamreplays.resources import Replay, ReplayMode, StreamReplaySpec


@dataclass(frozen=True)
class Observed:
    """The StreamApp the replay replays (None: it does not exist) and, for a handover before its Job, the
    StreamApp under the new version's name (``name_holder``; None: none, or not looked at)."""

    app: dict[str, Any] | None
    name_holder: dict[str, Any] | None = None


def observe(world: ReplayWorld, replay: Replay, spec: StreamReplaySpec, status: Mapping[str, Any]) -> Observed:
    """Read the replayed StreamApp and, for a handover whose Job does not exist yet, the new version's name."""
    app = world.cluster.get("StreamApp", replay.namespace, spec.app_ref.name)
    if spec.mode != ReplayMode.HANDOVER or status.get("job"):
        return Observed(app)
    return Observed(app, world.cluster.get("StreamApp", replay.namespace, new_version_name(spec, replay.name)))


def connect(
    world: ReplayWorld, replay: Replay, spec: StreamReplaySpec, app_spec: StreamAppSpec
) -> ReplayKafka | Blocked:
    """The Kafka admin of the app's connection, or why there is none yet: a Secret or key missing (the replay waits,
    ``Degraded``, until it is there) or settings librdkafka refuses (said, retried at every reconcile)."""
    connection, problems = kafka_connection(world.cluster, replay.namespace, app_spec.kafka)
    if problems:  # before any Kafka client: the replay waits (Degraded) until the Secret is there
        messages = "; ".join(p.message for p in problems)
        return Blocked(Problem(problems[0].reason, f"StreamApp {spec.app_ref.name}: {messages}"))
    try:
        return world.kafka_for(connection)
    except KafkaUnavailable as exc:  # librdkafka refused the settings: said, retried at every reconcile
        return Blocked(Problem(KAFKA_UNAVAILABLE, f"StreamApp {spec.app_ref.name}: {exc}"))
