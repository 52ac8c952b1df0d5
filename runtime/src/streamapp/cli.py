"""The ``streamapp`` command line.

- ``streamapp topology export module:fn [--format yaml|json]``: print the description that ``fn()`` returns
  (a StreamsBuilder or a TopologyDescription).
- ``streamapp topology describe FILE [--application-id X] [--partitions topic=N ...]``: print sub-topologies,
  nodes, topics, stores, internal topics and task ids. FILE is a topology description or a StreamApp
  manifest (its ``spec.topology`` is used).
- ``streamapp run --topology FILE|module:fn --config FILE [--set key=value ...]``: run the application until
  SIGTERM/SIGINT; the exit code is the runtime's. The working folder is importable; when ``http.port`` is left at
  its default and that port is taken (a second local app), the server takes a free port. Before anything starts,
  every problem of the topology (unexportable functions, references that do not import) and of the config
  (librdkafka keys included) is listed in one error (``streamapp.commands.preflight``).
- ``streamapp reset --application-id ID (--bootstrap-server HOST:PORT | --config FILE) (--input-topics T,... |
  --topology FILE|module:fn) [--to-earliest | --to-datetime RFC3339 | --to-offsets topic:partition=offset,...]
  [--state-dir DIR] [--dry-run]``: Kafka's ``kafka-streams-application-reset`` for a stopped application
  (docs/reset.md): resets the group's committed offsets of the input topics, deletes the internal topics and,
  with ``--state-dir``, the local state ``<DIR>/<application.id>``.
- ``streamapp manifest --topology FILE|module:fn --name NAME --image IMAGE [--replicas N --threads N
  --bootstrap-servers ... --config FILE --set key=value --application-id ID --image-pull-policy P --state-size Q]``:
  print the StreamApp manifest (``streamapp.commands.manifest``); with ``--replay NAME --mode backfill|handover
  [--image IMAGE --handover-image IMAGE --handover-replicas N --outputs New|TakeOver --spark-image IMAGE]`` a
  StreamReplay instead.
- ``streamapp topics create --topology FILE|module:fn (--bootstrap-server HOST:PORT | --config FILE) [--partitions N]
  [--retention-ms MS]``: create the topology's missing external topics; ``streamapp topics tail TOPIC --topology
  ... [--from-beginning] [--max-records N] [--timeout-ms MS]``: print its records decoded with the topology's
  serdes (``streamapp.commands.topics``).
- ``streamapp image build PACKAGE --tag TAG [--base IMAGE] [--find-links DIR ...]``: build the app image of a
  wheel or a project folder ``FROM`` the StreamApp image with podman, its requirements checked against the base
  image's first (``streamapp.commands.image``).
- ``streamapp query STORE [--url URL] (--key K | --from A --to B) [--time-from MS --time-to MS] [--partitions
  0,1] [--require-active] [--position-bound JSON] [--metadata]``: an interactive query (IQv2) against a running
  application's HTTP server, answered for the whole application (``streamapp.commands.query``,
  docs/interactive-queries.md).
- ``streamapp replay run --plan FILE [--master local[2]] [--driver-memory 1g]``: run a replay plan as a Spark
  batch job (extra ``streamapp-runtime[replay]``, docs/replay.md), report its progress on stderr and print what
  it read and wrote as JSON.

Errors in user input are printed as one ``Error: ...`` line with exit code 1 (click's ClickException).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import socket
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click
import yaml

from streamapp.commands.image import image
from streamapp.commands.manifest import manifest
from streamapp.commands.query import query
from streamapp.commands.topics import topics
from streamapp.commands.topologies import export_description, load_description, load_topology, pairs
from streamapp.kafka.reset_plan import ResetError, ResetTarget, ToEarliest, parse_datetime, parse_offsets, plan_reset
from streamapp.topology import TopologyError
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
    partitions = {topic: _positive_int(topic, count) for topic, count in pairs("--partitions", partition_specs)}
    description, manifest_app_id = load_description(file)
    click.echo(describe_text(description, application_id or manifest_app_id, partitions), nl=False)


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

    The working folder is importable (for the topology's functions), as with ``python -m``. Before anything
    starts, every user-code reference is imported and every librdkafka setting is tried on a client that does
    not connect: all problems are reported in one error.
    """
    settings = dict(pairs("--set", overrides))
    # Imported here so the topology commands work without the processing runtime's dependencies.
    try:
        from streamapp.app import KafkaStreams
        from streamapp.commands.preflight import preflight
    except ImportError as exc:
        raise click.ClickException(f"the processing runtime cannot be imported: {exc}") from exc

    description, config = preflight(topology_ref, config_file, settings)
    sys.exit(KafkaStreams(description, _with_a_free_http_port(config)).run())


def _with_a_free_http_port(config: Any) -> Any:
    """``config``, or, when it leaves ``http.port`` at its default and another process (a second local app)
    serves that port, ``config`` with port 0: the server takes a free port and logs which. Not with
    ``application.server`` set: the port it advertises to the other instances would be wrong."""
    if "http_port" in config.model_fields_set or config.application_server:
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

    settings = dict(pairs("--set", overrides))
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
    description = load_topology(topology_ref, defaults)
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


main.add_command(manifest)
main.add_command(topics)
main.add_command(image)
main.add_command(query)
