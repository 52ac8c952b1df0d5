"""The replay plan ``streamapp replay run --plan`` reads (``streamapp.replay.ReplayPlan``), and the identities
it runs under: the replay's ``application.id`` and its id (transactional writes, done markers). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from streamapp_operator.streamreplays import dead_letters
from streamapp_operator.streamreplays.offset_range import Offsets
from streamapp_operator.streamreplays.resources import (
    EmitMode,
    StreamReplaySpec,
)


def replay_id(name: str, uid: str) -> str:
    """Keys the replay's transactional writes and done markers: stable across reruns of the same object."""
    return f"{name}-{uid[:8]}"


def application_id(spec: StreamReplaySpec, replay_name: str, app_application_id: str) -> str:
    return spec.application_id or f"{app_application_id}-{replay_name}"


@dataclass(frozen=True)
class PlanInputs:
    """What a replay plan holds: the replay's id, its topology and runtime config, the app's bootstrap servers,
    the ``[start, end)`` offsets, the sink topics' partition counts, the non-secret Kafka settings and the emit
    mode."""

    replay_id: str
    topology: Mapping[str, Any]
    config: Mapping[str, Any]
    bootstrap_servers: str
    start: Offsets
    end: Offsets
    sink_partitions: Mapping[str, int]
    kafka_settings: Mapping[str, str] | None = None
    emit: EmitMode = EmitMode.EVERY_UPDATE


def plan_document(inputs: PlanInputs) -> dict[str, Any]:
    """The replay plan (``ReplayPlan.from_document``'s form) of ``inputs``. ``kafka_settings``: the non-secret client
    settings (``connection.security_config``: ``security.protocol``, ``sasl.mechanism``, ``ssl.ca.location``),
    the plan's ``kafka`` section; the credentials reach the Job's pod as variables from their Secrets.
    ``emit``: the spec's (``every_update`` or ``final``: docs/replay.md)."""
    plan: dict[str, Any] = {
        "replayId": inputs.replay_id,
        "bootstrapServers": inputs.bootstrap_servers,
        "topology": dict(inputs.topology),
        "config": dict(inputs.config),
        "from": {t: {p: o for p, o in sorted(parts.items())} for t, parts in sorted(inputs.start.items())},
        "to": {t: {p: o for p, o in sorted(parts.items())} for t, parts in sorted(inputs.end.items())},
        "partitions": dict(sorted(inputs.sink_partitions.items())),
        "emit": inputs.emit.value,
    }
    if inputs.kafka_settings:
        plan["kafka"] = dict(sorted(inputs.kafka_settings.items()))
    return plan


def replay_config(app_config: Mapping[str, str], application_id: str) -> dict[str, Any]:
    """The Kafka Streams config the replay runs with: the app's ``spec.config``, the new ``application.id`` and,
    when the app names a dead-letter topic, the replay's own (``dead_letters.topic``: never the live app's)."""
    config: dict[str, Any] = {**{k: v for k, v in sorted(app_config.items())}, "application.id": application_id}
    own = dead_letters.topic(app_config, application_id)
    if own is not None:
        config[dead_letters.DLQ_KEY] = own
    return config


def sink_retention_ms(source_retention_ms: Mapping[str, int]) -> int | None:
    """``retention.ms`` of an output topic the replay creates: the longest of its source topics' (-1, kept for ever,
    when any source keeps its records for ever); None (the broker's default) when none is known.

    A replay writes output records with their input records' timestamps, often older than the broker's default
    retention (7 days): a topic created with that default would have them deleted at the next retention check."""
    if not source_retention_ms:
        return None
    values = list(source_retention_ms.values())
    return -1 if any(v < 0 for v in values) else max(values)
