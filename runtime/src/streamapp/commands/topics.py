"""``streamapp topics create`` and ``streamapp topics tail``: an application's external topics without Kafka's
shell tools.

- ``create`` makes the topology's source, global-table and sink topics (and the config's dead-letter topic) that
  do not exist yet; an application never creates them itself. Existing topics are left as they are.
- ``tail`` prints a topic's records decoded with the serdes the topology declares for it (its sink node's, else
  its source node's ``keySerde`` / ``valueSerde``; windowed keys print as ``[key@start/end]``), one line each.

The pure parts (``topics_to_create``, ``topic_serdes``, ``record_line``) decide; ``TopicAdmin`` and
``read_topic`` act.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from streamapp.commands.topologies import config_values, load_topology
from streamapp.config import ConfigError, StreamsConfig, security_from_environment
from streamapp.kafka.admin import TopicAdmin, TopicSpec
from streamapp.kafka.clients import admin_config
from streamapp.kafka.schema_registry import configure_registry_serdes
from streamapp.kafka.topic_reader import read_topic
from streamapp.kafka.types import ConsumerRecord, KafkaClientError
from streamapp.serdes import Serde, SerdeError, serde_for
from streamapp.topology import GlobalTableNode, SinkNode, SourceNode, TopologyDescription, TopologyError
from streamapp.windowed import Windowed

__all__ = ["record_line", "topic_serdes", "topics", "topics_to_create"]

_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)


@click.group()
def topics() -> None:
    """Create and read an application's external topics."""


def _connection_options(command: Any) -> Any:
    for option in reversed(
        [
            click.option("--topology", "topology_ref", required=True, metavar="FILE|MODULE:FUNCTION"),
            click.option("--bootstrap-server", "bootstrap", metavar="HOST:PORT", help="Kafka brokers."),
            click.option("--config", "config_file", type=_FILE, help="Streams config (YAML): brokers, security."),
            click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override one config key."),
        ]
    ):
        command = option(command)
    return command


@topics.command("create")
@_connection_options
@click.option("--partitions", default=1, show_default=True, type=click.IntRange(min=1), help="Of each new topic.")
@click.option("--retention-ms", type=click.IntRange(min=-1), help="retention.ms of each new topic (-1: forever).")
@click.option("--replication-factor", default=-1, show_default=True, help="-1: the broker's default.")
def create(
    topology_ref: str,
    bootstrap: str | None,
    config_file: Path | None,
    overrides: tuple[str, ...],
    partitions: int,
    retention_ms: int | None,
    replication_factor: int,
) -> None:
    """Create the topology's external topics that do not exist (sources, global tables, sinks, the dead-letter
    topic). Idempotent: existing topics are left as they are. Prints what it created and what existed."""
    config = _streams_config(bootstrap, config_file, overrides)
    description = load_topology(topology_ref, config.to_mapping())
    admin = TopicAdmin(admin_config(config))
    wanted = _external_topics(description, config)
    try:
        existing = admin.partition_counts(wanted)
        specs = topics_to_create(wanted, existing, partitions, retention_ms)
        created = admin.ensure_topics(specs, replication_factor)
    except KafkaClientError as exc:
        raise click.ClickException(str(exc)) from exc
    for spec in specs:
        if spec.name in created:
            settings = "".join(f", {key}={value}" for key, value in spec.config.items())
            click.echo(f"Created topic {spec.name} ({spec.partitions} partitions{settings})")
    for name in wanted:
        if name in existing:
            click.echo(f"Exists: {name} ({existing[name]} partitions)")


@topics.command("tail")
@click.argument("topic")
@_connection_options
@click.option("--from-beginning", is_flag=True, help="Start at the earliest offset (default: new records only).")
@click.option("--max-records", type=click.IntRange(min=1), help="Stop after this many records.")
@click.option("--timeout-ms", type=click.IntRange(min=0), help="Stop when no record arrived for this long.")
def tail(
    topic: str,
    topology_ref: str,
    bootstrap: str | None,
    config_file: Path | None,
    overrides: tuple[str, ...],
    from_beginning: bool,
    max_records: int | None,
    timeout_ms: int | None,
) -> None:
    """Print TOPIC's records decoded with the serdes the topology declares for it, one line each:
    key, value, timestamp (epoch ms), partition and offset. Runs until Ctrl-C, --max-records or --timeout-ms."""
    config = _streams_config(bootstrap, config_file, overrides)
    description = load_topology(topology_ref, config.to_mapping())
    try:
        configure_registry_serdes(config, description)  # avro / protobuf serdes, when the topology has any
        key_name, value_name = topic_serdes(description, topic)
        key_serde, value_serde = serde_for(key_name, topic, is_key=True), serde_for(value_name, topic)
        settings = {key: value for key, value in config.consumer.items() if not key.startswith("group.")}
        records = read_topic(
            {**settings, "bootstrap.servers": config.bootstrap_servers},
            topic,
            from_beginning=from_beginning,
            max_records=max_records,
            idle_timeout_s=timeout_ms / 1000 if timeout_ms is not None else None,
        )
        for record in records:
            click.echo(record_line(record, key_serde, value_serde))
    except (TopologyError, SerdeError, KafkaClientError) as exc:
        raise click.ClickException(str(exc)) from exc


def topics_to_create(
    wanted: list[str], existing: Mapping[str, int], partitions: int, retention_ms: int | None
) -> list[TopicSpec]:
    """The topics of ``wanted`` missing from ``existing`` (name -> partition count), in order, with ``partitions``
    partitions and ``retention.ms`` when given."""
    config = {"retention.ms": str(retention_ms)} if retention_ms is not None else {}
    return [TopicSpec(name, partitions, config) for name in wanted if name not in existing]


def topic_serdes(description: TopologyDescription, topic: str) -> tuple[str, str]:
    """``(keySerde, valueSerde)`` of ``topic``: those of the first sink node writing it, else of the first source,
    table or global table node reading it. Raises TopologyError when no node names the topic."""
    for node in description.nodes:
        if isinstance(node, SinkNode) and node.topic == topic:
            return node.key_serde, node.value_serde
    for node in description.nodes:
        if (isinstance(node, SourceNode) and topic in node.topics) or (
            isinstance(node, GlobalTableNode) and node.topic == topic
        ):
            return node.key_serde, node.value_serde
    known = description.external_source_topics() + description.sink_topics()
    raise TopologyError(f"topic {topic} is not a source or sink topic of the topology; its topics: {', '.join(known)}")


def record_line(record: ConsumerRecord, key_serde: Serde, value_serde: Serde) -> str:
    """``key=<k> value=<v> timestamp=<ms> partition=<p> offset=<o>``; keys and values as JSON (strings quoted),
    windowed keys as ``[key@start/end]``, bytes as Python literals. Raises SerdeError for bytes a serde cannot read."""
    key = _shown(key_serde.deserialize(record.key))
    value = _shown(value_serde.deserialize(record.value))
    return f"key={key} value={value} timestamp={record.timestamp} partition={record.partition} offset={record.offset}"


def _shown(data: Any) -> str:
    if isinstance(data, Windowed):
        return f"[{_shown(data.key)}@{data.start}/{data.end}]"
    if isinstance(data, bytes):
        return repr(data)
    return json.dumps(data, default=str, ensure_ascii=False)


def _external_topics(description: TopologyDescription, config: StreamsConfig) -> list[str]:
    names = description.external_source_topics() + description.sink_topics()
    if config.errors_dead_letter_queue_topic_name:
        names.append(config.errors_dead_letter_queue_topic_name)
    return list(dict.fromkeys(names))


def _streams_config(bootstrap: str | None, config_file: Path | None, overrides: tuple[str, ...]) -> StreamsConfig:
    """The connection settings: ``--config``'s file, ``--set`` and ``--bootstrap-server`` on top, the security
    environment (``StreamsConfig.load``); ``application.id`` is not needed here."""
    values: dict[str, Any] = {"application.id": "streamapp-topics", **config_values(config_file, overrides)}
    if bootstrap:
        values["bootstrap.servers"] = bootstrap
    if "bootstrap.servers" not in values:
        raise click.UsageError("give --bootstrap-server HOST:PORT, or --config with bootstrap.servers")
    try:
        return StreamsConfig.from_mapping({**values, **security_from_environment(os.environ)})
    except ConfigError as exc:
        raise click.ClickException(f"{config_file or 'options'}: {exc}") from exc
