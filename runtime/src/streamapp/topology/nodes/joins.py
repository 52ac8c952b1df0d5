"""The ``joins`` family: stream-global, stream-table, table-table and windowed stream-stream joins.

Every join names its two parents in ``inputs`` (ordered: ``[left, right]``; for stream-table and
stream-global joins the stream comes first). ``join`` picks the variant. User functions are
``"module:qualname"`` references; the joiner's arguments are always ``(left value, right value)``, with
``None`` for a missing side of a left/outer join.

=================== ============================================================ ==========================
type                parameters                                                   Kafka Streams class
=================== ============================================================ ==========================
stream_global_join  inputs [stream, global_table], keySelector                   KStreamGlobalKTableJoin
                    ``fn(key, value) -> global key``, joiner
                    ``fn(value, global value)``, join inner|left
stream_table_join   inputs [stream, table], joiner ``fn(value, table value)``,   KStreamKTableJoin
                    join inner|left, store (materializes the table side;
                    versioned for a versioned table), graceMs + bufferStore
                    (versioned tables only: KIP-923 grace buffer)
table_table_join    inputs [table, table], joiner ``fn(left, right)``,            KTableKTable{Inner,Left,
                    join inner|left|outer, leftStore, rightStore                 Outer}Join
stream_stream_join  inputs [stream, stream], joiner ``fn(left, right)``,          KStreamKStreamJoin
                    join inner|left|outer, windows {beforeMs, afterMs, graceMs},
                    leftStore, rightStore (window stores), outerStore (left and
                    outer joins: records waiting for their window to close)
fk_subscription_    input table (the left), foreignKeyExtractor ``fn(value) ->   SubscriptionSendProcessor
send                foreign key`` (``fn(key, value)`` with extractorTakesKey),
                    join inner|left, foreignKeySerde, leftStore (the
                    fk_response_join's, for its value serde)
fk_subscription_    inputs [subscription repartition, table (the right)],        SubscriptionReceive/Join
join                subscriptionStore, rightStore                                ForeignTableJoinProcessor
fk_response_join    inputs [table (the left), response repartition], joiner     ResponseJoinProcessor
                    ``fn(left, right)``, join inner|left, leftStore, store,      (+ KTableSource output)
                    rightValueSerde
=================== ============================================================ ==========================

The three ``fk_*`` nodes and two repartition nodes (the subscription registration and response topics) make
one foreign-key table-table join (KIP-213, ``streamapp.processors.joins.foreign_key`` has the whole protocol).

The ``global_table`` a stream-global join reads is an ``io`` node. Stream and table joins need both inputs
partitioned by the same key (``requires_copartitioned_input``): a side whose key changed since its last
source or repartition must be repartitioned first (the DSL inserts ``<name>-left-repartition`` /
``<name>-right-repartition``, as Kafka Streams does).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from streamapp.topology.document import SerdeName, check_serde
from streamapp.topology.nodes.base import GLOBAL_TABLE_KIND, FunctionRef, NodeBase, store_type_problem
from streamapp.topology.windows import JoinWindowsSpec

__all__ = [
    "VERSIONED_GRACE_ERROR",
    "FkResponseJoinNode",
    "FkSubscriptionJoinNode",
    "FkSubscriptionSendNode",
    "JoinType",
    "StreamGlobalJoinNode",
    "StreamStreamJoinNode",
    "StreamTableJoinNode",
    "TableTableJoinNode",
]

VERSIONED_GRACE_ERROR = "KTable must be versioned to use a grace period in a stream table join."
"""Kafka's ``KStreamKTableJoinProcessor.init`` error for ``Joined.withGracePeriod`` on a non-versioned table."""

JoinType = Literal["inner", "left", "outer"]
"""``inner``: both sides present; ``left``: every left record, right ``None`` when absent; ``outer``: either."""


class _TwoInputs(NodeBase):
    inputs_: list[str] = Field(alias="inputs", min_length=2, max_length=2)
    joiner: FunctionRef

    def inputs(self) -> list[str]:
        return list(self.inputs_)

    @property
    def left(self) -> str:
        return self.inputs_[0]

    @property
    def right(self) -> str:
        return self.inputs_[1]


class StreamGlobalJoinNode(_TwoInputs):
    """Joins each stream record with the global table's value at ``key_selector(key, value)``.

    Emits ``(key, joiner(value, global value))`` with the stream record's key and timestamp. ``inner`` drops
    records without a global value; ``left`` joins them with ``None``. Records with a null value, or whose
    selected key is null, are dropped (counted), except that ``left`` keeps null-key records (Kafka's
    ``KStreamKTableJoinProcessor``). No co-partitioning is needed: every worker holds the whole table.
    """

    type: Literal["stream_global_join"] = "stream_global_join"
    key_selector: FunctionRef
    join: Literal["inner", "left"] = "inner"

    def accepted_kinds(self, position: int) -> frozenset[str]:
        return frozenset({"stream"}) if position == 0 else frozenset({GLOBAL_TABLE_KIND})


class StreamTableJoinNode(_TwoInputs):
    """Joins each stream record with the table's current value for the same key (Kafka's ``KStreamKTableJoin``).

    Only stream records trigger output; table updates are written to ``store`` (the table side,
    materialized: key → latest value, with the table's serdes) and emit nothing. Emits
    ``(key, joiner(value, table value))`` at the stream record's timestamp; ``inner`` drops records
    without a table value, ``left`` joins them with ``None``. Null-value stream records are dropped; a
    null-key record is dropped by ``inner`` and joined with ``None`` by ``left``.

    Against a **versioned** table (a ``table`` source whose store is ``versioned``, KIP-914) ``store`` is a
    ``versioned`` store with the table's ``historyRetentionMs``, and each stream record joins the table value
    *as of its own timestamp* (Kafka's ``valueGetter.get(key, record.timestamp())``). ``graceMs`` (KIP-923,
    ``Joined.withGracePeriod``; versioned tables only, else Kafka's error ``VERSIONED_GRACE_ERROR``) holds stream
    records in ``bufferStore`` (a ``key_value`` store) until the join's stream time passes ``timestamp +
    graceMs``, so table updates that arrive late still join them; a record already older than that joins at
    once. Buffered records are joined in timestamp order (Kafka's ``RocksDBTimeOrderedKeyValueBuffer``).
    """

    type: Literal["stream_table_join"] = "stream_table_join"
    join: Literal["inner", "left"] = "inner"
    store: str
    grace_ms: int | None = Field(default=None, ge=0)
    buffer_store: str | None = None
    requires_copartitioned_input: ClassVar[bool] = True

    def accepted_kinds(self, position: int) -> frozenset[str]:
        return frozenset({"stream"}) if position == 0 else frozenset({"table"})

    def stores(self) -> list[str]:
        return [self.store] if self.buffer_store is None else [self.store, self.buffer_store]

    def plain_layout_stores(self) -> list[str]:
        """Stores in a layout of their own (not KIP-258 timestamped): the grace buffer."""
        return [] if self.buffer_store is None else [self.buffer_store]

    def check_graph(self, nodes: Mapping[str, NodeBase], stores: Mapping[str, Any]) -> str | None:
        table = versioned_table_store(nodes, stores, self.right)
        if self.grace_ms is not None and table is None:
            return VERSIONED_GRACE_ERROR
        if (self.grace_ms is None) != (self.buffer_store is None):
            return "graceMs and bufferStore go together: the grace buffer keeps the stream records"
        types = {self.store: "key_value" if table is None else "versioned"}
        if self.buffer_store is not None:
            types[self.buffer_store] = "key_value"
        problem = _check_own_stores(self, nodes, stores, types)
        own = stores.get(self.store)
        if (
            problem is None
            and own is not None
            and table is not None
            and own.history_retention_ms != table.history_retention_ms
        ):
            return (
                f"versioned store '{self.store}' keeps {own.history_retention_ms} ms of history but the table's "
                f"store '{table.name}' keeps {table.history_retention_ms} ms; they must be equal"
            )
        return problem


class TableTableJoinNode(_TwoInputs):
    """Joins two tables on their key; the output is a table (Kafka's ``KTableKTable{Inner,Left,Outer}Join``).

    Each side's updates are written to its store (``leftStore`` / ``rightStore``: key → latest value) and
    joined with the other side's current value. An update forwards ``Change(joiner(new, other),
    joiner(old, other))`` where a side that is absent makes the result absent (inner), or is passed as
    ``None`` to the joiner (left: right side may be absent; outer: either may be). Output timestamp: the
    later of the triggering update's and the other side's stored one (KIP-258 timestamped stores, as Kafka's
    ``KTableKTableInnerJoin`` computes ``max``).
    """

    type: Literal["table_table_join"] = "table_table_join"
    join: JoinType = "inner"
    left_store: str
    right_store: str
    output: ClassVar[str | None] = "table"
    accepts: ClassVar[frozenset[str]] = frozenset({"table"})
    requires_copartitioned_input: ClassVar[bool] = True

    def stores(self) -> list[str]:
        return [self.left_store, self.right_store]

    def check_graph(self, nodes: Mapping[str, NodeBase], stores: Mapping[str, Any]) -> str | None:
        if self.left_store == self.right_store:
            return "leftStore and rightStore must be different stores"
        return _check_own_stores(self, nodes, stores, {self.left_store: "key_value", self.right_store: "key_value"})


class StreamStreamJoinNode(_TwoInputs):
    """A windowed join of two streams on their key (Kafka's ``KStreamKStreamJoin``, ``KStream.join(KStream,
    ValueJoiner, JoinWindows)``).

    A left record at ``t`` joins right records with the same key in ``[t - beforeMs, t + afterMs]``; each
    pair emits ``joiner(left, right)`` at the larger timestamp. ``left`` also emits every left record
    that found no partner as ``joiner(left, None)``, ``outer`` also every such right record as
    ``joiner(None, right)``, once its window has closed (``t + afterMs + graceMs`` behind stream time for
    a left record, ``t + beforeMs + graceMs`` for a right one). ``leftStore`` / ``rightStore``: window
    stores (``retainDuplicates``, retention at least ``beforeMs + afterMs + graceMs``) holding each side's
    recent records; ``outerStore`` (left and outer joins only): a key-value store of the records waiting
    to be emitted unmatched. Records with a null key or value are dropped (a null-key record of a
    preserved side is emitted unmatched at once).
    """

    type: Literal["stream_stream_join"] = "stream_stream_join"
    join: JoinType = "inner"
    windows: JoinWindowsSpec
    left_store: str
    right_store: str
    outer_store: str | None = None
    requires_copartitioned_input: ClassVar[bool] = True

    @model_validator(mode="after")
    def _outer_store_for_outer_joins(self) -> StreamStreamJoinNode:
        if self.join == "inner" and self.outer_store is not None:
            raise ValueError("an inner join has no outerStore")
        if self.join != "inner" and self.outer_store is None:
            raise ValueError(f"a {self.join} join needs an outerStore (records waiting for their window to close)")
        if len({self.left_store, self.right_store, self.outer_store} - {None}) != len(self.stores()):
            raise ValueError("leftStore, rightStore and outerStore must be different stores")
        return self

    def stores(self) -> list[str]:
        return [self.left_store, self.right_store, *([self.outer_store] if self.outer_store else [])]

    def check_graph(self, nodes: Mapping[str, NodeBase], stores: Mapping[str, Any]) -> str | None:
        types = {self.left_store: "window", self.right_store: "window"}
        if self.outer_store is not None:
            types[self.outer_store] = "key_value"
        problem = _check_own_stores(self, nodes, stores, types)
        if problem is not None:
            return problem
        needed = self.windows.store_retention_ms()
        for name in (self.left_store, self.right_store):
            spec = stores.get(name)
            if spec is None:
                continue
            if not getattr(spec, "retain_duplicates", False):
                return f"window store '{name}' must set retainDuplicates: true (a join keeps every record)"
            retention = getattr(spec, "retention_ms", None)
            if retention is not None and retention < needed:
                return (
                    f"window store '{name}' keeps {retention} ms but the join needs at least "
                    f"beforeMs + afterMs + graceMs = {needed} ms"
                )
        return None


class FkSubscriptionSendNode(NodeBase):
    """The left table's side of a foreign-key join: turns each update ``Change(new, old)`` of the left table into
    subscription records keyed by foreign key (Kafka's ``SubscriptionSendProcessorSupplier``).

    Output: a stream of ``(foreign key bytes, subscription bytes)`` for the subscription repartition node (its
    serdes are ``bytes``): the foreign key serialized with ``foreignKeySerde`` (the right table's key serde, so
    the record lands on the right table's partition), the subscription holding the instruction, the murmur3 hash
    of the new left value (serialized with ``leftStore``'s value serde) and the left key. ``foreignKeyExtractor``
    is ``fn(value) -> foreign key`` (``None``: no foreign key).
    """

    type: Literal["fk_subscription_send"] = "fk_subscription_send"
    input: str
    foreign_key_extractor: FunctionRef
    extractor_takes_key: bool | None = None
    join: Literal["inner", "left"] = "inner"
    foreign_key_serde: SerdeName
    left_store: str
    output: ClassVar[str | None] = "stream"
    accepts: ClassVar[frozenset[str]] = frozenset({"table"})
    changes_key: ClassVar[bool] = True

    _serdes = field_validator("foreign_key_serde")(check_serde)


class FkSubscriptionJoinNode(NodeBase):
    """The right table's side of a foreign-key join (Kafka's ``SubscriptionReceiveProcessorSupplier``,
    ``SubscriptionJoinProcessorSupplier`` and ``ForeignTableJoinProcessorSupplier`` in one node).

    Inputs: ``[subscription repartition, right table]``. A subscription is kept in ``subscriptionStore`` (a
    ``key_value`` store of bytes, key ``<4-byte foreign key length><foreign key><left key>``) and answered with the
    right table's current value from ``rightStore`` (the right table's serdes); a right table update answers every
    subscription of its key (a prefix scan). Output: ``(left key bytes, response bytes)`` records for the response
    repartition node.
    """

    type: Literal["fk_subscription_join"] = "fk_subscription_join"
    inputs_: list[str] = Field(alias="inputs", min_length=2, max_length=2)
    subscription_store: str
    right_store: str
    output: ClassVar[str | None] = "stream"
    changes_key: ClassVar[bool] = True
    requires_copartitioned_input: ClassVar[bool] = True

    def inputs(self) -> list[str]:
        return list(self.inputs_)

    def accepted_kinds(self, position: int) -> frozenset[str]:
        return frozenset({"stream"}) if position == 0 else frozenset({"table"})

    def stores(self) -> list[str]:
        return [self.subscription_store, self.right_store]

    def plain_layout_stores(self) -> list[str]:
        """The subscription store keeps its own layout (not KIP-258 timestamped)."""
        return [self.subscription_store]

    def check_graph(self, nodes: Mapping[str, NodeBase], stores: Mapping[str, Any]) -> str | None:
        if self.subscription_store == self.right_store:
            return "subscriptionStore and rightStore must be different stores"
        types = {self.subscription_store: "key_value", self.right_store: "key_value"}
        return _check_own_stores(self, nodes, stores, types)


class FkResponseJoinNode(_TwoInputs):
    """The result of a foreign-key join (Kafka's ``ResponseJoinProcessorSupplier`` and the ``KTableSource`` of
    ``KTABLE-FK-JOIN-OUTPUT``): a table keyed by the left key.

    Inputs: ``[left table, response repartition]``; ``rightValueSerde``: the right table's value serde (the
    responses carry right values serialized with it). Left updates are written to ``leftStore`` (the left table's
    serdes) and emit nothing. A response whose hash is not the murmur3 hash of the current left value is stale and
    dropped; else ``joiner(left, right)`` (``None`` result, a delete, when the right value is absent and the join
    is ``inner`` or the left value is gone) is written to ``store`` and forwarded as ``Change(new, old)`` at the
    response's timestamp.
    """

    type: Literal["fk_response_join"] = "fk_response_join"
    join: Literal["inner", "left"] = "inner"
    left_store: str
    store: str
    right_value_serde: SerdeName
    output: ClassVar[str | None] = "table"
    requires_copartitioned_input: ClassVar[bool] = True

    _serdes = field_validator("right_value_serde")(check_serde)

    def accepted_kinds(self, position: int) -> frozenset[str]:
        return frozenset({"table"}) if position == 0 else frozenset({"stream"})

    def stores(self) -> list[str]:
        return [self.left_store, self.store]

    def check_graph(self, nodes: Mapping[str, NodeBase], stores: Mapping[str, Any]) -> str | None:
        if self.left_store == self.store:
            return "leftStore and store must be different stores"
        return _check_own_stores(self, nodes, stores, {self.left_store: "key_value", self.store: "key_value"})


def versioned_table_store(nodes: Mapping[str, NodeBase], stores: Mapping[str, Any], table: str) -> Any:
    """The store spec of table node ``table`` when it is a ``table`` source materialized as ``versioned``, else
    ``None`` (only a source table is versioned here: Kafka's ``KTableSourceValueGetterSupplier``)."""
    node = nodes.get(table)
    store = getattr(node, "store", None) if getattr(node, "type", None) == "table" else None
    spec = stores.get(store) if isinstance(store, str) else None
    return spec if getattr(spec, "type", None) == "versioned" else None


def _check_own_stores(
    node: NodeBase, nodes: Mapping[str, NodeBase], stores: Mapping[str, Any], types: Mapping[str, str]
) -> str | None:
    """Each of a join's stores has the expected type and belongs to this join alone."""
    for name, expected in types.items():
        spec = stores.get(name)
        if spec is not None:
            problem = store_type_problem(spec, expected)
            if problem is not None:
                return problem
        for other in nodes.values():
            if other.name != node.name and name in other.stores():
                return f"store '{name}' is also used by node '{other.name}'; a join's stores are its own"
    return None
