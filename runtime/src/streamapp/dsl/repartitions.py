"""Which DSL repartitions drop null keys before their topic: Kafka Streams' rule since KIP-962 (3.7).

Kafka puts a filter in front of every repartition topic the DSL creates (``KStreamImpl.createRepartitionedSource``,
used by ``groupBy`` / ``selectKey(...).groupByKey()``, ``repartition()`` and the repartitions in front of joins) and,
when it builds the topology, makes it ``(k, v) -> k != null`` (``InternalStreamsBuilder.rewriteRepartitionNodes``)
unless a join that takes null keys is downstream of the repartition (``NodesWithRelaxedNullKeyJoinDownstream``:
a left stream-table or stream-global-table join, a left or outer stream-stream join, labelled
``NULL_KEY_RELAXED_JOIN``). A filtered record is not written to the repartition topic and not counted as a dropped
record. A grouped table's repartition needs no filter: its ``group_by`` already skips null keys
(``KTableRepartitionMap``).

``null_key_repartitions`` is the pure decision over the recorded steps; ``StreamsBuilder.build`` applies it as
``dropNullKeys`` on the repartition nodes (``RepartitionNode``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["NULL_KEY_JOINS", "null_key_repartitions"]

NULL_KEY_JOINS = frozenset(
    {
        ("stream_table_join", "left"),
        ("stream_global_join", "left"),
        ("stream_stream_join", "left"),
        ("stream_stream_join", "outer"),
    }
)
"""``(node type, join)`` of the joins that take null-key records (KIP-962); a repartition upstream of one keeps them."""


_OWN_TOPIC_WRITERS = frozenset({"group_by", "fk_subscription_send", "fk_subscription_join"})
"""Writers of repartitions that are no DSL repartition topic, so get no filter: a grouped table's, and the foreign-key
join's subscription and response topics (a left join's subscription for a null foreign key has a null key)."""


def null_key_repartitions(steps: Iterable[tuple[str, str, Mapping[str, Any]]]) -> frozenset[str]:
    """The names of the repartition steps that must drop null keys, from ``(name, type, params)`` steps whose
    ``params`` name their upstream nodes in ``input`` (one) or ``inputs`` (several).

    A stream repartition drops them unless a join of ``NULL_KEY_JOINS`` is reachable downstream of it (through
    any nodes, other repartitions included, as Kafka's graph traversal goes); a repartition whose input is a
    table's ``group_by`` or a foreign-key join's (``_OWN_TOPIC_WRITERS``) is left alone.
    """
    recorded = [(name, node_type, params) for name, node_type, params in steps]
    types = {name: node_type for name, node_type, _ in recorded}
    children: dict[str, list[str]] = {}
    for name, _, params in recorded:
        for parent in _inputs(params):
            children.setdefault(parent, []).append(name)
    takes_null_keys = {
        name for name, node_type, params in recorded if (node_type, params.get("join", "inner")) in NULL_KEY_JOINS
    }
    return frozenset(
        name
        for name, node_type, params in recorded
        if node_type == "repartition"
        and types.get(str(params.get("input"))) not in _OWN_TOPIC_WRITERS
        and not _reaches(name, children, takes_null_keys)
    )


def _inputs(params: Mapping[str, Any]) -> list[str]:
    upstream = params.get("inputs")
    if isinstance(upstream, list):
        return [str(name) for name in upstream]
    single = params.get("input")
    return [single] if isinstance(single, str) else []


def _reaches(start: str, children: Mapping[str, list[str]], targets: set[str]) -> bool:
    """Whether a node of ``targets`` is downstream of ``start``."""
    seen: set[str] = set()
    pending = list(children.get(start, ()))
    while pending:
        name = pending.pop()
        if name in targets:
            return True
        if name not in seen:
            seen.add(name)
            pending.extend(children.get(name, ()))
    return False
