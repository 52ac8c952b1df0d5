"""Joins in the DSL: GlobalKTable, and the join methods of KStream and KTable (Kafka's ``KStreamImpl`` /
``KStreamImplJoin`` / ``KTableImpl`` join paths), lowered to the node types of ``streamapp.topology.nodes.joins``
(and the ``global_table`` of ``streamapp.topology.nodes.io``).

``KStream.join`` / ``left_join`` / ``outer_join`` and ``KTable.join`` / ... delegate here. What the other
operand is picks the join:

- ``stream.join(other_stream, joiner, windows)``: windowed stream-stream join (``JoinWindows`` from
  ``streamapp.dsl.windows``); inner, left or outer;
- ``stream.join(table, joiner)``: stream-table join, inner or left; against a versioned table
  (``StreamsBuilder.table(history_retention_ms=...)``) it joins the table value as of each stream record's
  timestamp, and ``grace_ms=`` (Kafka's ``Joined.withGracePeriod``, KIP-923) buffers stream records that long
  (store ``<name>-Buffer``) so later table updates still join them;
- ``stream.join(global_table, key_selector, joiner)``: stream-GlobalKTable join, inner or left;
- ``table.join(other_table, joiner)``: table-table join, inner, left or outer;
- ``table.join(other_table, joiner, foreign_key_extractor=fn)``: foreign-key table-table join (KIP-213), inner
  or left: each left row joins the right row whose key is ``fn(left value)`` (``fn(left key, left value)`` with
  ``ForeignKeyExtractor.from_bi_function(fn)``, KIP-1104; ``foreign_key_join``).

Automatic repartitioning (Kafka's ``repartitionRequired``): a stream side whose key changed since its
last source or repartition is repartitioned first, through ``<name>-left`` (topic
``<applicationId>-<name>-left-repartition``) and, for a stream-stream join, ``<name>-right``. Default
store names: ``<name>-store`` (stream-table), ``<name>-left-store`` / ``<name>-right-store``
(table-table), ``<name>-this-join-store`` / ``<name>-other-join-store`` / ``<name>-outer-join-store``
(stream-stream). Pass ``name=`` for every join of a production topology: names derive stores and topics.

The joiner is ``fn(left value, right value) -> value`` (``None`` for a missing side); the result keeps the
left key, its serde, and the left value serde unless ``value_serde=`` says otherwise. Errors: TypeError for
a wrong combination of operands, TopologyError for names and functions (when ``build()`` exports them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from streamapp.dsl.builder import DEFAULT_KEY_SERDE, DEFAULT_VALUE_SERDE, StreamsBuilder, UserFunction
from streamapp.topology import TopologyError
from streamapp.topology.nodes.joins import VERSIONED_GRACE_ERROR

if TYPE_CHECKING:
    from streamapp.dsl.streams import KStream
    from streamapp.dsl.tables import KTable

__all__ = ["ForeignKeyExtractor", "GlobalKTable", "foreign_key_join", "global_table", "stream_join", "table_join"]

_PREFIXES = {"inner": "KSTREAM-JOIN-", "left": "KSTREAM-LEFTJOIN-", "outer": "KSTREAM-OUTERJOIN-"}
_TABLE_PREFIXES = {"inner": "KTABLE-JOIN-", "left": "KTABLE-LEFTJOIN-", "outer": "KTABLE-OUTERJOIN-"}


class GlobalKTable:
    """A table replicated in full to every worker (Kafka's ``GlobalKTable``); only joinable from a stream."""

    def __init__(self, builder: StreamsBuilder, node: str, *, key_serde: str, value_serde: str) -> None:
        self._builder = builder
        self.node = node
        """Name of the ``global_table`` node."""
        self.key_serde = key_serde
        self.value_serde = value_serde


@dataclass(frozen=True)
class ForeignKeyExtractor:
    """A foreign-key join's extractor that may read the left key (Kafka's ``ForeignKeyExtractor``, KIP-1104):
    ``from_function(fn(value))`` or ``from_bi_function(fn(key, value))``. A plain function passed as
    ``foreign_key_extractor`` is ``from_function(fn)``."""

    function: UserFunction
    takes_key: bool = False

    @classmethod
    def from_function(cls, function: UserFunction) -> ForeignKeyExtractor:
        """``function(left value) -> foreign key``."""
        return cls(function)

    @classmethod
    def from_bi_function(cls, function: UserFunction) -> ForeignKeyExtractor:
        """``function(left key, left value) -> foreign key``."""
        return cls(function, takes_key=True)


def global_table(
    builder: StreamsBuilder,
    topic: str,
    *,
    store: str | None = None,
    key_serde: str = DEFAULT_KEY_SERDE,
    value_serde: str = DEFAULT_VALUE_SERDE,
    name: str | None = None,
) -> GlobalKTable:
    """A GlobalKTable of ``topic`` in global store ``store`` (default ``<name>-store``, else generated)."""
    node_name = name if name is not None else builder._new_name("KTABLE-GLOBAL-SOURCE-")
    store_name = store if store is not None else f"{node_name}-store"
    builder._add_store(store_name, key_serde, value_serde)
    builder._add(
        "global_table",
        node_name,
        "KTABLE-GLOBAL-SOURCE-",
        topic=topic,
        store=store_name,
        key_serde=key_serde,
        value_serde=value_serde,
    )
    return GlobalKTable(builder, node_name, key_serde=key_serde, value_serde=value_serde)


def stream_join(
    stream: KStream,
    other: Any,
    join: str,
    *args: Any,
    name: str | None = None,
    store: str | None = None,
    value_serde: str | None = None,
    other_value_serde: str | None = None,
    grace_ms: int | None = None,
) -> KStream:
    """``stream.<join>(other, ...)``: dispatch on ``other`` (see the module docstring). ``grace_ms`` (KIP-923,
    Kafka's ``Joined.withGracePeriod``) applies to a join with a versioned KTable only: TopologyError with Kafka's
    message for another table, TypeError for another operand."""
    from streamapp.dsl.streams import KStream
    from streamapp.dsl.tables import KTable

    if grace_ms is not None and not isinstance(other, KTable):
        raise TypeError("grace_ms (Joined.withGracePeriod) applies only to a KStream-KTable join")
    if isinstance(other, GlobalKTable):
        return _stream_global(stream, other, join, args, name, value_serde)
    if isinstance(other, KTable):
        return _stream_table(stream, other, join, args, name, store, value_serde, grace_ms)
    if isinstance(other, KStream):
        return _stream_stream(stream, other, join, args, name, store, value_serde, other_value_serde)
    raise TypeError(f"cannot join a KStream with {type(other).__name__}; expected a KStream, KTable or GlobalKTable")


def table_join(
    table: KTable,
    other: Any,
    join: str,
    joiner: UserFunction,
    *,
    name: str | None = None,
    value_serde: str | None = None,
) -> KTable:
    """``table.<join>(other_table, joiner)``: a table-table join on the key; returns the joined KTable."""
    from streamapp.dsl.tables import KTable

    if not isinstance(other, KTable):
        raise TypeError(f"a KTable joins only another KTable, not {type(other).__name__}")
    builder = table._builder
    node_name = _name(builder, name, _TABLE_PREFIXES[join])
    left_store, right_store = f"{node_name}-left-store", f"{node_name}-right-store"
    builder._add_store(left_store, table.key_serde, table.value_serde)
    builder._add_store(right_store, other.key_serde, other.value_serde)
    builder._add(
        "table_table_join",
        node_name,
        _TABLE_PREFIXES[join],
        inputs=[table.node, other.node],
        joiner=joiner,
        join=join,
        left_store=left_store,
        right_store=right_store,
    )
    return KTable(builder, node_name, key_serde=table.key_serde, value_serde=value_serde or table.value_serde)


def foreign_key_join(
    table: KTable,
    other: Any,
    join: str,
    joiner: UserFunction,
    foreign_key_extractor: UserFunction | ForeignKeyExtractor,
    *,
    name: str | None = None,
    value_serde: str | None = None,
) -> KTable:
    """``table.<join>(other, joiner, foreign_key_extractor=fn)``: Kafka's ``KTable.join(other, foreignKeyExtractor,
    joiner, TableJoined)`` (``KTableImpl.doJoinOnForeignKey``); returns the joined KTable, keyed like ``table``.

    Lowered to ``fk_subscription_send`` -> repartition (subscription registration topic) -> ``fk_subscription_join``
    (with ``other``) -> repartition (subscription response topic) -> ``fk_response_join`` (with ``table``), see
    ``streamapp.processors.joins.foreign_key``. With ``name`` (Kafka's ``TableJoined.as``) the topics are
    ``<applicationId>-<name>-subscription-registration-topic`` / ``-subscription-response-topic``, the stores
    ``<name>-subscription-store``, ``<name>-right-store``, ``<name>-left-store`` and ``<name>-store`` (the result);
    without it, Kafka's generated ``KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-<n>-topic``,
    ``KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-<n>-topic`` and ``KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-<n>``. The
    two tables need not be co-partitioned: the subscription topic takes the right table's partition count, the
    response topic the left's. TypeError for an outer join or a non-KTable ``other``.
    """
    from streamapp.dsl.tables import KTable

    if not isinstance(other, KTable):
        raise TypeError(f"a foreign-key join joins a KTable with another KTable, not {type(other).__name__}")
    if join == "outer":
        raise TypeError("a foreign-key table-table join is inner or left, not outer (as in Kafka Streams)")
    extractor = (
        foreign_key_extractor
        if isinstance(foreign_key_extractor, ForeignKeyExtractor)
        else ForeignKeyExtractor.from_function(foreign_key_extractor)
    )
    builder = table._builder
    if name is not None:
        output = _name(builder, name, "")
        send, processor = f"{name}-subscription-registration-processor", f"{name}-subscription-processor"
        registration, response = f"{name}-subscription-registration", f"{name}-subscription-response"
        subscription_store = f"{name}-subscription-store"
    else:
        send = builder._new_name("KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-PROCESSOR-")
        registration = builder._new_name("KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-")
        subscription_store = builder._new_name("KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-")
        processor = builder._new_name("KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-")
        response = builder._new_name("KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-")
        output = builder._new_name("KTABLE-FK-JOIN-OUTPUT-")
    result_serde = value_serde or table.value_serde
    stores = {
        subscription_store: ("bytes", "bytes"),
        f"{output}-right-store": (other.key_serde, other.value_serde),
        f"{output}-left-store": (table.key_serde, table.value_serde),
        f"{output}-store": (table.key_serde, result_serde),
    }
    for store, (key_serde, store_value_serde) in stores.items():
        builder._add_store(store, key_serde, store_value_serde)
    builder._add(
        "fk_subscription_send",
        send,
        "",
        input=table.node,
        foreign_key_extractor=extractor.function,
        extractor_takes_key=extractor.takes_key or None,
        join=join,
        foreign_key_serde=other.key_serde,
        left_store=f"{output}-left-store",
    )
    _add_internal_topic(builder, registration, send)
    builder._add(
        "fk_subscription_join",
        processor,
        "",
        inputs=[registration, other.node],
        subscription_store=subscription_store,
        right_store=f"{output}-right-store",
    )
    _add_internal_topic(builder, response, processor)
    builder._add(
        "fk_response_join",
        output,
        "",
        inputs=[table.node, response],
        joiner=joiner,
        join=join,
        left_store=f"{output}-left-store",
        store=f"{output}-store",
        right_value_serde=other.value_serde,
    )
    return KTable(builder, output, key_serde=table.key_serde, value_serde=result_serde)


def _add_internal_topic(builder: StreamsBuilder, name: str, upstream: str) -> None:
    """A repartition node ``name`` of bytes, topic ``<applicationId>-<name>-topic`` (the foreign-key join's)."""
    builder._add(
        "repartition", name, "", input=upstream, key_serde="bytes", value_serde="bytes", internal_topic=f"{name}-topic"
    )


# -- the three stream joins ----------------------------------------------------------------------


def _stream_global(
    stream: KStream, table: GlobalKTable, join: str, args: tuple[Any, ...], name: str | None, value_serde: str | None
) -> KStream:
    if join == "outer":
        raise TypeError("a KStream-GlobalKTable join is inner or left, not outer")
    if len(args) != 2:
        raise TypeError("stream.join(global_table, key_selector, joiner) takes a key selector and a joiner")
    key_selector, joiner = args
    node = stream._builder._add(
        "stream_global_join",
        name,
        _PREFIXES[join],
        inputs=[stream.node, table.node],
        key_selector=key_selector,
        joiner=joiner,
        join=join,
    )
    return stream._next(node, value_serde=value_serde)


def _stream_table(
    stream: KStream,
    table: KTable,
    join: str,
    args: tuple[Any, ...],
    name: str | None,
    store: str | None,
    value_serde: str | None,
    grace_ms: int | None = None,
) -> KStream:
    if join == "outer":
        raise TypeError("a KStream-KTable join is inner or left, not outer")
    if len(args) != 1:
        raise TypeError("stream.join(table, joiner) takes one joiner")
    if grace_ms is not None and table.history_retention_ms is None:
        raise TopologyError(VERSIONED_GRACE_ERROR)
    builder = stream._builder
    node_name = _name(builder, name, _PREFIXES[join])
    left = _repartitioned(stream, f"{node_name}-left")
    store_name = store if store is not None else f"{node_name}-store"
    if table.history_retention_ms is None:
        builder._add_store(store_name, table.key_serde, table.value_serde)
    else:  # the join's copy of a versioned table is versioned alike
        builder._add_store(
            store_name,
            table.key_serde,
            table.value_serde,
            type="versioned",
            history_retention_ms=table.history_retention_ms,
        )
    buffer_store = None
    if grace_ms is not None:  # Kafka's RocksDBTimeOrderedKeyValueBuffer "<name>-Buffer" of the stream records
        buffer_store = f"{node_name}-Buffer"
        builder._add_store(buffer_store, stream.key_serde, stream.value_serde)
    builder._add(
        "stream_table_join",
        node_name,
        _PREFIXES[join],
        inputs=[left, table.node],
        joiner=args[0],
        join=join,
        store=store_name,
        grace_ms=grace_ms,
        buffer_store=buffer_store,
    )
    return stream._next(node_name, value_serde=value_serde, key_changed=False)


def _stream_stream(
    stream: KStream,
    other: KStream,
    join: str,
    args: tuple[Any, ...],
    name: str | None,
    store: str | None,
    value_serde: str | None,
    other_value_serde: str | None,
) -> KStream:
    if len(args) != 2:
        raise TypeError("stream.join(other_stream, joiner, windows) takes a joiner and JoinWindows")
    joiner, windows = args
    spec = windows.spec() if hasattr(windows, "spec") else windows
    builder = stream._builder
    node_name = _name(builder, name, _PREFIXES[join])
    left = _repartitioned(stream, f"{node_name}-left")
    right = _repartitioned(other, f"{node_name}-right")
    base = store if store is not None else node_name
    retention = max(1, spec.store_retention_ms())  # a store keeps at least 1 ms (zero-width windows, no grace)
    this_store, other_store = f"{base}-this-join-store", f"{base}-other-join-store"
    _add_join_window_store(builder, this_store, stream.key_serde, stream.value_serde, retention, spec.size)
    _add_join_window_store(
        builder, other_store, stream.key_serde, other_value_serde or other.value_serde, retention, spec.size
    )
    params: dict[str, Any] = {"left_store": this_store, "right_store": other_store}
    if join != "inner":
        params["outer_store"] = f"{base}-outer-join-store"
        builder._add_store(params["outer_store"], "bytes", "bytes")
    builder._add(
        "stream_stream_join",
        node_name,
        _PREFIXES[join],
        inputs=[left, right],
        joiner=joiner,
        join=join,
        windows=spec.model_dump(by_alias=False),
        **params,
    )
    return stream._next(node_name, value_serde=value_serde, key_changed=False)


def _repartitioned(stream: KStream, repartition_name: str) -> str:
    """The node to join from: ``stream`` itself, or a repartition of it when its key changed."""
    if not stream.key_changed:
        return stream.node
    return stream._builder._add_repartition(repartition_name, stream.node, stream.key_serde, stream.value_serde)


def _add_join_window_store(
    builder: StreamsBuilder, name: str, key_serde: str, value_serde: str, retention_ms: int, window_size_ms: int
) -> None:
    builder._add_store(name, key_serde, value_serde)
    spec = builder._stores[-1]
    spec.update(type="window", retention_ms=retention_ms, window_size_ms=window_size_ms, retain_duplicates=True)


def _name(builder: StreamsBuilder, name: str | None, prefix: str) -> str:
    """The join node's name: ``name`` (checked now, so derived names are valid) or a generated one."""
    if name is None:
        return builder._new_name(prefix)
    if not name:
        raise TopologyError("a join name must not be empty")
    return name
