"""KTable: a changelog stream, the latest value per key (Kafka's ``KTableImpl``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamapp.dsl.builder import StreamsBuilder, UserFunction

if TYPE_CHECKING:
    from streamapp.dsl.grouped import KGroupedTable
    from streamapp.dsl.joins import ForeignKeyExtractor
    from streamapp.dsl.streams import KStream
    from streamapp.dsl.windows import Suppressed

__all__ = ["KTable"]


class KTable:
    """A changelog stream: the latest value per key (``StreamsBuilder.table`` or an aggregation).

    Its nodes forward ``Change(new, old)`` values (``streamapp.processors.base.Change``); ``to_stream``
    turns them back into records.
    """

    def __init__(self, builder: StreamsBuilder, node: str, *, key_serde: str, value_serde: str) -> None:
        self._builder = builder
        self.node = node
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.history_retention_ms: int | None = None
        """The history retention (ms) of a versioned table (``StreamsBuilder.table(history_retention_ms=...)``),
        else ``None``."""

    def suppress(self, suppressed: Suppressed) -> KTable:
        """Only the final result of each window of this windowed table, once its window closes
        (``Suppressed.until_window_closes()``, Kafka's ``KTable.suppress``)."""
        from streamapp.dsl.windowed import suppress

        return suppress(self, suppressed)

    def filter(self, predicate: UserFunction, *, name: str | None = None) -> KTable:
        """The rows for which ``predicate(key, value)`` holds; a row that stops matching is deleted
        (Kafka's ``KTableFilter``)."""
        node = self._builder._add("filter", name, "KTABLE-FILTER-", input=self.node, predicate=predicate)
        return KTable(self._builder, node, key_serde=self.key_serde, value_serde=self.value_serde)

    def filter_not(self, predicate: UserFunction, *, name: str | None = None) -> KTable:
        """The rows for which ``predicate(key, value)`` does not hold (Kafka's ``filterNot``)."""
        node = self._builder._add("filter_not", name, "KTABLE-FILTER-", input=self.node, predicate=predicate)
        return KTable(self._builder, node, key_serde=self.key_serde, value_serde=self.value_serde)

    def map_values(self, mapper: UserFunction, *, name: str | None = None, value_serde: str | None = None) -> KTable:
        """Every row's value replaced by ``mapper(value)`` (Kafka's ``KTableMapValues``)."""
        node = self._builder._add("map_values", name, "KTABLE-MAPVALUES-", input=self.node, mapper=mapper)
        return KTable(self._builder, node, key_serde=self.key_serde, value_serde=value_serde or self.value_serde)

    def group_by(
        self,
        selector: UserFunction,
        *,
        name: str | None = None,
        key_serde: str | None = None,
        value_serde: str | None = None,
    ) -> KGroupedTable:
        """Re-key the rows by ``selector(key, value) -> (new key, new value)`` for an aggregation with adder
        and subtractor (Kafka's ``KTable.groupBy``, ``KTableRepartitionMap``). With ``name`` (``Grouped.as``)
        the group_by node is ``<name>-select`` and the repartition node (and topic suffix) ``<name>``."""
        from streamapp.dsl.grouped import KGroupedTable

        node = self._builder._add(
            "group_by",
            f"{name}-select" if name is not None else None,
            "KTABLE-SELECT-",
            input=self.node,
            selector=selector,
        )
        return KGroupedTable(
            self._builder,
            node,
            name=name,
            key_serde=key_serde or self.key_serde,
            value_serde=value_serde or self.value_serde,
        )

    def to_stream(
        self, mapper: UserFunction | None = None, *, name: str | None = None, key_serde: str | None = None
    ) -> KStream:
        """The table's updates as a KStream of ``(key, new value)`` records (``(key, None)`` for a delete).

        With ``mapper`` (Kafka's ``toStream(KeyValueMapper)``) each record's key becomes
        ``mapper(key, new value)``: as in Kafka's ``KTableImpl``, that is ``to_stream`` then ``select_key``
        (a ``KSTREAM-KEY-SELECT-`` node), so a later grouping or join repartitions; ``key_serde`` is the new
        key's serde (default: the table's).
        """
        from streamapp.dsl.streams import KStream

        node = self._builder._add("to_stream", name, "KTABLE-TOSTREAM-", input=self.node)
        stream = KStream(self._builder, node, key_serde=self.key_serde, value_serde=self.value_serde, key_changed=False)
        return stream if mapper is None else stream.select_key(mapper, key_serde=key_serde)

    def join(
        self,
        other: KTable,
        joiner: UserFunction,
        *,
        foreign_key_extractor: UserFunction | ForeignKeyExtractor | None = None,
        name: str | None = None,
        value_serde: str | None = None,
    ) -> KTable:
        """Inner table-table join on the key: ``joiner(left, right)`` while both sides have a value.

        With ``foreign_key_extractor`` (``fn(left value) -> right key``, or ``ForeignKeyExtractor.from_bi_function(
        fn(left key, left value) -> right key)``, KIP-1104): the foreign-key join of KIP-213 (Kafka's ``join(other,
        foreignKeyExtractor, joiner, TableJoined)``), ``streamapp.dsl.joins.foreign_key_join``."""
        return self._join(other, "inner", joiner, foreign_key_extractor, name, value_serde)

    def left_join(
        self,
        other: KTable,
        joiner: UserFunction,
        *,
        foreign_key_extractor: UserFunction | ForeignKeyExtractor | None = None,
        name: str | None = None,
        value_serde: str | None = None,
    ) -> KTable:
        """Left table-table join: every key of this table, ``joiner(left, right or None)``; with
        ``foreign_key_extractor``, the left foreign-key join (KIP-213), as for ``join``."""
        return self._join(other, "left", joiner, foreign_key_extractor, name, value_serde)

    def outer_join(
        self, other: KTable, joiner: UserFunction, *, name: str | None = None, value_serde: str | None = None
    ) -> KTable:
        """Outer table-table join: every key of either table, ``None`` for the missing side."""
        from streamapp.dsl.joins import table_join

        return table_join(self, other, "outer", joiner, name=name, value_serde=value_serde)

    def _join(
        self,
        other: KTable,
        join: str,
        joiner: UserFunction,
        foreign_key_extractor: UserFunction | ForeignKeyExtractor | None,
        name: str | None,
        value_serde: str | None,
    ) -> KTable:
        """A table-table join on the key, or on the foreign key ``foreign_key_extractor`` gives (KIP-213)."""
        from streamapp.dsl.joins import foreign_key_join, table_join

        if foreign_key_extractor is not None:
            return foreign_key_join(
                self, other, join, joiner, foreign_key_extractor, name=name, value_serde=value_serde
            )
        return table_join(self, other, join, joiner, name=name, value_serde=value_serde)
