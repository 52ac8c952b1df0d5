"""KGroupedStream: a stream grouped by key, ready for an aggregation (Kafka's ``KGroupedStreamImpl``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamapp.dsl.builder import StreamsBuilder
from streamapp.dsl.tables import KTable

if TYPE_CHECKING:
    from streamapp.dsl.windowed import SessionWindowedKStream, TimeWindowedKStream
    from streamapp.dsl.windows import SessionWindows, SlidingWindows, TimeWindows

__all__ = ["KGroupedStream"]


class KGroupedStream:
    """A stream grouped by key, ready for an aggregation (issue 2: ``count``)."""

    def __init__(
        self,
        builder: StreamsBuilder,
        node: str,
        *,
        name: str | None,
        key_serde: str,
        value_serde: str,
        key_changed: bool,
    ) -> None:
        self._builder = builder
        self._node = node
        self._name = name
        self.key_serde = key_serde
        self.value_serde = value_serde
        self._key_changed = key_changed

    def count(self, *, name: str | None = None, store: str | None = None) -> KTable:
        """Count records per key into key-value store ``store``; returns the KTable of counts.

        ``store`` defaults to ``<name>-store`` when ``name`` is given, else to a Kafka-style generated
        name. Records with a null key are dropped (as in Kafka Streams).
        """
        if name is not None:
            self._builder._claim(name)
        if store is not None:
            store_name = store
        elif name is not None:
            store_name = f"{name}-store"
        else:
            store_name = self._builder._new_name("KSTREAM-AGGREGATE-STATE-STORE-")
        self._builder._add_store(store_name, self.key_serde, "long")
        upstream = self._node
        if self._key_changed:
            upstream = self._builder._add(
                "repartition",
                self._name or store_name,
                "KSTREAM-REPARTITION-",
                input=upstream,
                key_serde=self.key_serde,
                value_serde=self.value_serde,
            )
        node = self._builder._add("count", name, "KSTREAM-AGGREGATE-", input=upstream, store=store_name)
        return KTable(self._builder, node, key_serde=self.key_serde, value_serde="long")

    def windowed_by(
        self, windows: TimeWindows | SlidingWindows | SessionWindows
    ) -> TimeWindowedKStream | SessionWindowedKStream:
        """This grouped stream cut into time, sliding or session ``windows`` (``streamapp.dsl.windows``), for a
        windowed count / reduce / aggregate (Kafka's ``KGroupedStream.windowedBy``)."""
        from streamapp.dsl.windowed import windowed_by

        return windowed_by(self, windows)
