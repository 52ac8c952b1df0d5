"""``streamapp run``'s checks before anything starts: every problem of the topology and the config in one error.

A first run of a new app used to fail one problem at a time (a lambda per round trip, a librdkafka typo only
after the internal topics were created). ``preflight`` collects them all first:

- the config file and ``--set`` overrides (``StreamsConfig``'s own validation);
- the topology: the file or function, every function that cannot be exported (lambdas, nested functions) and
  every ``module:attr`` reference that cannot be imported (``streamapp.topology.references``);
- every librdkafka setting, tried on clients that never connect (``streamapp.kafka.config_check``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from streamapp.commands.topologies import build_description, import_from_working_folder, load_description
from streamapp.config import ConfigError, StreamsConfig
from streamapp.kafka.config_check import client_config_problems
from streamapp.topology import TopologyDescription
from streamapp.topology.references import reference_problems

__all__ = ["preflight", "problems_message"]


def preflight(
    topology_ref: str, config_file: Path, overrides: dict[str, str]
) -> tuple[TopologyDescription, StreamsConfig]:
    """The description and config ``streamapp run`` starts with; ClickException listing every problem found
    (click.BadParameter for a ``--topology`` that is neither a file nor ``module:function``)."""
    problems: list[str] = []
    config: StreamsConfig | None = None
    try:
        config = StreamsConfig.load(config_file, overrides)
    except ConfigError as exc:
        problems.append(f"{config_file}: {exc}")
    else:
        problems += client_config_problems(config)
    description, topology_problems = _topology(topology_ref, config.to_mapping() if config else {})
    problems = topology_problems + problems
    if problems or description is None or config is None:
        raise click.ClickException(problems_message(problems))
    return description, config


def problems_message(problems: list[str]) -> str:
    """One problem as is; several as ``"cannot run: <n> problems:"`` and one ``  - <problem>`` line each."""
    if len(problems) == 1:
        return problems[0]
    return "\n".join([f"cannot run: {len(problems)} problems:", *(f"  - {problem}" for problem in problems)])


def _topology(topology_ref: str, defaults: dict[str, Any]) -> tuple[TopologyDescription | None, list[str]]:
    """The description and its problems: functions that cannot be exported, then references that do not import;
    ``(None, [why])`` when it cannot be loaded at all."""
    import_from_working_folder()
    try:
        if Path(topology_ref).is_file():
            description, _ = load_description(Path(topology_ref), defaults)
        elif ":" in topology_ref:
            description = build_description(topology_ref, defaults)
        else:
            raise click.BadParameter(
                f"'{topology_ref}' is neither a file nor 'module:function'", param_hint="--topology"
            )
    except click.BadParameter:
        raise
    except click.ClickException as exc:
        return None, [exc.message]
    return description, description.export_problems() + reference_problems(description)
