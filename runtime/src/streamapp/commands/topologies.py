"""Reading the topology a command names: ``module:function`` (called) or a file (a description or a manifest).

Every function raises ``click.ClickException`` with a message for the user.
"""

from __future__ import annotations

import inspect
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click
import yaml

from streamapp.dsl import StreamsBuilder
from streamapp.dsl.builder import with_default_serdes
from streamapp.topology import TopologyDescription, TopologyError, resolve_function

__all__ = [
    "build_description",
    "config_values",
    "export_description",
    "import_from_working_folder",
    "load_description",
    "load_topology",
    "pairs",
]


def export_description(function: str, config: Mapping[str, Any] | None = None) -> TopologyDescription:
    """Call ``function`` (a ``module:attr`` reference) and return its validated, exportable description (a
    StreamsBuilder is built with ``config``'s default serdes).

    The current directory is importable, as with ``python -m``. Raises ClickException on any failure; every
    function that cannot be exported (lambdas, nested functions) is listed in one error.
    """
    description = build_description(function, config)
    try:
        description.check_exportable()  # e.g. lambdas: names every node and parameter
    except TopologyError as exc:
        raise click.ClickException(str(exc)) from exc
    return description


def build_description(function: str, config: Mapping[str, Any] | None = None) -> TopologyDescription:
    """``export_description`` without the export check: the description may keep in-process functions
    (``TopologyDescription.export_problems`` lists them). Raises ClickException."""
    import_from_working_folder()
    try:
        build = resolve_function(function)
        _check_no_arguments(function, build)
        result = build()
        if isinstance(result, StreamsBuilder):
            result = result.build(config)
    except TopologyError as exc:
        raise click.ClickException(str(exc)) from exc
    if isinstance(result, TopologyDescription):
        return result
    raise click.ClickException(
        f"{function} returned {type(result).__name__}; expected a StreamsBuilder or a TopologyDescription"
    )


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


def load_topology(topology_ref: str, config: Mapping[str, Any] | None = None) -> TopologyDescription:
    """The description ``--topology`` names: a file (``load_description``) or ``module:function``
    (``export_description``). Raises click.BadParameter for neither, ClickException for a broken one."""
    import_from_working_folder()
    if Path(topology_ref).is_file():
        return load_description(Path(topology_ref), config)[0]
    if ":" not in topology_ref:
        raise click.BadParameter(f"'{topology_ref}' is neither a file nor 'module:function'", param_hint="--topology")
    return export_description(topology_ref, config)


def config_values(config_file: Path | None, overrides: tuple[str, ...]) -> dict[str, Any]:
    """The flat streams config of ``--config FILE`` (a YAML map, or none) with ``--set KEY=VALUE`` on top, not
    validated (a command may not need every required key). Raises ClickException for an unreadable file."""
    values: dict[str, Any] = {}
    if config_file is not None:
        try:
            loaded = yaml.safe_load(config_file.read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise click.ClickException(f"{config_file}: cannot read YAML: {exc}") from exc
        if not isinstance(loaded, dict | None):
            raise click.ClickException(f"{config_file}: must be a YAML map of config keys")
        values.update(loaded or {})
    values.update(pairs("--set", overrides))
    return values


def import_from_working_folder() -> None:
    """Put the working folder first on ``sys.path`` (as ``python -m`` does), for the user's modules."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())


def pairs(option: str, specs: tuple[str, ...]) -> list[tuple[str, str]]:
    """``KEY=VALUE`` options as pairs; click.BadParameter naming ``option`` for a malformed one."""
    found = []
    for spec in specs:
        key, sep, value = spec.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"'{spec}' is not KEY=VALUE", param_hint=option)
        found.append((key, value))
    return found


def _check_no_arguments(function: str, build: Any) -> None:
    try:
        inspect.signature(build).bind()
    except TypeError as exc:
        raise click.ClickException(f"{function} cannot be called without arguments ({exc})") from exc
    except ValueError:  # no signature available (some builtins): let the call decide
        pass
