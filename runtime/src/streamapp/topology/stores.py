"""The state stores of a topology description: ``StoreSpec``, owned by the node(s) that name it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from streamapp.topology.document import DescriptionModel, SerdeName, check_serde

__all__ = [
    "CACHED_NODE_TYPES",
    "TIMESTAMPED_NODE_TYPES",
    "StoreSpec",
    "cached_stores",
    "grace_buffer_stores",
    "timestamped_stores",
]

TIMESTAMPED_NODE_TYPES = frozenset(
    {
        "table",
        "to_table",
        "count",
        "reduce",
        "aggregate",
        "cogroup_aggregate",
        "cogroup_merge",
        "stream_table_join",
        "table_table_join",
        "fk_subscription_join",
        "fk_response_join",
    }
)
"""Node types whose ``key_value`` stores keep each value's timestamp (Kafka's DSL materializes KTables and
aggregations in timestamped key-value stores, KIP-258)."""


class StoreSpec(DescriptionModel):
    """A state store owned by the node(s) that name it.

    Its changelog topic is ``<applicationId>-<name>-changelog`` (compacted), with one partition per task of
    the sub-topology that owns it.

    ``window`` and ``session`` stores (``streamapp.state.window_store`` / ``session_store``) need
    ``retentionMs`` (how long windows are kept after the store's stream time passes them, ms); their
    changelogs are ``compact,delete`` with ``retention.ms`` = retention + 1 day. A window store also has
    ``windowSizeMs`` (the ``end - start`` of its windows) and may ``retainDuplicates`` (join buffers).

    A ``versioned`` store (``streamapp.state.versioned``, Kafka's ``VersionedKeyValueStore``, KIP-889) keeps every
    value of a key within ``historyRetentionMs`` (ms, Kafka's ``history.retention.ms``), by timestamp; its
    changelog is compacted with ``min.compaction.lag.ms`` = history retention + 1 day (Kafka's
    ``VersionedChangelogTopicConfig``). It is never cached.
    """

    name: str
    type: Literal["key_value", "window", "session", "versioned"] = "key_value"
    key_serde: SerdeName = "bytes"
    value_serde: SerdeName = "bytes"
    retention_ms: int | None = Field(default=None, ge=1)
    window_size_ms: int | None = Field(default=None, ge=0)
    retain_duplicates: bool | None = None
    history_retention_ms: int | None = Field(default=None, ge=0)

    _serdes = field_validator("key_serde", "value_serde")(check_serde)

    @model_validator(mode="after")
    def _check_windowed_fields(self) -> StoreSpec:
        if (self.type == "versioned") != (self.history_retention_ms is not None):
            raise ValueError("'historyRetentionMs' applies to, and is needed by, versioned stores only")
        if self.type in ("key_value", "versioned"):
            extra = [f for f in ("retention_ms", "window_size_ms", "retain_duplicates") if getattr(self, f) is not None]
            if extra:
                raise ValueError(f"'{to_camel(extra[0])}' applies only to window and session stores")
        elif self.retention_ms is None:
            raise ValueError(f"a {self.type} store needs 'retentionMs'")
        if self.type == "window" and self.window_size_ms is None:
            raise ValueError("a window store needs 'windowSizeMs'")
        if self.type == "session" and (self.window_size_ms is not None or self.retain_duplicates is not None):
            raise ValueError("'windowSizeMs' and 'retainDuplicates' apply only to window stores")
        return self


CACHED_NODE_TYPES = frozenset(
    {"table", "to_table", "count", "reduce", "aggregate", "cogroup_aggregate", "cogroup_merge"}
)
"""Node types whose ``key_value`` stores go through the record cache when it is on (Kafka's materialized KTables
and aggregations are cached by default; join and Processor API stores are not)."""


def cached_stores(nodes: Iterable[Any], stores: Iterable[StoreSpec]) -> frozenset[str]:
    """Names of the ``key_value`` stores of nodes in ``CACHED_NODE_TYPES`` (``streamapp.state.record_cache``)."""
    return _stores_of(nodes, stores, CACHED_NODE_TYPES)


def timestamped_stores(nodes: Iterable[Any], stores: Iterable[StoreSpec]) -> frozenset[str]:
    """Names of the ``key_value`` stores kept in the timestamped format (``streamapp.state.timestamped``): those
    of a node in ``TIMESTAMPED_NODE_TYPES``. Other ``key_value`` stores (suppression buffers, join buffers,
    Processor API stores: Kafka's plain ``KeyValueStore``; a node's ``plain_layout_stores()``, e.g. the grace buffer
    of a stream-table join) keep their own value layout."""
    nodes = list(nodes)
    plain = {name for node in nodes for name in getattr(node, "plain_layout_stores", list)()}
    return _stores_of(nodes, stores, TIMESTAMPED_NODE_TYPES) - plain


def _stores_of(nodes: Iterable[Any], stores: Iterable[StoreSpec], types: frozenset[str]) -> frozenset[str]:
    key_value = {spec.name for spec in stores if spec.type == "key_value"}
    return frozenset(name for node in nodes if node.type in types for name in node.stores() if name in key_value)


def grace_buffer_stores(nodes: Iterable[Any]) -> frozenset[str]:
    """Names of the grace buffers of stream-table joins (``bufferStore``, ``streamapp.state.grace_buffer``)."""
    return frozenset(name for node in nodes if (name := getattr(node, "buffer_store", None)) is not None)
