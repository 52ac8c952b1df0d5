"""The ``streamapp`` command line.

- ``streamapp topology export module:fn [--format yaml|json]``: print the description that ``fn()`` returns
  (a StreamsBuilder or a TopologyDescription).
- ``streamapp topology describe FILE [--application-id X] [--partitions topic=N ...]``: print sub-topologies,
  nodes, topics, stores, internal topics and task ids. FILE is a topology description or a StreamApp
  manifest (its ``spec.topology`` is used).
- ``streamapp run --topology FILE|module:fn --config FILE [--set key=value ...]``: run the application until
  SIGTERM/SIGINT; the exit code is the runtime's. The working folder is importable; when ``http.port`` is left at
  its default and that port is taken (a second local app), the server takes a free port.
- ``streamapp reset --application-id ID (--bootstrap-server HOST:PORT | --config FILE) (--input-topics T,... |
  --topology FILE|module:fn) [--to-earliest | --to-datetime RFC3339 | --to-offsets topic:partition=offset,...]
  [--state-dir DIR] [--dry-run]``: Kafka's ``kafka-streams-application-reset`` for a stopped application
  (docs/reset.md): resets the group's committed offsets of the input topics, deletes the internal topics and,
  with ``--state-dir``, the local state ``<DIR>/<application.id>``.
- ``streamapp replay run --plan FILE [--master local[2]] [--driver-memory 1g]``: run a replay plan as a Spark
  batch job (extra ``streamapp-runtime[replay]``, docs/replay.md), report its progress on stderr and print what
  it read and wrote as JSON.

Errors in user input are printed as one ``Error: ...`` line with exit code 1 (click's ClickException).
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import shutil
import socket
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click
import yaml

from streamapp.dsl import StreamsBuilder
from streamapp.dsl.builder import with_default_serdes
from streamapp.kafka.reset_plan import ResetError, ResetTarget, ToEarliest, parse_datetime, parse_offsets, plan_reset
from streamapp.topology import TopologyDescription, TopologyError, resolve_function
from streamapp.topology.render import describe as describe_text

_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)


@click.group()
def main() -> None:
    """StreamApp: Kafka-Streams-style applications in Python."""


@main.group()
def topology() -> None:
    """Export and inspect topology descriptions."""


@topology.command()
@click.argument("function")
@click.option("--format", "fmt", type=click.Choice(["yaml", "json"]), default="yaml", show_default=True)
def export(function: str, fmt: str) -> None:
    """Print the topology description built by FUNCTION ('package.module:function')."""
    description = export_description(function)
    click.echo(description.to_yaml() if fmt == "yaml" else description.to_json(), nl=fmt == "json")


def export_description(function: str, config: Mapping[str, Any] | None = None) -> TopologyDescription:
    """Call ``function`` (a ``module:attr`` reference) and return its validated description (a StreamsBuilder is
    built with ``config``'s default serdes).

    The current directory is importable, as with ``python -m``. Raises ClickException on any failure.
    """
    _import_from_working_folder()
    try:
        build = resolve_function(function)
        _check_no_arguments(function, build)
        result = build()
        if isinstance(result, StreamsBuilder):
            result = result.build(config)
        if isinstance(result, TopologyDescription):
            result.check_exportable()  # e.g. a lambda: names the node and parameter
            return result
    except TopologyError as exc:
        raise click.ClickException(str(exc)) from exc
    raise click.ClickException(
        f"{function} returned {type(result).__name__}; expected a StreamsBuilder or a TopologyDescription"
    )


@topology.command()
@click.argument("file", type=_FILE)
@click.option("--application-id", help="Prefix of internal topic names (default: the manifest's, if any).")
@click.option(
    "--partitions",
    "partition_specs",
    multiple=True,
    metavar="TOPIC=N",
    help="Partition count of an external source topic; repeat for each source topic.",
)
def describe(file: Path, application_id: str | None, partition_specs: tuple[str, ...]) -> None:
    """Print the sub-topologies, stores, internal topics and tasks of the topology in FILE."""
    partitions = {topic: _positive_int(topic, count) for topic, count in _pairs("--partitions", partition_specs)}
    description, manifest_app_id = load_description(file)
    click.echo(describe_text(description, application_id or manifest_app_id, partitions), nl=False)


def load_description(file: Path, config: Mapping[str, Any] | None = None) -> tuple[TopologyDescription, str | None]:
    """Read a topology description, or a StreamApp manifest's ``spec.topology`` and application id. Serdes the
    document leaves out are ``config``'s ``default.key.serde`` / ``default.value.serde`` (default ``bytes``).

    Raises ClickException with the file name and the TopologyError message.
    """
    try:
        data: Any = yaml.safe_load(file.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise click.ClickException(f"{file}: cannot read YAML: {exc}") from exc
    application_id = None
    if isinstance(data, dict) and data.get("kind") == "StreamApp":
        spec = data.get("spec") or {}
        application_id = spec.get("applicationId") or (data.get("metadata") or {}).get("name")
        data = spec.get("topology")
    try:
        return TopologyDescription.from_dict(with_default_serdes(data, config or {})), application_id
    except TopologyError as exc:
        raise click.ClickException(f"{file}: {exc}") from exc


@main.command()
@click.option(
    "--topology",
    "topology_ref",
    required=True,
    metavar="FILE|MODULE:FUNCTION",
    help="Topology description (YAML/JSON), or a function returning a StreamsBuilder or a description.",
)
@click.option("--config", "config_file", required=True, type=_FILE, help="Streams config (YAML map).")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override one config key.")
def run(topology_ref: str, config_file: Path, overrides: tuple[str, ...]) -> None:
    """Run the topology of --topology with the config of --config until SIGTERM or SIGINT.

    The working folder is importable (for the topology's functions), as with ``python -m``.
    """
    _import_from_working_folder()
    topology_file = Path(topology_ref)
    if topology_file.is_file():
        load_description(topology_file)  # a broken topology fails first, whatever the config
    elif ":" not in topology_ref:
        raise click.BadParameter(f"'{topology_ref}' is neither a file nor 'module:function'", param_hint="--topology")
    settings = dict(_pairs("--set", overrides))
    # Imported here so the topology commands work without the processing runtime's dependencies.
    try:
        from streamapp.app import KafkaStreams
        from streamapp.config import ConfigError, StreamsConfig
    except ImportError as exc:
        raise click.ClickException(f"the processing runtime cannot be imported: {exc}") from exc

    try:
        config = StreamsConfig.load(config_file, settings)
    except ConfigError as exc:
        raise click.ClickException(f"{config_file}: {exc}") from exc
    defaults = config.to_mapping()  # default.key.serde, default.value.serde
    if topology_file.is_file():
        description, _ = load_description(topology_file, defaults)
    else:
        description = export_description(topology_ref, defaults)
    sys.exit(KafkaStreams(description, _with_a_free_http_port(config)).run())


def _with_a_free_http_port(config: Any) -> Any:
    """``config``, or, when it leaves ``http.port`` at its default and another process (a second local app)
    serves that port, ``config`` with port 0: the server takes a free port and logs which."""
    if "http_port" in config.model_fields_set:
        return config
    host = os.environ.get("STREAMAPP_HTTP_HOST") or "0.0.0.0"
    with socket.socket() as probe:
        try:
            probe.bind((host, config.http_port))
            return config
        except OSError:
            pass
    click.echo(
        f"Warning: port {config.http_port} (the default http.port) is in use; serving health, metrics and status "
        "on a free port (see the log line 'Serving ... on'). Set http.port to choose one.",
        err=True,
    )
    return config.model_copy(update={"http_port": 0})


def _import_from_working_folder() -> None:
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())


@main.command()
@click.option("--application-id", help="The application (and consumer group) to reset; default: the config's.")
@click.option("--bootstrap-server", "bootstrap", metavar="HOST:PORT", help="Kafka brokers; default: the config's.")
@click.option("--config", "config_file", type=_FILE, help="Streams config (YAML map): brokers, security, ids.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override one config key.")
@click.option("--input-topics", "input_topics", multiple=True, metavar="TOPIC[,TOPIC...]", help="Input topics.")
@click.option(
    "--topology",
    "topology_ref",
    metavar="FILE|MODULE:FUNCTION",
    help="Take the input topics from this topology's source nodes.",
)
@click.option("--to-earliest", is_flag=True, help="Reset to the earliest offsets (the default).")
@click.option("--to-datetime", metavar="RFC3339", help="Reset to the first offset at or after this time.")
@click.option("--to-offsets", metavar="TOPIC:PARTITION=OFFSET,...", help="Reset to these offsets (others: earliest).")
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Also delete the local state <DIR>/<application.id> (KafkaStreams.cleanUp()).",
)
@click.option("--dry-run", is_flag=True, help="Print the plan and change nothing.")
def reset(
    application_id: str | None,
    bootstrap: str | None,
    config_file: Path | None,
    overrides: tuple[str, ...],
    input_topics: tuple[str, ...],
    topology_ref: str | None,
    to_earliest: bool,
    to_datetime: str | None,
    to_offsets: str | None,
    state_dir: Path | None,
    dry_run: bool,
) -> None:
    """Reset a stopped application so it reprocesses its input (Kafka's kafka-streams-application-reset).

    Refuses while the consumer group has members. Resets the group's committed offsets of the input topics,
    deletes the application's repartition and changelog topics (and no other topic), and with --state-dir
    deletes its local state. --dry-run prints what it would do.
    """
    try:
        from streamapp.config import ConfigError, StreamsConfig
        from streamapp.kafka.admin import TopicAdmin
        from streamapp.kafka.clients import admin_config
        from streamapp.kafka.types import KafkaClientError
    except ImportError as exc:
        raise click.ClickException(f"the Kafka client cannot be imported: {exc}") from exc

    settings = dict(_pairs("--set", overrides))
    settings.update({k: v for k, v in (("application.id", application_id), ("bootstrap.servers", bootstrap)) if v})
    try:
        config = StreamsConfig.load(config_file, settings)
    except ConfigError as exc:
        raise click.ClickException(
            f"{config_file or 'options'}: {exc} (give --application-id and --bootstrap-server, or --config)"
        ) from exc
    try:
        target = _reset_target(to_earliest, to_datetime, to_offsets)
    except ResetError as exc:
        raise click.ClickException(str(exc)) from exc
    topics = [t.strip() for spec in input_topics for t in spec.split(",") if t.strip()]
    if topology_ref is not None:
        topics += _input_topics_of(topology_ref, config.to_mapping())
    admin = TopicAdmin(admin_config(config))
    try:
        group = admin.describe_group(config.application_id)
        plan = plan_reset(
            config.application_id,
            topics,
            target,
            topics=admin.all_partition_counts(),
            members=[member.client_id for member in group.members],
            state_dir=state_dir,
        )
        click.echo(plan.describe(), nl=False)
        if dry_run:
            click.echo("Dry run: nothing changed.")
            return
        offsets = admin.execute_reset(plan)
    except (ResetError, KafkaClientError) as exc:
        raise click.ClickException(str(exc)) from exc
    if plan.state_dir is not None and plan.state_dir.exists():
        shutil.rmtree(plan.state_dir)
    click.echo(
        f"Done: committed {len(offsets)} offset(s), deleted {len(plan.internal_topics)} internal topic(s)"
        + (f" and {plan.state_dir}" if plan.state_dir is not None else "")
        + "."
    )


def _reset_target(to_earliest: bool, to_datetime: str | None, to_offsets: str | None) -> ResetTarget:
    """The one target the options name (``ToEarliest`` when none); ResetError for more than one."""
    given = [
        name
        for name, value in (
            ("--to-earliest", to_earliest),
            ("--to-datetime", to_datetime),
            ("--to-offsets", to_offsets),
        )
        if value
    ]
    if len(given) > 1:
        raise ResetError(f"give one of {', '.join(given)}, not several")
    if to_datetime:
        return parse_datetime(to_datetime)
    if to_offsets:
        return parse_offsets(to_offsets)
    return ToEarliest()


def _input_topics_of(topology_ref: str, defaults: Mapping[str, Any]) -> list[str]:
    """The topics the group consumes: those of the source nodes (not global tables, which have no offsets)."""
    _import_from_working_folder()
    if Path(topology_ref).is_file():
        description, _ = load_description(Path(topology_ref), defaults)
    elif ":" in topology_ref:
        description = export_description(topology_ref, defaults)
    else:
        raise click.BadParameter(f"'{topology_ref}' is neither a file nor 'module:function'", param_hint="--topology")
    return [ref.name for sub in description.subtopologies() for ref in sub.source_topics if not ref.internal]


@main.group()
def replay() -> None:
    """Reprocess history as a Spark batch job (extra streamapp-runtime[replay])."""


@replay.command("run")
@click.option("--plan", "plan_file", required=True, type=_FILE, help="Replay plan (YAML/JSON, docs/replay.md).")
@click.option("--master", default="local[2]", show_default=True, help="Spark master.")
@click.option("--driver-memory", default="1g", show_default=True)
@click.option("--chunk-records", default=10_000, show_default=True, help="Records per output transaction.")
@click.option(
    "--parallelism",
    type=click.IntRange(min=1),
    help="Spark tasks at once: topics with fewer partitions are read in as many offset ranges, shuffles have twice "
    "as many partitions [default: the cores of the Spark master or its executors]",
)
def replay_run(plan_file: Path, master: str, driver_memory: str, chunk_records: int, parallelism: int | None) -> None:
    """Run the replay PLAN describes and print its result (records read and written, seconds) as JSON.

    While Spark computes, every report of ``streamapp.replay.progress`` goes to stderr as one line
    ``replay-progress {json}`` (what the operator reads from the Job's log); the result is stdout's last line.
    """
    import json

    try:
        from streamapp.replay import ReplayPlan, build_session, run_replay
        from streamapp.replay.progress import PROGRESS_PREFIX, ReplayProgress
    except ImportError as exc:
        raise click.ClickException(f"the replay needs the extra streamapp-runtime[replay]: {exc}") from exc
    try:
        plan = ReplayPlan.from_document(yaml.safe_load(plan_file.read_text())).check()
    except (TopologyError, ValueError, KeyError, TypeError) as exc:
        raise click.ClickException(f"{plan_file}: {exc}") from exc

    def report(progress: ReplayProgress) -> None:
        click.echo(PROGRESS_PREFIX + progress.to_json(), err=True)

    session = build_session(master, driver_memory=driver_memory)
    result = run_replay(session, plan, chunk_records=chunk_records, on_progress=report, parallelism=parallelism)
    click.echo(json.dumps(dataclasses.asdict(result), sort_keys=True))


def _check_no_arguments(function: str, build: Any) -> None:
    try:
        inspect.signature(build).bind()
    except TypeError as exc:
        raise click.ClickException(f"{function} cannot be called without arguments ({exc})") from exc
    except ValueError:  # no signature available (some builtins): let the call decide
        pass


def _pairs(option: str, specs: tuple[str, ...]) -> list[tuple[str, str]]:
    pairs = []
    for spec in specs:
        key, sep, value = spec.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"'{spec}' is not KEY=VALUE", param_hint=option)
        pairs.append((key, value))
    return pairs


def _positive_int(topic: str, text: str) -> int:
    try:
        count = int(text)
    except ValueError:
        count = 0
    if count < 1:
        raise click.BadParameter(
            f"partition count of '{topic}' must be a positive integer, got '{text}'", param_hint="--partitions"
        )
    return count
