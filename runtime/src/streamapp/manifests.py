"""Kubernetes manifests of an application, built from its topology: a StreamApp and a StreamReplay.

Pure functions from plain data to documents (``stream_app`` and ``stream_replay``) and the YAML layout the
examples use (``to_yaml``: block style, topology nodes and stores one flow-style line each). The shapes follow the
operator's CRDs (``crds/``; the runtime does not import the operator): ``spec.config`` holds only the Kafka
Streams keys the spec has no field for, as strings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import yaml

from streamapp.topology import TopologyDescription

__all__ = [
    "API_VERSION",
    "OUTPUTS",
    "SPEC_KEYS",
    "AppSettings",
    "Handover",
    "ManifestError",
    "split_config",
    "stream_app",
    "stream_replay",
    "to_yaml",
]

API_VERSION: Final = "streamapp.io/v1alpha1"
SPEC_KEYS: Final[Mapping[str, str]] = {
    "application.id": "applicationId",
    "bootstrap.servers": "kafka.bootstrapServers",
    "num.stream.threads": "threads",
    "processing.guarantee": "processingGuarantee",
}
"""Streams config keys a StreamApp sets through a spec field (the operator refuses them in ``spec.config``)."""
_OPERATOR_KEYS = ("state.dir", "http.port", "application.server")
_SECURITY_PREFIXES = ("security.", "sasl.", "ssl.")


class ManifestError(ValueError):
    """The settings cannot make a valid manifest; the message names the key or option."""


@dataclass(frozen=True)
class AppSettings:
    """What a StreamApp spec says besides its topology. ``config``: ``spec.config`` (string values)."""

    name: str
    image: str
    bootstrap_servers: str
    replicas: int = 1
    threads: int = 1
    processing_guarantee: str = "at_least_once"
    application_id: str | None = None
    image_pull_policy: str | None = None
    state_size: str | None = None
    config: Mapping[str, str] = field(default_factory=dict)


def split_config(values: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """A flat streams config as ``(spec fields by SPEC_KEYS key, spec.config)``, both with string values
    (``true``/``false`` for booleans). ``state.dir``, ``http.port`` and ``application.server`` are left out (the
    operator sets them; every pod advertises its own address).

    Raises ManifestError naming every connection-security key (``security.*``, ``sasl.*``, ``ssl.*``, also
    under ``consumer.`` / ``producer.``): a StreamApp takes them from ``spec.kafka.authentication`` and
    ``spec.kafka.tls`` with Secrets, never as plain text.
    """
    fields: dict[str, str] = {}
    config: dict[str, str] = {}
    security = []
    for key, value in values.items():
        text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        bare = key.removeprefix("consumer.").removeprefix("producer.")
        if bare.startswith(_SECURITY_PREFIXES):
            security.append(key)
        elif key in SPEC_KEYS:
            fields[key] = text
        elif key not in _OPERATOR_KEYS:
            config[key] = text
    if security:
        raise ManifestError(
            f"config keys {', '.join(security)}: a StreamApp takes connection security from spec.kafka.authentication"
            " and spec.kafka.tls (credentials in Secrets, docs/operator.md); leave them out of --config"
        )
    return fields, config


def stream_app(settings: AppSettings, topology: TopologyDescription) -> dict[str, Any]:
    """The StreamApp document (keys in the order ``to_yaml`` prints them). Raises TopologyError when a function
    of ``topology`` cannot be exported."""
    spec: dict[str, Any] = {"image": settings.image}
    if settings.image_pull_policy:
        spec["imagePullPolicy"] = settings.image_pull_policy
    if settings.application_id:
        spec["applicationId"] = settings.application_id
    spec.update(
        {
            "replicas": settings.replicas,
            "threads": settings.threads,
            "processingGuarantee": settings.processing_guarantee,
            "kafka": {"bootstrapServers": settings.bootstrap_servers},
        }
    )
    if settings.state_size:
        spec["state"] = {"size": settings.state_size}
    if settings.config:
        spec["config"] = {key: _Quoted(value) for key, value in settings.config.items()}
    spec["topology"] = _topology(topology)
    return {"apiVersion": API_VERSION, "kind": "StreamApp", "metadata": {"name": settings.name}, "spec": spec}


OUTPUTS: Final = ("New", "TakeOver")
"""``handover.outputs``: the new version writes ``New`` output topics, or ``TakeOver`` the old version's."""


@dataclass(frozen=True)
class Handover:
    """What a handover's new version takes besides the replay's topology (the StreamReplay's ``spec.handover``):
    ``image`` its ``spec.image`` (whose code the replay runs too), ``replicas`` its ``spec.replicas``, ``outputs``
    one of OUTPUTS. None: the operator's default (the replay's image, else the app's; the app's replicas; New)."""

    image: str | None = None
    replicas: int | None = None
    outputs: str | None = None


def stream_replay(
    name: str,
    app: str,
    mode: str,
    topology: TopologyDescription,
    *,
    application_id: str | None = None,
    image: str | None = None,
    handover: Handover | None = None,
    spark_image: str | None = None,
) -> dict[str, Any]:
    """The StreamReplay document replaying StreamApp ``app``'s input (from earliest to now) through
    ``topology``: ``mode`` ``backfill`` writes the topology's outputs, ``handover`` then starts it as the new
    version of the app (docs/replay.md). ``image``: the app image whose code the replay runs (``spec.image``;
    default the app's); ``handover``: the new version's settings (``mode`` handover only); ``spark_image``: a
    replay image other than the operator's (``spec.spark.image``).

    Raises ManifestError for what the operator's CRD refuses: another mode, handover settings of a backfill, an
    ``outputs`` not in OUTPUTS, ``image`` and ``handover.image`` that differ.
    """
    if mode not in ("backfill", "handover"):
        raise ManifestError(f"replay mode must be backfill or handover, got '{mode}'")
    settings = {k: v for k, v in vars(handover or Handover()).items() if v is not None}
    if settings and mode != "handover":
        raise ManifestError(f"handover {', '.join(settings)}: settings of a handover's new version, not of a {mode}")
    if settings.get("outputs", "New") not in OUTPUTS:
        raise ManifestError(f"handover outputs must be New or TakeOver, got '{settings['outputs']}'")
    if image and settings.get("image", image) != image:
        raise ManifestError(
            f"replay image {image} and handover image {settings['image']} differ: the replay runs the new version's "
            "code, so give one of them (or both the same)"
        )
    spec: dict[str, Any] = {"appRef": {"name": app}}
    if image:
        spec["image"] = image
    spec.update({"mode": mode, "topology": _topology(topology)})
    if application_id:
        spec["applicationId"] = application_id
    if settings:
        spec["handover"] = settings
    if spark_image:
        spec["spark"] = {"image": spark_image}
    return {"apiVersion": API_VERSION, "kind": "StreamReplay", "metadata": {"name": name}, "spec": spec}


def to_yaml(document: Mapping[str, Any], comment: str = "") -> str:
    """``document`` as block-style YAML with sequences indented under their key, topology nodes and stores one
    line each (so a topology change is a readable diff), preceded by ``comment`` as ``#`` lines."""
    header = "".join(f"# {line}\n".replace("# \n", "#\n") for line in comment.splitlines())
    return header + yaml.dump(dict(document), Dumper=_Dumper, sort_keys=False, width=1_000_000, allow_unicode=True)


def _topology(topology: TopologyDescription) -> dict[str, Any]:
    topology.check_exportable()
    document = topology.to_dict()
    return {"nodes": [_Flow(node) for node in document["nodes"]], "stores": [_Flow(s) for s in document["stores"]]}


class _Flow(dict[str, Any]):
    """A mapping printed in flow style (one line)."""


class _Quoted(str):
    """A string printed in double quotes (``"1000"``: the API server takes ``spec.config`` values as strings)."""

    __slots__ = ()


class _Dumper(yaml.SafeDumper):
    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)  # "  nodes:\n    - {...}", as kubectl users write it

    def choose_scalar_style(self) -> str:
        style: str = super().choose_scalar_style()
        return '"' if style == "'" else style  # "module:function", as the docs and examples quote it


_Dumper.add_representer(
    _Flow, lambda dumper, data: dumper.represent_mapping("tag:yaml.org,2002:map", data, flow_style=True)
)
_Dumper.add_representer(_Quoted, lambda dumper, data: dumper.represent_scalar("tag:yaml.org,2002:str", data, style='"'))
