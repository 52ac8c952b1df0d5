"""Validation of a StreamApp: its spec, its topology, and the topology against the Kafka cluster.

Every check returns :class:`Problem` values instead of raising: an invalid StreamApp is a state to report
(``Degraded``, ``TopologyValid=False``) and to re-check on the next update or timer tick, never an error to
retry in a loop. Messages name the field, node or topic and say what is wrong.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from streamapp.config import ConfigError, StreamsConfig
from streamapp.topology import InternalTopic, TopologyDescription, TopologyError

from streamapp_operator.connection import SECURITY_CONFIG_KEYS
from streamapp_operator.outcomes import Problem
from streamapp_operator.streamapps.desired import DERIVED_CONFIG_KEYS, streams_config
from streamapp_operator.streamapps.resources import StreamAppSpec

SPEC_INVALID = "SpecInvalid"
CONFIG_INVALID = "ConfigInvalid"
SECRET_IN_CONFIG = "SecretInConfig"
#: ``spec.config`` keys whose values are credentials (librdkafka's and the Schema Registry client's names,
#: with or without a ``consumer.``/``producer.``/``schema.registry.`` prefix): they would be copied into a
#: ConfigMap in plain text, so they are refused in favour of ``spec.kafka.authentication``/``tls``.
SECRET_CONFIG_SUFFIXES = (
    "sasl.password",
    "sasl.username",
    "sasl.jaas.config",
    "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.config",
    "ssl.key.password",
    "ssl.key.pem",
    "ssl.keystore.password",
    "ssl.truststore.password",
    "ssl_key",
    "basic.auth.user.info",
    "bearer.auth.token",
)
TOPOLOGY_INVALID = "TopologyInvalid"
SOURCE_TOPIC_MISSING = "SourceTopicMissing"
INTERNAL_TOPIC_MISMATCH = "InternalTopicMismatch"


@dataclass(frozen=True)
class TopicPlan:
    """What the topology needs from Kafka, given the partition counts of its external source topics."""

    internal_topics: list[InternalTopic]
    tasks: int


def parse_spec(raw: Mapping[str, Any], name: str = "app") -> tuple[StreamAppSpec | None, list[Problem]]:
    """Parse the ``spec`` of StreamApp ``name``; the API server's schema already checked most of it."""
    try:
        spec = StreamAppSpec.parse(dict(raw))
    except ValidationError as exc:
        return None, [Problem(SPEC_INVALID, f"spec: {_message(exc)}")]
    return spec, check_spec(spec, spec.effective_application_id(name))


def check_spec(spec: StreamAppSpec, application_id: str = "app") -> list[Problem]:
    """Cross-field rules of the spec that the CRD schema cannot express, then the whole ``streams.yaml``
    the pods would get, checked by the runtime's own ``StreamsConfig`` (unknown keys, ill-typed values,
    a dead-letter handler without its topic): a bad key is a condition naming the field here, never a
    crash loop of every pod."""
    problems = []
    for key in sorted(set(spec.config) & (set(DERIVED_CONFIG_KEYS) | set(SECURITY_CONFIG_KEYS))):
        source = DERIVED_CONFIG_KEYS.get(key) or "spec.kafka.authentication/tls"
        problems.append(Problem(SPEC_INVALID, f"spec.config[{key!r}] is set by the operator from {source}"))
    for key in sorted(k for k in spec.config if k.lower().endswith(SECRET_CONFIG_SUFFIXES)):
        problems.append(
            Problem(
                SECRET_IN_CONFIG,
                f"spec.config[{key!r}] looks like a credential and would be stored in plain text: put it in a "
                "Secret and reference it from spec.kafka.authentication (usernameSecret, passwordSecret)",
            )
        )
    factor = spec.config.get("replication.factor", "-1")
    if not _is_int(factor) or int(factor) == 0 or int(factor) < -1:
        problems.append(
            Problem(SPEC_INVALID, f"spec.config['replication.factor'] must be -1 or a positive integer, got {factor!r}")
        )
    if problems:
        return problems
    try:
        StreamsConfig.from_mapping(streams_config(spec, application_id))
    except ConfigError as exc:
        problems.append(Problem(CONFIG_INVALID, _config_message(str(exc))))
    return problems


def _config_message(message: str) -> str:
    """The runtime's ConfigError in the spec's words: ``'num.stream.threads': ...`` -> ``spec.threads: ...``,
    ``unknown key 'x'`` -> ``spec.config['x']: unknown key``, any other key -> ``spec.config['key']: ...``."""
    parts = []
    for part in message.removeprefix("invalid streams config: ").split("; "):
        if match := re.fullmatch(r"unknown key '(.+)'", part):
            parts.append(f"spec.config[{match.group(1)!r}]: unknown key")
        elif match := re.fullmatch(r"'([^']+)': (.*)", part, re.DOTALL):
            key, text = match.groups()
            field = DERIVED_CONFIG_KEYS.get(key, "")
            where = field if field.startswith("spec.") else f"spec.config[{key!r}]"
            where = "spec.config" if key == "config" else where
            parts.append(f"{where}: {text}")
        else:
            parts.append(f"spec.config: {part}")
    return "; ".join(parts)


def parse_topology(spec: StreamAppSpec) -> tuple[TopologyDescription | None, list[Problem]]:
    """The spec's topology as the runtime reads it; TopologyError messages become problems verbatim.

    A function reference no pod could import (a lambda, a nested or ``__main__`` function: the runtime accepts
    those only in-process) is a problem too, naming the node and parameter, instead of a crash loop of every pod.
    """
    try:
        topology = TopologyDescription.from_dict(spec.topology.to_description_dict())
        topology.check_exportable()
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
