"""The flights example topology: departed flights per carrier.

flights (key: tail number, value: JSON row) -> drop cancelled flights -> re-key by carrier (repartition
``per-carrier``) -> count per carrier in ``departures-per-carrier-store`` -> the count updates to topic
``departures-per-carrier`` (key: carrier, value: long count). ``examples/flights/streamapp.yaml`` embeds
what ``streamapp topology export flights_app.topology:build`` prints.
"""

from __future__ import annotations

from streamapp import StreamsBuilder

from flights_app import logic

INPUT_TOPIC = "flights"
OUTPUT_TOPIC = "departures-per-carrier"
STORE = "departures-per-carrier-store"


def build() -> StreamsBuilder:
    """The StreamsBuilder of the departures-per-carrier topology."""
    builder = StreamsBuilder()
    (
        builder.stream(INPUT_TOPIC, key_serde="string", value_serde="json", name="flights")
        .filter(logic.is_departed, name="departed")
        .group_by(logic.carrier, name="per-carrier", key_serde="string")
        .count(store=STORE, name="count")
        .to_stream(name="changes")
        .to(OUTPUT_TOPIC, key_serde="string", value_serde="long", name="out")
    )
    return builder
