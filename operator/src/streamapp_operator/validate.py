"""Validation of a StreamApp: its spec, its topology, and the topology against the Kafka cluster.

Every check returns :class:`Problem` values instead of raising: an invalid StreamApp is a state to report
(``Degraded``, ``TopologyValid=False``) and to re-check on the next update or timer tick, never an error to
retry in a loop. Messages name the field, node or topic and say what is wrong.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from streamapp.topology import InternalTopic, TopologyDescription, TopologyError

from streamapp_operator.desired import DERIVED_CONFIG_KEYS
from streamapp_operator.resources import StreamAppSpec

SPEC_INVALID = "SpecInvalid"
TOPOLOGY_INVALID = "TopologyInvalid"
SOURCE_TOPIC_MISSING = "SourceTopicMissing"
INTERNAL_TOPIC_MISMATCH = "InternalTopicMismatch"


@dataclass(frozen=True)
class Problem:
    """Why a StreamApp cannot be (fully) reconciled.

    ``reason`` is a CamelCase condition reason; ``topology`` marks problems that make ``TopologyValid``
    false (as opposed to problems of the spec, the cluster or Kafka).
    """

    reason: str
    message: str
    topology: bool = False


@dataclass(frozen=True)
class TopicPlan:
    """What the topology needs from Kafka, given the partition counts of its external source topics."""

    internal_topics: list[InternalTopic]
    tasks: int


def parse_spec(raw: Mapping[str, Any]) -> tuple[StreamAppSpec | None, list[Problem]]:
    """Parse a StreamApp's ``spec``; the API server's schema already checked most of it."""
    try:
        spec = StreamAppSpec.parse(dict(raw))
    except ValidationError as exc:
        return None, [Problem(SPEC_INVALID, f"spec: {_message(exc)}")]
    return spec, check_spec(spec)


def check_spec(spec: StreamAppSpec) -> list[Problem]:
    """Cross-field rules of the spec that the CRD schema cannot express."""
    problems = []
    for key in sorted(set(spec.config) & set(DERIVED_CONFIG_KEYS)):
        problems.append(
            Problem(SPEC_INVALID, f"spec.config[{key!r}] is set by the operator from {DERIVED_CONFIG_KEYS[key]}")
        )
    factor = spec.config.get("replication.factor", "-1")
    if not _is_int(factor) or int(factor) == 0 or int(factor) < -1:
        problems.append(
            Problem(SPEC_INVALID, f"spec.config['replication.factor'] must be -1 or a positive integer, got {factor!r}")
        )
    return problems


def parse_topology(spec: StreamAppSpec) -> tuple[TopologyDescription | None, list[Problem]]:
    """The spec's topology as the runtime reads it; TopologyError messages become problems verbatim."""
    try:
        topology = TopologyDescription.from_dict(spec.topology.to_description_dict())
    except (TopologyError, ValidationError) as exc:
        return None, [Problem(TOPOLOGY_INVALID, f"spec.topology: {_message(exc)}", topology=True)]
    return topology, []


def plan_topics(
    topology: TopologyDescription, application_id: str, partitions: Mapping[str, int]
) -> tuple[TopicPlan | None, list[Problem]]:
    """Internal topics and task count, checked against the observed partition counts.

    ``partitions`` maps the existing topics among the topology's external sources and internal topics to
    their partition counts. Missing source topics, topics that are not co-partitioned and internal topics
    whose partition count differs from what the topology implies are problems.
    """
    missing = [topic for topic in topology.external_source_topics() if topic not in partitions]
    if missing:
        names = ", ".join(repr(topic) for topic in missing)
        phrase = f"source topic {names} does not" if len(missing) == 1 else f"source topics {names} do not"
        return None, [Problem(SOURCE_TOPIC_MISSING, f"{phrase} exist in Kafka", topology=True)]
    sources = {topic: partitions[topic] for topic in topology.external_source_topics()}
    try:
        internal = topology.internal_topics(application_id, sources)
        tasks = len(topology.task_ids(application_id, sources))
    except TopologyError as exc:
        return None, [Problem(TOPOLOGY_INVALID, f"spec.topology: {_message(exc)}", topology=True)]
    problems = [
        Problem(
            INTERNAL_TOPIC_MISMATCH,
            f"internal topic {topic.name!r} has {partitions[topic.name]} partitions but the topology needs "
            f"{topic.partitions}; delete the topic or use a new applicationId",
        )
        for topic in internal
        if topic.name in partitions and partitions[topic.name] != topic.partitions
    ]
    return TopicPlan(internal_topics=internal, tasks=tasks), problems


def _message(exc: Exception) -> str:
    """One line for a condition message: pydantic errors as ``field: problem``, others verbatim."""
    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}" for error in exc.errors())
    return " ".join(str(exc).split()) or type(exc).__name__


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True
