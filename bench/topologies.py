"""The benchmark topologies on streamapp, built with the DSL.

- ``stateless``: flights -> filter(departed) -> map_values(summary) -> output (JSON).
- ``count``: flights -> group_by_key -> count (key-value store) -> to_stream -> output (JSON int). No
  repartition: the input is keyed by tail number already.
- ``windowed``: flights -> group_by_key -> windowed_by(hourly tumbling, 1 h grace) -> count -> output.
- ``join``: flights x table(planes) on the tail number (inner stream-table join) -> output (JSON).
- ``cpu``: the CPU-bound variant of ``stateless``: the map is ``functions.score`` (~150 us of pure-Python work
  per record), on the one-copy subset of the flights (``bench.subset``): for the 2-thread scaling target.
- ``restore``: keys -> group_by_key -> count into a 1-million-key store (the restore benchmark).

The windowed and join topologies need DSL steps that other lanes are building; until a step exists,
``build`` raises ``NotAvailable`` naming it.
"""

from __future__ import annotations

from typing import Any

from streamapp import StreamsBuilder
from streamapp.topology import TopologyDescription, TopologyError

from bench import functions
from bench.data import Dataset

__all__ = ["CPU_TOPOLOGY", "TOPOLOGIES", "NotAvailable", "build"]

TOPOLOGIES = ("stateless", "count", "windowed", "join")
CPU_TOPOLOGY = "cpu"
"""Runs at-least-once with 1 and 2 threads on ``bench.subset``'s topic (``Dataset.flights_topic`` there)."""
HOUR_MS = 3_600_000
RESTORE_STORE = "keys-store"


class NotAvailable(Exception):
    """The scenario cannot run yet (a DSL step or a guarantee the runtime does not have)."""


def _stateless(builder: StreamsBuilder, ds: Dataset, output: str) -> None:
    (
        builder.stream(ds.flights_topic, key_serde="string", value_serde="json", name="flights")
        .filter(functions.is_departed, name="departed")
        .map_values(functions.summarize, name="summary")
        .to(output, name="out")
    )


def _cpu(builder: StreamsBuilder, ds: Dataset, output: str) -> None:
    (
        builder.stream(ds.flights_topic, key_serde="string", value_serde="json", name="flights")
        .filter(functions.is_departed, name="departed")
        .map_values(functions.score, name="score")
        .to(output, name="out")
    )


def _count(builder: StreamsBuilder, ds: Dataset, output: str) -> None:
    (
        builder.stream(ds.flights_topic, key_serde="string", value_serde="json", name="flights")
        .group_by_key()
        .count(store="count-store", name="count")
        .to_stream(name="changes")
        .to(output, value_serde="json", name="out")
    )


def _windowed(builder: StreamsBuilder, ds: Dataset, output: str) -> None:
    grouped: Any = builder.stream(
        ds.flights_topic, key_serde="string", value_serde="json", name="flights"
    ).group_by_key()
    if not hasattr(grouped, "windowed_by"):
        raise NotAvailable("KGroupedStream.windowed_by (lane L3) is not in the DSL yet")
    try:
        from streamapp.dsl.windows import TimeWindows  # type: ignore[import-not-found,unused-ignore]
    except ImportError as exc:
        raise NotAvailable(f"streamapp.dsl.windows.TimeWindows: {exc}") from None
    windows = TimeWindows.of_size_and_grace(HOUR_MS, HOUR_MS)
    (
        grouped.windowed_by(windows)
        .count(store="hourly-store", name="hourly")
        .to_stream(name="changes")
        .to(output, value_serde="json", name="out")
    )


def _join(builder: StreamsBuilder, ds: Dataset, output: str) -> None:
    if not hasattr(builder, "table"):
        raise NotAvailable("StreamsBuilder.table (lane L1) is not in the DSL yet")
    flights: Any = builder.stream(ds.flights_topic, key_serde="string", value_serde="json", name="flights")
    if not hasattr(flights, "join"):
        raise NotAvailable("KStream.join (lane L2) is not in the DSL yet")
    planes: Any = builder.table(ds.planes_topic, key_serde="string", value_serde="json", name="planes")
    flights.join(planes, functions.with_plane, name="with-plane").to(output, name="out")


def _restore(builder: StreamsBuilder, ds: Dataset, output: str) -> None:
    (
        builder.stream(ds.keys_topic, key_serde="string", value_serde="bytes", name="keys")
        .group_by_key()
        .count(store=RESTORE_STORE, name="count")
        .to_stream(name="changes")
        .to(output, value_serde="long", name="out")
    )


_BUILDERS = {
    "stateless": _stateless,
    "count": _count,
    "windowed": _windowed,
    "join": _join,
    "cpu": _cpu,
    "restore": _restore,
}


def build(topology: str, ds: Dataset, output: str) -> TopologyDescription:
    """The description of benchmark topology ``topology`` writing to ``output``.

    Raises NotAvailable when the DSL (or the runtime's node set) cannot express it yet.
    """
    builder = StreamsBuilder()
    try:
        _BUILDERS[topology](builder, ds, output)
        return builder.build()
    except (AttributeError, TypeError, TopologyError) as exc:
        raise NotAvailable(f"{type(exc).__name__}: {exc}") from None
