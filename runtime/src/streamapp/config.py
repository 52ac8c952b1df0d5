"""StreamsConfig: the runtime configuration, in Kafka Streams' key names and defaults.

A config file is a YAML map of dotted Kafka Streams keys (``application.id``, ``num.stream.threads``, ...).
Keys starting with ``consumer.`` or ``producer.`` are passed, without the prefix, to librdkafka's consumer
or producer (``consumer.fetch.max.bytes: 1048576``); those are not validated here: librdkafka rejects an
unknown one when a client is created, and ``streamapp.kafka.config_check`` creates throwaway clients before the
application starts so every such key is named at once; the classic group protocol's ``consumer.session.timeout.ms``,
``heartbeat.interval.ms``, ``partition.assignment.strategy`` and ``group.protocol.type`` are refused here under
``group.protocol=consumer`` (KIP-848 leaves them to the broker). ``schema.registry.*`` keys go, without that
prefix, to Confluent's Schema Registry client (``schema.registry.url`` -> ``url``,
``schema.registry.basic.auth.user.info``, ...; docs/serdes.md). Any other unknown key is an error, so a typo
never passes silently.

Security (SASL and TLS): librdkafka's ``security.protocol``, ``sasl.*`` and ``ssl.*`` keys at the top level apply
to every Kafka client of the application (group, restore and global consumers, producer, admin), as Kafka Streams
passes its top-level client settings to all its clients; a ``consumer.*`` or ``producer.*`` key of the same name
overrides it for that client. ``StreamsConfig.load`` also reads them from the environment, which overrides the
file (``SECURITY_ENV``): ``STREAMAPP_KAFKA_<KEY>`` with the key upper-cased and dots as underscores
(``STREAMAPP_KAFKA_SASL_PASSWORD`` -> ``sasl.password``), or ``STREAMAPP_KAFKA_<KEY>_FILE`` naming a file that holds
the value (a mounted Secret; one trailing newline is dropped) for ``SECRET_KEYS``. docs/execution.md "Kafka
security".

Keys and defaults (Kafka Streams' unless marked *streamapp*):

=======================================  ==================  ========================================================
key                                      default             meaning
=======================================  ==================  ========================================================
application.id                           required            consumer group id, internal-topic and state prefix
bootstrap.servers                        required            Kafka brokers, ``host:port[,host:port]``
num.stream.threads                       1                   stream threads (worker processes) per instance
processing.guarantee                     at_least_once       or ``exactly_once_v2``: one transactional producer per
                                                             thread, offsets in the transaction, ``read_committed``
commit.interval.ms                       30000 / 100 (EOS)   how often a stream thread commits (Kafka's defaults:
                                                             100 under ``exactly_once_v2`` unless set)
repartition.purge.interval.ms            30000               how often a stream thread deletes the records of its
                                                             repartition topics' partitions before their committed
                                                             offsets (``Admin.deleteRecords``; same default under
                                                             ``exactly_once_v2``; docs/execution.md)
poll.ms                                  100                 longest a poll blocks
max.poll.records                         1000                records a stream thread takes per poll
buffered.records.per.partition           1000                records a task buffers per input partition; the
                                                             partition is paused above it
max.task.idle.ms                         0                   how long a task with several input partitions waits
                                                             for an empty partition with no lag before it processes
                                                             the others (-1: never wait; Kafka's PartitionGroup)
state.dir                                /tmp/streamapp      ``<state.dir>/<application.id>/<taskId>/``
state.cleanup.delay.ms                   600000              age of the state of a task no longer owned here
                                                             (neither active nor standby) before it is deleted
num.standby.replicas                     0                   warm copies of each stateful task's stores on other
                                                             stream threads (docs/adr/0004-standby-replicas.md)
statestore.cache.max.bytes               10485760            per-thread record cache (KIP-63, docs/record-cache.md)
                                                             and bound on buffered store writes: a thread
                                                             commits early when they reach it; 0 = cache off
                                                             (writes then commit early at 10 MiB;
                                                             docs/adr/0008-record-cache-default.md)
default.deserialization.exception.\
handler                                  log_and_fail        ``log_and_fail``, ``log_and_continue`` or
                                                             ``dead_letter_queue`` (a record that cannot be read)
default.production.exception.handler     fail                ``fail``, ``continue`` or ``dead_letter_queue`` (a
                                                             record that cannot be serialized or sent)
processing.exception.handler             log_and_fail        ``log_and_fail``, ``log_and_continue`` or
                                                             ``dead_letter_queue`` (a processor raised; KIP-1033)
errors.dead.letter.queue.topic.name      none                the dead-letter topic (KIP-1034); it must exist. When
                                                             set, every handler also copies the failed record there
replication.factor                       -1                  internal topics; -1 = the broker's default
group.protocol                           consumer            *streamapp*: ``consumer`` (KIP-848, broker-side
                                                             ``range`` assignor) or ``classic`` (eager
                                                             ``range``); docs/adr/0001-assignment.md
http.port                                8080                *streamapp*: health, metrics, status and query port
application.server                       none                ``host:port`` where other instances reach this
                                                             one's HTTP server for interactive queries; also
                                                             ``STREAMAPP_APPLICATION_SERVER`` (docs/interactive-
                                                             queries.md, docs/adr/0012-query-endpoints.md)
metrics.recording.level                  INFO                which Kafka Streams metrics are recorded: ``INFO``,
                                                             ``DEBUG`` (adds per-node, per-task and state-store
                                                             metrics) or ``TRACE`` (adds store e2e latency);
                                                             docs/metrics.md
rocksdb.block.cache.bytes                67108864            *streamapp*: one block cache per thread shared by
                                                             all its stores; memtables are charged to it
rocksdb.write.buffer.bytes               16777216            *streamapp*: memtable budget per thread (part of
                                                             the block cache)
default.key.serde                        bytes               the key serde of a source, table, global table, sink,
                                                             repartition or store that names none (docs/serdes.md)
default.value.serde                      bytes               the same for values (Kafka's default is none: a
                                                             topology without serdes fails there)
auto.register.schemas                    true                Avro/Protobuf serdes register their schema (Confluent)
use.latest.version                       false               serialize with the subject's latest schema (Confluent)
=======================================  ==================  ========================================================

Memory bounds the runtime sets on librdkafka (*streamapp* defaults, librdkafka's in brackets; a ``consumer.*`` or
``producer.*`` key overrides each; ``streamapp.kafka.clients``, docs/execution.md "Memory"):
``consumer.max.partition.fetch.bytes`` 262144 [1048576], ``consumer.queued.max.messages.kbytes`` 32768 [65536]
(group consumer; the restore consumer keeps librdkafka's); ``producer.queue.buffering.max.kbytes`` 32768
[1048576], like Java's ``buffer.memory``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from streamapp.serdes import SERDE_NAMES, is_serde_name, registry_serde_name

__all__ = [
    "APPLICATION_SERVER_ENV",
    "AT_LEAST_ONCE",
    "DEFAULT_SERDE",
    "EXACTLY_ONCE_V2",
    "SECRET_KEYS",
    "SECURITY_ENV",
    "ConfigError",
    "StreamsConfig",
]

AT_LEAST_ONCE: Final = "at_least_once"
DEFAULT_SERDE: Final = "bytes"
"""``default.key.serde`` and ``default.value.serde`` when the config names none."""
EXACTLY_ONCE_V2: Final = "exactly_once_v2"
_EOS_COMMIT_INTERVAL_MS = 100
_ALOS_COMMIT_INTERVAL_MS = 30_000

_CLIENT_PREFIXES = ("consumer.", "producer.", "schema.registry.")
#: librdkafka consumer keys of the classic group protocol only (refused with ``group.protocol=consumer``).
_CLASSIC_ONLY_CONSUMER_KEYS = frozenset(
    {"session.timeout.ms", "heartbeat.interval.ms", "partition.assignment.strategy", "group.protocol.type"}
)
_SECURITY_PREFIXES = ("security.", "sasl.", "ssl.")
"""librdkafka's security keys: at the top level they go to every Kafka client."""
SECRET_KEYS: Final = ("sasl.username", "sasl.password", "ssl.key.password")
"""Security keys that may also come from a file named by ``STREAMAPP_KAFKA_<KEY>_FILE``."""
APPLICATION_SERVER_ENV: Final = "STREAMAPP_APPLICATION_SERVER"
"""The environment variable ``StreamsConfig.load`` reads ``application.server`` from (over the file)."""

SECURITY_ENV: Final[Mapping[str, str]] = {
    f"STREAMAPP_KAFKA_{key.upper().replace('.', '_')}": key
    for key in (
        "security.protocol",
        "sasl.mechanism",
        *SECRET_KEYS,
        "ssl.ca.location",
        "ssl.certificate.location",
        "ssl.key.location",
    )
}
"""Environment variables ``StreamsConfig.load`` reads (overriding the config file) -> the key each sets."""


class ConfigError(ValueError):
    """A configuration file or override is invalid; the message names the key and the problem."""


class StreamsConfig(BaseModel):
    """The validated runtime configuration; attribute names are the dotted keys in snake_case."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid", frozen=True)

    application_id: str = Field(alias="application.id", min_length=1, pattern=r"^[a-zA-Z0-9._-]+$")
    bootstrap_servers: str = Field(alias="bootstrap.servers", min_length=1)
    num_stream_threads: int = Field(1, alias="num.stream.threads", ge=1, le=64)
    processing_guarantee: Literal["at_least_once", "exactly_once_v2"] = Field(
        AT_LEAST_ONCE, alias="processing.guarantee"
    )
    commit_interval_ms: int = Field(_ALOS_COMMIT_INTERVAL_MS, alias="commit.interval.ms", ge=0)
    repartition_purge_interval_ms: int = Field(30_000, alias="repartition.purge.interval.ms", ge=0)
    poll_ms: int = Field(100, alias="poll.ms", ge=0)
    max_poll_records: int = Field(1000, alias="max.poll.records", ge=1)
    buffered_records_per_partition: int = Field(1000, alias="buffered.records.per.partition", ge=1)
    max_task_idle_ms: int = Field(0, alias="max.task.idle.ms", ge=-1)
    state_dir: str = Field("/tmp/streamapp", alias="state.dir", min_length=1)
    state_cleanup_delay_ms: int = Field(600_000, alias="state.cleanup.delay.ms", ge=0)
    num_standby_replicas: int = Field(0, alias="num.standby.replicas", ge=0)
    statestore_cache_max_bytes: int = Field(10 * 1024 * 1024, alias="statestore.cache.max.bytes", ge=0)
    default_deserialization_exception_handler: Literal["log_and_fail", "log_and_continue", "dead_letter_queue"] = Field(
        "log_and_fail", alias="default.deserialization.exception.handler"
    )
    default_production_exception_handler: Literal["fail", "continue", "dead_letter_queue"] = Field(
        "fail", alias="default.production.exception.handler"
    )
    processing_exception_handler: Literal["log_and_fail", "log_and_continue", "dead_letter_queue"] = Field(
        "log_and_fail", alias="processing.exception.handler"
    )
    errors_dead_letter_queue_topic_name: str | None = Field(
        None, alias="errors.dead.letter.queue.topic.name", min_length=1
    )
    replication_factor: int = Field(-1, alias="replication.factor")
    group_protocol: Literal["consumer", "classic"] = Field("consumer", alias="group.protocol")
    http_port: int = Field(8080, alias="http.port", ge=0, le=65535)
    metrics_recording_level: Literal["INFO", "DEBUG", "TRACE"] = Field("INFO", alias="metrics.recording.level")
    application_server: str | None = Field(None, alias="application.server", pattern=r"^[^\s@:]+:\d{1,5}$")
    rocksdb_block_cache_bytes: int = Field(64 * 1024 * 1024, alias="rocksdb.block.cache.bytes", ge=1 << 20)
    rocksdb_write_buffer_bytes: int = Field(16 * 1024 * 1024, alias="rocksdb.write.buffer.bytes", ge=1 << 20)
    consumer: dict[str, str] = Field(default_factory=dict)
    """librdkafka consumer settings from ``consumer.*`` keys (prefix removed)."""
    producer: dict[str, str] = Field(default_factory=dict)
    """librdkafka producer settings from ``producer.*`` keys (prefix removed)."""
    schema_registry: dict[str, str] = Field(default_factory=dict)
    """Schema Registry client settings from ``schema.registry.*`` keys (``url``, ``basic.auth.user.info``, ...)."""
    auto_register_schemas: bool = Field(True, alias="auto.register.schemas")
    use_latest_version: bool = Field(False, alias="use.latest.version")
    default_key_serde: str = Field(DEFAULT_SERDE, alias="default.key.serde", min_length=1)
    default_value_serde: str = Field(DEFAULT_SERDE, alias="default.value.serde", min_length=1)

    @field_validator("default_key_serde", "default_value_serde")
    @classmethod
    def _known_serde(cls, value: str) -> str:
        if value not in SERDE_NAMES and not is_serde_name(value):
            registry_serde_name(value)  # a malformed avro:/protobuf: name raises its own SerdeError (a ValueError)
            raise ValueError(f"unknown serde '{value}'; known serdes: {', '.join(SERDE_NAMES)}, see docs/serdes.md")
        return value

    @model_validator(mode="before")
    @classmethod
    def _guarantee_defaults(cls, values: Any) -> Any:
        """``commit.interval.ms`` defaults to 100 under ``exactly_once_v2`` (Kafka Streams' rule)."""
        if isinstance(values, dict) and "commit.interval.ms" not in values and "commit_interval_ms" not in values:
            guarantee = values.get("processing.guarantee", values.get("processing_guarantee"))
            if guarantee == EXACTLY_ONCE_V2:
                return {**values, "commit.interval.ms": _EOS_COMMIT_INTERVAL_MS}
        return values

    @model_validator(mode="after")
    def _dead_letter_queue_needs_a_topic(self) -> StreamsConfig:
        handlers = {
            "default.deserialization.exception.handler": self.default_deserialization_exception_handler,
            "default.production.exception.handler": self.default_production_exception_handler,
            "processing.exception.handler": self.processing_exception_handler,
        }
        for key, handler in handlers.items():
            if handler == "dead_letter_queue" and self.errors_dead_letter_queue_topic_name is None:
                raise ValueError(f"{key}=dead_letter_queue needs errors.dead.letter.queue.topic.name")
        return self

    @model_validator(mode="after")
    def _group_protocol_settings(self) -> StreamsConfig:
        """Under ``group.protocol=consumer`` (KIP-848) the broker owns the session timeout, heartbeat interval and
        assignor: librdkafka refuses these keys only when a pod creates its consumer; say it here instead."""
        if self.group_protocol == "consumer":
            for key in sorted(set(self.consumer) & _CLASSIC_ONLY_CONSUMER_KEYS):
                raise ValueError(
                    f"consumer.{key} is not supported under group.protocol=consumer (KIP-848: the broker decides it, "
                    f"e.g. group.consumer.session.timeout.ms); set group.protocol: classic to use it"
                )
        return self

    @property
    def exactly_once(self) -> bool:
        """True under ``processing.guarantee=exactly_once_v2``."""
        return self.processing_guarantee == EXACTLY_ONCE_V2

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> StreamsConfig:
        """Validate a flat map of dotted keys (file contents plus overrides).

        Raises ConfigError naming every invalid or unknown key.
        """
        settings: dict[str, Any] = {}
        clients: dict[str, dict[str, str]] = {"consumer": {}, "producer": {}, "schema_registry": {}}
        security: dict[str, str] = {}
        for key, value in values.items():
            prefix = next((p for p in _CLIENT_PREFIXES if str(key).startswith(p)), None)
            if prefix is not None:
                clients[prefix[:-1].replace(".", "_")][str(key)[len(prefix) :]] = _client_value(value)
            elif str(key).startswith(_SECURITY_PREFIXES):
                security[str(key)] = _client_value(value)
            elif key in ("consumer", "producer"):
                raise ConfigError(f"config key '{key}': use '{key}.<librdkafka key>' keys instead of a map")
            else:
                settings[str(key)] = value
        for client in ("consumer", "producer"):  # a client's own key wins over the shared one
            clients[client] = {**security, **clients[client]}
        try:
            return cls.model_validate({**settings, **clients})
        except ValidationError as exc:
            problems = "; ".join(_describe(error) for error in exc.errors())
            raise ConfigError(f"invalid streams config: {problems}") from None

    @classmethod
    def load(
        cls,
        path: str | Path | None,
        overrides: Mapping[str, str] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> StreamsConfig:
        """Read a YAML config file (or none), apply ``--set key=value`` overrides on top, then the security
        settings of ``environ`` (default ``os.environ``; ``SECURITY_ENV``, module docstring) and its
        ``STREAMAPP_APPLICATION_SERVER`` (``application.server``).

        Raises ConfigError when the file is missing, is not a YAML map, has invalid keys, or a ``*_FILE``
        variable names a file that cannot be read.
        """
        values: dict[str, Any] = {}
        if path is not None:
            try:
                loaded = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
            except OSError as exc:
                raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
            except yaml.YAMLError as exc:
                raise ConfigError(f"config file {path} is not valid YAML: {exc}") from None
            if loaded is None:
                loaded = {}
            if not isinstance(loaded, dict):
                raise ConfigError(f"config file {path} must be a YAML map of keys to values")
            values.update(loaded)
        values.update(overrides or {})
        environ = os.environ if environ is None else environ
        values.update(security_from_environment(environ))
        if environ.get(APPLICATION_SERVER_ENV):  # each pod's own address (the operator sets it from its pod IP)
            values["application.server"] = environ[APPLICATION_SERVER_ENV]
        return cls.from_mapping(values)

    @property
    def application_state_dir(self) -> Path:
        """``<state.dir>/<application.id>``: the parent of every task directory."""
        return Path(self.state_dir) / self.application_id

    def to_mapping(self) -> dict[str, Any]:
        """The flat dotted-key form; ``StreamsConfig.from_mapping(c.to_mapping()) == c``."""
        flat: dict[str, Any] = self.model_dump(by_alias=True, exclude={"consumer", "producer", "schema_registry"})
        for client in ("consumer", "producer", "schema_registry"):
            for key, value in getattr(self, client).items():
                flat[f"{client.replace('_', '.')}.{key}"] = value
        return flat


def security_from_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The security keys set by ``SECURITY_ENV`` variables in ``environ`` (a ``*_FILE`` variable's file content,
    without one trailing newline, for ``SECRET_KEYS``; the plain variable wins over its ``_FILE`` form).

    Raises ConfigError naming the variable (never the value) when a ``*_FILE`` cannot be read."""
    found: dict[str, str] = {}
    for name, key in SECURITY_ENV.items():
        file_name = f"{name}_FILE"
        if name in environ:
            found[key] = environ[name]
        elif key in SECRET_KEYS and environ.get(file_name):
            try:
                text = Path(environ[file_name]).read_text(encoding="utf-8")
            except OSError as exc:
                raise ConfigError(f"{file_name}: cannot read {environ[file_name]}: {exc.strerror}") from None
            found[key] = text.removesuffix("\n")
    return found


def _client_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _describe(error: Any) -> str:
    location = ".".join(str(part) for part in error["loc"]) or "config"
    if error["type"] == "extra_forbidden":
        return f"unknown key '{location}'"
    if error["type"] == "missing":
        return f"'{location}' is required"
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"'{location}': {message}"
