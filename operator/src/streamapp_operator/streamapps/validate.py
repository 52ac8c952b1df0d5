"""Validation of a StreamApp: its spec, its topology, and the topology against the Kafka cluster.

Every check returns :class:`Problem` values instead of raising: an invalid StreamApp is a state to report
(``Degraded``, ``TopologyValid=False``) and to re-check on the next update or timer tick, never an error to
retry in a loop. Messages name the field, node or topic and say what is wrong.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from streamapp.config import ConfigError, StreamsConfig
from streamapp.topology import InternalTopic, TopologyDescription, TopologyError

from streamapp_operator.streamapps.desired import DERIVED_CONFIG_KEYS, SECURITY_CONFIG_KEYS, owned_by, streams_config
from streamapp_operator.streamapps.resources import StreamAppSpec

SPEC_INVALID = "SpecInvalid"
CONFIG_INVALID = "ConfigInvalid"
SECRET_IN_CONFIG = "SecretInConfig"
APPLICATION_ID_IN_USE = "ApplicationIdInUse"
FOREIGN_OBJECT = "ForeignObject"
CONSUMER_GROUP_IN_USE = "ConsumerGroupInUse"

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


@dataclass(frozen=True)
class Peer:
    """A StreamApp of the cluster as the operator's index knows it: who claims which ``application.id``."""

    namespace: str
    name: str
    uid: str
    created: str
    """``metadata.creationTimestamp`` (RFC 3339): the older app keeps a contested id."""
    application_id: str


def identity_conflicts(me: Peer, peers: Iterable[Peer]) -> list[Problem]:
    """An ``application.id`` is a consumer group, a ``group.instance.id`` prefix and an internal-topic
    prefix in one Kafka cluster, so two StreamApps must never share one: they would split the input
    partitions, or fence each other's static members for ever, and both look healthy.

    The app created first keeps the id (ties: namespace/name); ``me`` is refused naming the other one.
    """
    rivals = [p for p in peers if p.application_id == me.application_id and p.uid != me.uid]
    older = sorted((p for p in rivals if (p.created, p.namespace, p.name) < (me.created, me.namespace, me.name)),
                   key=lambda p: (p.created, p.namespace, p.name))  # fmt: skip
    if not older:
        return []
    first = older[0]
    return [
        Problem(
            APPLICATION_ID_IN_USE,
            f"application.id {me.application_id!r} is already used by StreamApp {first.namespace}/{first.name}; "
            "set a unique spec.applicationId (the default is metadata.name, unique only within a namespace)",
        )
    ]


def foreign_children(
    owner_uid: str, children: Mapping[str, Mapping[str, Any] | None], owner_kind: str = "StreamApp"
) -> list[Problem]:
    """Children that exist without ``owner_uid`` (an ``owner_kind``) among their ownerReferences (``kind ->
    object``): made by someone else, so never applied over (server-side apply would take over their fields) nor
    deleted (our owner reference would hand them to the garbage collector)."""
    problems = []
    for kind, obj in children.items():
        if obj is None:
            continue
        metadata = obj.get("metadata") or {}
        if owned_by(obj, owner_uid):
            continue
        problems.append(
            Problem(
                FOREIGN_OBJECT,
                f"{kind} {metadata.get('name')} exists and is not owned by this {owner_kind}; "
                f"it is left untouched: rename or delete it, or give the {owner_kind} another name",
            )
        )
    return problems


def foreign_claims(
    claims: Mapping[str, Mapping[str, Any] | None],
    labels: Mapping[str, str],
    stateful_set_uid: str | None,
    owner_kind: str = "StreamApp",
) -> list[Problem]:
    """State claims (``name -> claim``, None: absent) that the app's StatefulSet would mount but that are
    someone else's: without the app's selector ``labels`` (what its volumeClaimTemplate gives every claim it
    makes), or owned by anything but the app's StatefulSet (uid ``stateful_set_uid``). Never mounted (the pod
    would read and write another team's volume) nor deleted (``cleanupPolicy: Delete`` hands the claims the
    StatefulSet uses to the garbage collector)."""
    problems = []
    for name, claim in sorted(claims.items()):
        if claim is None:
            continue
        metadata = claim.get("metadata") or {}
        missing = sorted(key for key, value in labels.items() if (metadata.get("labels") or {}).get(key) != value)
        owners = [ref for ref in metadata.get("ownerReferences") or [] if ref.get("uid") != stateful_set_uid]
        if not missing and not owners:
            continue
        why = (
            f"lacks the labels {', '.join(f'{k}={labels[k]}' for k in missing)}"
            if missing
            else f"is owned by {owners[0].get('kind')} {owners[0].get('name')}"
        )
        problems.append(
            Problem(
                FOREIGN_OBJECT,
                f"PersistentVolumeClaim {name} exists and is not this {owner_kind}'s state volume (it {why}); it is "
                f"neither mounted nor deleted: rename or delete it, or give the {owner_kind} another name",
            )
        )
    return problems


def foreign_members(application_id: str, client_ids: Sequence[str], stateful_set: str) -> list[Problem]:
    """Members of the app's consumer group that are not stream threads of its own pods (client id
    ``<application.id>-<stateful_set>-<ordinal>-StreamThread-<n>-consumer``; any ordinal, so that a member of
    a pod just scaled away, which the broker keeps until its session times out, is still ours): joining
    would split the partitions with them."""
    pattern = re.compile(rf"{re.escape(application_id)}-{re.escape(stateful_set)}-\d+-StreamThread-\d+-consumer")
    strangers = sorted({c for c in client_ids if not pattern.fullmatch(c)})
    if not strangers:
        return []
    shown = ", ".join(strangers[:5]) + (f" and {len(strangers) - 5} more" if len(strangers) > 5 else "")
    return [
        Problem(
            CONSUMER_GROUP_IN_USE,
            f"consumer group {application_id!r} has members that are not this StreamApp's pods ({shown}); "
            "set a unique spec.applicationId or stop the other consumers",
        )
    ]


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
