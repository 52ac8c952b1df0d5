"""The replay's table of node types (ADR 0005): the union of its family modules, and the check that refuses a
topology the replay cannot run, naming the node, before any Spark job starts."""

from __future__ import annotations

from streamapp.replay import aggregate, io, joins, process, stateless, windowed
from streamapp.replay.base import Translation
from streamapp.topology import TopologyDescription, TopologyError

__all__ = ["TRANSLATIONS", "UNSUPPORTED", "UnsupportedTopologyError", "check_supported"]

_FAMILIES = (io, stateless, aggregate, windowed, joins, process)
_ALL: dict[str, Translation] = {t: m.TRANSLATIONS[t] for m in _FAMILIES for t in m.TRANSLATIONS}

TRANSLATIONS: dict[str, Translation] = {t: tr for t, tr in _ALL.items() if tr.how != "unsupported"}
"""Node type -> how the replay runs it (every supported type: in the task, by the runtime's processors)."""
UNSUPPORTED: dict[str, str] = {t: tr.reason for t, tr in _ALL.items() if tr.how == "unsupported"}
"""Node type -> why the replay refuses it."""


class UnsupportedTopologyError(TopologyError):
    """The replay cannot run this topology (the message names the node or topic and why)."""


def check_supported(description: TopologyDescription) -> None:
    """Raise UnsupportedTopologyError naming the first node the replay cannot run (an unknown type included)."""
    for node in description.nodes:
        if node.type in TRANSLATIONS:
            continue
        reason = UNSUPPORTED.get(node.type, "the replay has no translation for it")
        raise UnsupportedTopologyError(
            f"node '{node.name}': the replay does not support node type '{node.type}': {reason}"
        )
