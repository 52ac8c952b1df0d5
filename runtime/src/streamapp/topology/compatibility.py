"""Upgrade compatibility: what a new topology description changes against the running one, and whether the
application's state (stores, changelogs, repartition topics, committed offsets) survives the change.

``compare(running, new)`` returns a ``CompatibilityReport`` of typed ``Finding``\\ s, each naming the node,
store or topic and its old -> new value. Pure: no Kafka, no user code.

What breaks state follows Kafka Streams' upgrade guidance: an application whose topology changes in an
incompatible way must be reset (``kafka-streams-application-reset``) or run under a new ``application.id``
(Kafka Streams developer guide, "Application Reset Tool": "when the topology changes ... stateful operations");
stores, changelogs and repartition topics are matched *by name* across versions, so renaming or removing
one loses its state (developer guide, "Naming Operators in a Kafka Streams DSL Application", KIP-307); a
store's serdes define the bytes in its changelog, so new serdes cannot read the old state; a window store's
segments and keys are laid out by window size and grace (KIP-633), a changed window cuts the old state
differently; a changed partition count moves keys to other partitions and so other tasks (Kafka Streams
requires co-partitioning and never repartitions existing state, KIP-221 / "Repartitioning" in the
"Streams DSL" guide).

Breaking findings (``breaks_state``):

=========================  ================================================================================
kind                       meaning (``old`` -> ``new``)
=========================  ================================================================================
store_removed              a store (and so its changelog's state) is gone: name -> None
store_renamed              a store is gone and another with the same type and serdes appeared: old -> new name
store_type_changed         key_value / window / session changed, or a timestamped key-value store (of a KTable
                           or an aggregation, KIP-258) that becomes a plain one (``field`` = format; plain to
                           timestamped is compatible: the store is upgraded when opened)
store_serde_changed        the store's key or value serde changed (``field`` = key_serde / value_serde)
window_changed             the window of a windowed store changed: kind (tumbling, hopping, sliding, session),
                           size, advance, gap, grace, join before/after (``field`` names it), or the store's
                           windowSizeMs / retainDuplicates
repartition_topic_removed  a repartition topic is gone (records in it are never read): suffix -> None
repartition_topic_renamed  one repartition topic replaced by another in the same place: old -> new suffix
repartition_serde_changed  a repartition topic's key or value serde changed (records in flight are unreadable)
partitions_changed         the partition count of a source, repartition or changelog topic changed
=========================  ================================================================================

Compatible findings (the change rolls): ``node_added``, ``node_removed`` and ``node_changed`` (stateless
nodes, a stateful node's functions, and ``global_table`` nodes: a global store holds its topic's bytes and is
rebuilt from that topic, Kafka's ``GlobalStateManagerImpl``, so its changes break no state), ``store_added``,
``store_retention_changed``, ``store_upgraded`` (a plain key-value store that becomes timestamped),
``store_moved`` (its sub-topology id changed: the state is restored from the
changelog into another task directory), ``repartition_topic_added``, ``source_topic_added`` /
``source_topic_removed``, ``sink_added`` / ``sink_removed``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from streamapp.topology.description import TopologyDescription
from streamapp.topology.nodes.base import node_to_dict
from streamapp.topology.nodes.io import RepartitionNode, SinkNode, SourceNode
from streamapp.topology.stores import StoreSpec, timestamped_stores

__all__ = [
    "BREAKING_KINDS",
    "BreakingKind",
    "CompatibilityReport",
    "CompatibleKind",
    "Finding",
    "FindingKind",
    "compare",
]

BreakingKind = Literal[
    "store_removed",
    "store_renamed",
    "store_type_changed",
    "store_serde_changed",
    "window_changed",
    "repartition_topic_removed",
    "repartition_topic_renamed",
    "repartition_serde_changed",
    "partitions_changed",
]
CompatibleKind = Literal[
    "node_added",
    "node_removed",
    "node_changed",
    "store_added",
    "store_retention_changed",
    "store_moved",
    "store_upgraded",
    "repartition_topic_added",
    "source_topic_added",
    "source_topic_removed",
    "sink_added",
    "sink_removed",
]
FindingKind = BreakingKind | CompatibleKind

BREAKING_KINDS: frozenset[str] = frozenset(get_args(BreakingKind))
"""The finding kinds that need an application reset or a new ``application.id``."""


@dataclass(frozen=True)
class Finding:
    """One difference between the running and the new description.

    ``subject`` is what changed (``store``, ``repartition topic``, ``topic``, ``node``, ``sink``), ``name`` its
    name in the running description (in the new one for an addition), ``field`` the changed attribute (or
    ``None``), ``old`` / ``new`` the values as text (``None`` for absent).
    """

    kind: FindingKind
    subject: str
    name: str
    old: str | None
    new: str | None
    field: str | None = None

    @property
    def breaks_state(self) -> bool:
        """True when the change needs a reset or a new application id (see the module docstring)."""
        return self.kind in BREAKING_KINDS

    @property
    def names(self) -> frozenset[str]:
        """Every node, store or topic name the finding mentions (both names of a rename)."""
        return frozenset({self.name} | ({self.new} if self.kind.endswith("_renamed") and self.new else set()))

    def message(self) -> str:
        """One line for a condition or a log: ``store 'counts': value serde long -> json``."""
        what = f"{self.subject} '{self.name}'"
        if self.kind.endswith("_removed"):
            return f"{what} removed"
        if self.kind.endswith("_added"):
            return f"{what} added"
        if self.kind.endswith("_renamed"):
            return f"{what} renamed to '{self.new}'"
        field = f"{self.field.replace('_', ' ')} " if self.field else ""
        return f"{what}: {field}{self.old} -> {self.new}"


@dataclass(frozen=True)
class CompatibilityReport:
    """All findings, breaking ones first; within each group stores, repartition topics, partition counts,
    sources and sinks, nodes, each in description order."""

    findings: tuple[Finding, ...]

    @property
    def breaking(self) -> tuple[Finding, ...]:
        """The findings that break state."""
        return tuple(f for f in self.findings if f.breaks_state)

    @property
    def compatible(self) -> bool:
        """True when the new description can roll over the running one's state."""
        return not self.breaking

    def summary(self, limit: int = 3) -> str:
        """The breaking findings as one line (at most ``limit``, then ``and N more``), ``""`` when none."""
        shown = [f.message() for f in self.breaking[:limit]]
        rest = len(self.breaking) - limit
        return "; ".join(shown) + (f"; and {rest} more" if rest > 0 else "")


def compare(
    running: TopologyDescription,
    new: TopologyDescription,
    *,
    partitions: Mapping[str, int] | None = None,
    new_partitions: Mapping[str, int] | None = None,
) -> CompatibilityReport:
    """The findings of upgrading ``running`` to ``new``.

    ``partitions`` (external source topic -> partition count) enables the partition-count checks of source,
    repartition and changelog topics; ``new_partitions`` are the counts the new version will see (default
    the same). Without them only explicit ``partitions`` of repartition nodes are compared. Raises
    TopologyError when a given mapping lacks a source topic of either description.
    """
    findings = [
        *_stores(running, new),
        *_repartitions(running, new),
        *_partitions(running, new, partitions, new_partitions),
        *_sources_and_sinks(running, new),
        *_nodes(running, new),
    ]
    ordered = sorted(findings, key=lambda f: not f.breaks_state)  # stable sort: the order found within a group
    return CompatibilityReport(tuple(ordered))


# -- stores ----------------------------------------------------------------------------------------------


def _stores(running: TopologyDescription, new: TopologyDescription) -> list[Finding]:
    old_owner, new_owner = _owners(running), _owners(new)
    # a global store (no sub-topology) holds its topic's bytes and is rebuilt from the topic: its changes are
    # its global_table node's (compatible), not a state break
    old_stores = {s.name: s for s in running.stores if s.name in old_owner}
    new_stores = {s.name: s for s in new.stores if s.name in new_owner}
    old_windows, new_windows = _store_windows(running), _store_windows(new)
    removed = [name for name in old_stores if name not in new_stores]
    added = [name for name in new_stores if name not in old_stores]
    renamed = _pair(
        removed,
        added,
        lambda a, b: _shape(old_stores[a], old_windows.get(a)) == _shape(new_stores[b], new_windows.get(b)),
    )
    findings: list[Finding] = []
    for old_name, new_name in renamed.items():
        findings.append(Finding("store_renamed", "store", old_name, old_name, new_name))
    findings += [Finding("store_removed", "store", n, n, None) for n in removed if n not in renamed]
    findings += [Finding("store_added", "store", n, None, n) for n in added if n not in renamed.values()]
    old_stamped = timestamped_stores(running.nodes, running.stores)
    new_stamped = timestamped_stores(new.nodes, new.stores)
    for name in _common(old_stores, new_stores):
        findings += _store_changes(old_stores[name], new_stores[name], old_windows.get(name), new_windows.get(name))
        if new_stores[name].type == "key_value" and (name in old_stamped) != (name in new_stamped):
            # KIP-258: a plain store is upgraded to the timestamped format when opened, never back
            kind: FindingKind = "store_type_changed" if name in old_stamped else "store_upgraded"
            formats = ("timestamped", "plain") if name in old_stamped else ("plain", "timestamped")
            findings.append(Finding(kind, "store", name, *formats, "format"))
        if old_owner.get(name) != new_owner.get(name):
            findings.append(
                Finding(
                    "store_moved", "store", name, _text(old_owner.get(name)), _text(new_owner.get(name)), "sub-topology"
                )
            )
    return findings


def _store_changes(
    old: StoreSpec, new: StoreSpec, old_window: dict[str, Any] | None, new_window: dict[str, Any] | None
) -> list[Finding]:
    name = old.name
    if old.type != new.type:
        return [Finding("store_type_changed", "store", name, old.type, new.type, "type")]
    findings = [
        Finding("store_serde_changed", "store", name, getattr(old, f), getattr(new, f), f)
        for f in ("key_serde", "value_serde")
        if getattr(old, f) != getattr(new, f)
    ]
    findings += [
        Finding("window_changed", "store", name, _text(getattr(old, f)), _text(getattr(new, f)), f)
        for f in ("window_size_ms", "retain_duplicates")
        if getattr(old, f) != getattr(new, f) and not (f == "window_size_ms" and (old_window or new_window))
    ]
    findings += [  # compatible: a versioned store's history retention is read, not stored (KIP-889)
        Finding("store_retention_changed", "store", name, _text(getattr(old, f)), _text(getattr(new, f)), f)
        for f in ("retention_ms", "history_retention_ms")
        if getattr(old, f) != getattr(new, f)
    ]
    before, after = old_window or {}, new_window or {}
    findings += [
        Finding("window_changed", "store", name, _text(before.get(f)), _text(after.get(f)), _window_field(f))
        for f in _ordered_keys(before, after)
        if before.get(f) != after.get(f)
    ]
    return findings


def _store_windows(description: TopologyDescription) -> dict[str, dict[str, Any]]:
    """The window (document form) of the node that owns each windowed store: a windowed aggregation's
    ``windows`` or a stream-stream join's ``windows``."""
    found: dict[str, dict[str, Any]] = {}
    for node in description.nodes:
        windows = getattr(node, "windows", None)
        if windows is not None:
            for store in node.stores():
                found.setdefault(store, windows.model_dump(by_alias=True, exclude_none=True, mode="json"))
    return found


def _shape(store: StoreSpec, window: dict[str, Any] | None) -> tuple[Any, ...]:
    """What must be equal for a removed and an added store to be one store renamed."""
    return (store.type, store.key_serde, store.value_serde, store.window_size_ms, store.retain_duplicates, window)


def _owners(description: TopologyDescription) -> dict[str, int]:
    return {store: sub.id for sub in description.subtopologies() for store in sub.stores}


def _window_field(key: str) -> str:
    return "window kind" if key == "type" else f"window {key}"


# -- repartition topics ----------------------------------------------------------------------------------


def _repartitions(running: TopologyDescription, new: TopologyDescription) -> list[Finding]:
    old_nodes = {n.topic_suffix: n for n in running.nodes if isinstance(n, RepartitionNode)}
    new_nodes = {n.topic_suffix: n for n in new.nodes if isinstance(n, RepartitionNode)}
    removed = [t for t in old_nodes if t not in new_nodes]
    added = [t for t in new_nodes if t not in old_nodes]
    # a repartition topic replaced by one fed by the same upstream node is a rename
    renamed = _pair(removed, added, lambda a, b: old_nodes[a].input == new_nodes[b].input)
    findings = [Finding("repartition_topic_renamed", "repartition topic", a, a, b) for a, b in renamed.items()]
    findings += [
        Finding("repartition_topic_removed", "repartition topic", t, t, None) for t in removed if t not in renamed
    ]
    findings += [
        Finding("repartition_topic_added", "repartition topic", t, None, t) for t in added if t not in renamed.values()
    ]
    for topic in _common(old_nodes, new_nodes):
        old, new_node = old_nodes[topic], new_nodes[topic]
        findings += [
            Finding("repartition_serde_changed", "repartition topic", topic, getattr(old, f), getattr(new_node, f), f)
            for f in ("key_serde", "value_serde")
            if getattr(old, f) != getattr(new_node, f)
        ]
        if old.partitions is not None and new_node.partitions is not None and old.partitions != new_node.partitions:
            findings.append(
                Finding(
                    "partitions_changed",
                    "repartition topic",
                    topic,
                    str(old.partitions),
                    str(new_node.partitions),
                    "partitions",
                )
            )
    return findings


# -- partition counts ------------------------------------------------------------------------------------


def _partitions(
    running: TopologyDescription,
    new: TopologyDescription,
    partitions: Mapping[str, int] | None,
    new_partitions: Mapping[str, int] | None,
) -> list[Finding]:
    if partitions is None:
        return []
    after = new_partitions if new_partitions is not None else partitions
    old_counts = _topic_counts(running, partitions)
    new_counts = _topic_counts(new, after)
    explicit = {
        n.topic_suffix
        for d in (running, new)
        for n in d.nodes
        if isinstance(n, RepartitionNode) and n.partitions is not None
    }
    findings: list[Finding] = []
    for topic, (subject, count) in old_counts.items():
        other = new_counts.get(topic)
        if other is None or other[1] == count:
            continue
        if subject == "repartition topic" and topic in explicit and _both_explicit(running, new, topic):
            continue  # reported by _repartitions from the nodes' partitions
        findings.append(Finding("partitions_changed", subject, topic, str(count), str(other[1]), "partitions"))
    return findings


def _both_explicit(running: TopologyDescription, new: TopologyDescription, topic: str) -> bool:
    def explicit(d: TopologyDescription) -> bool:
        return any(
            isinstance(n, RepartitionNode) and n.topic_suffix == topic and n.partitions is not None for n in d.nodes
        )

    return explicit(running) and explicit(new)


def _topic_counts(description: TopologyDescription, partitions: Mapping[str, int]) -> dict[str, tuple[str, int]]:
    """Partition count of every source, repartition and changelog topic (internal ones by suffix)."""
    counts: dict[str, tuple[str, int]] = {}
    for topic in description.external_source_topics():
        if topic in partitions:
            counts[topic] = ("topic", partitions[topic])
    for internal in description.internal_topics("", partitions):
        suffix = internal.name.removeprefix("-")
        subject = "changelog topic" if suffix.endswith("-changelog") else "repartition topic"
        counts[suffix] = (subject, internal.partitions)
    return counts


# -- sources, sinks and nodes ----------------------------------------------------------------------------


def _sources_and_sinks(running: TopologyDescription, new: TopologyDescription) -> list[Finding]:
    old_sources, new_sources = _source_topics(running), _source_topics(new)
    old_sinks, new_sinks = running.sink_topics(), new.sink_topics()
    return [
        *(Finding("source_topic_removed", "topic", t, t, None) for t in old_sources if t not in new_sources),
        *(Finding("source_topic_added", "topic", t, None, t) for t in new_sources if t not in old_sources),
        *(Finding("sink_removed", "sink topic", t, t, None) for t in old_sinks if t not in new_sinks),
        *(Finding("sink_added", "sink topic", t, None, t) for t in new_sinks if t not in old_sinks),
    ]


def _source_topics(description: TopologyDescription) -> list[str]:
    return [t for n in description.nodes if isinstance(n, SourceNode) for t in n.topics]


def _nodes(running: TopologyDescription, new: TopologyDescription) -> list[Finding]:
    old_nodes = {n.name: n for n in running.nodes if not _reported_elsewhere(n)}
    new_nodes = {n.name: n for n in new.nodes if not _reported_elsewhere(n)}
    findings = [Finding("node_removed", "node", n, old_nodes[n].type, None) for n in old_nodes if n not in new_nodes]
    findings += [Finding("node_added", "node", n, None, new_nodes[n].type) for n in new_nodes if n not in old_nodes]
    for name in _common(old_nodes, new_nodes):
        before, after = node_to_dict(old_nodes[name]), node_to_dict(new_nodes[name])
        findings += [
            Finding("node_changed", "node", name, _text(before.get(f)), _text(after.get(f)), f)
            for f in _ordered_keys(before, after)
            if before.get(f) != after.get(f) and f != "windows"  # window changes are reported on the store
        ]
    return findings


def _reported_elsewhere(node: Any) -> bool:
    """Repartition nodes are compared as topics, sink nodes by their topics (not by node name)."""
    return isinstance(node, RepartitionNode | SinkNode)


# -- helpers ---------------------------------------------------------------------------------------------


def _pair(removed: list[str], added: list[str], same: Any) -> dict[str, str]:
    """Removed -> added names judged one thing renamed: the first unpaired match of each removed name."""
    pairs: dict[str, str] = {}
    for old in removed:
        for candidate in added:
            if candidate not in pairs.values() and same(old, candidate):
                pairs[old] = candidate
                break
    return pairs


def _common(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """The names in both, in the running description's order (findings keep a stable order: a condition
    message does not change between two reconciles of the same change)."""
    return [name for name in before if name in after]


def _ordered_keys(before: Mapping[str, Any], after: Mapping[str, Any]) -> Iterable[str]:
    return [*before, *(k for k in after if k not in before)]


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
